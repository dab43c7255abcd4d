# Whether this build has the CUDA backend (TTRACE_HAVE_CUDA), and if so CUDA enabled as a
# language for the whole project (gpu/, its tests and benchmarks). Included from the top level:
# enable_language in a subdirectory is not seen by its siblings.
include(CheckLanguage)
set(TTRACE_HAVE_CUDA OFF)
if(TTRACE_WITH_CUDA STREQUAL "OFF")
    message(STATUS "ttrace: CUDA backend disabled (TTRACE_WITH_CUDA=OFF)")
    return()
endif()
if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
    if(TTRACE_WITH_CUDA STREQUAL "ON")
        message(FATAL_ERROR "ttrace: TTRACE_WITH_CUDA=ON but no CUDA compiler was found")
    endif()
    message(STATUS "ttrace: no CUDA compiler found, building the CPU backend only "
                   "(ttrace --backend cuda will say so)")
    return()
endif()

# Ampere and Hopper as machine code, Hopper's PTX for newer GPUs (compiled by their driver).
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80-real 90-real 90-virtual)
endif()
# The host compiler nvcc uses: the system's g++, whatever compiles the C++ side (clang in the
# sanitize preset).
if(NOT DEFINED CMAKE_CUDA_HOST_COMPILER)
    set(CMAKE_CUDA_HOST_COMPILER /usr/bin/g++)
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
set(CMAKE_CUDA_STANDARD 17)  # the newest dialect CMake 3.25 knows for nvcc
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
set(CMAKE_CUDA_RUNTIME_LIBRARY Static)
message(STATUS "ttrace: building the CUDA backend with ${CMAKE_CUDA_COMPILER} "
               "(CUDA ${CUDAToolkit_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
set(TTRACE_HAVE_CUDA ON)

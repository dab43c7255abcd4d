#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace ttrace::gpu {

// A failed CUDA call as the application's error: what was called, where, and the runtime's
// words. Thrown out of the CUDA backend, where the comparison job records it.
class CudaError : public std::runtime_error {
public:
    CudaError(cudaError_t code, const char* call, const char* file, int line)
        : std::runtime_error(std::string("CUDA error in ") + call + " (" + file + ":" +
                             std::to_string(line) + "): " + cudaGetErrorString(code)) {}
};

}  // namespace ttrace::gpu

#define TTRACE_CUDA_CHECK(call)                                                          \
    do {                                                                                 \
        const cudaError_t ttraceCudaStatus = (call);                                     \
        if (ttraceCudaStatus != cudaSuccess) {                                           \
            /* not left for CUB's check after a later launch to report again */          \
            (void)cudaGetLastError();                                                    \
            throw ::ttrace::gpu::CudaError(ttraceCudaStatus, #call, __FILE__, __LINE__); \
        }                                                                                \
    } while (false)

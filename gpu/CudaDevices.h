#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ttrace::gpu {

struct CudaDevice {
    int index = 0;
    std::string name;
    int major = 0, minor = 0;  // compute capability
    int multiprocessors = 0;
    std::size_t memoryBytes = 0;
    double peakBandwidth = 0;  // bytes/s from the memory clock and bus width; 0 if unknown
};

// What this machine offers the CUDA backend. `devices` are those this build can run on; when
// there are none, `reason` says why, in words a user can act on (no driver, a driver too old
// for this build, no device, devices too old).
struct CudaAvailability {
    std::vector<CudaDevice> devices;
    std::string reason;
    int driverVersion = 0;   // CUDA version the driver supports, 1000 * major + 10 * minor
    int runtimeVersion = 0;  // CUDA version of this build's (static) runtime
};

// Asks the CUDA runtime; never throws, and starts on machines without the NVIDIA driver.
CudaAvailability probeCuda();

// "13.0" from 13000.
std::string cudaVersionText(int version);

}  // namespace ttrace::gpu

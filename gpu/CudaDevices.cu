#include <cuda_runtime_api.h>

#include "CudaDevices.h"

namespace ttrace::gpu {

namespace {

// The oldest compute capability this build holds code for (CMAKE_CUDA_ARCHITECTURES).
constexpr int kOldestMajor = 8;

}  // namespace

std::string cudaVersionText(int version) {
    return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

CudaAvailability probeCuda() {
    CudaAvailability available;
    cudaRuntimeGetVersion(&available.runtimeVersion);
    // 0 without a driver: the static runtime starts anyway, and says so here.
    if (cudaDriverGetVersion(&available.driverVersion) != cudaSuccess ||
        available.driverVersion == 0) {
        available.reason = "no NVIDIA driver is installed";
        return available;
    }
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status == cudaErrorInsufficientDriver) {
        available.reason = "the NVIDIA driver supports CUDA " +
                           cudaVersionText(available.driverVersion) + ", this build needs " +
                           cudaVersionText(available.runtimeVersion) + " or newer";
        return available;
    }
    if (status == cudaErrorNoDevice || (status == cudaSuccess && count == 0)) {
        available.reason = "the NVIDIA driver sees no CUDA device";
        return available;
    }
    if (status != cudaSuccess) {
        available.reason = std::string("the CUDA runtime failed: ") + cudaGetErrorString(status);
        return available;
    }
    std::string tooOld;
    for (int i = 0; i < count; ++i) {
        cudaDeviceProp properties{};
        if (cudaGetDeviceProperties(&properties, i) != cudaSuccess) {
            continue;
        }
        if (properties.major < kOldestMajor) {
            tooOld += (tooOld.empty() ? "" : ", ") + std::string(properties.name) +
                      " (compute capability " + std::to_string(properties.major) + "." +
                      std::to_string(properties.minor) + ")";
            continue;
        }
        CudaDevice device;
        device.index = i;
        device.name = properties.name;
        device.major = properties.major;
        device.minor = properties.minor;
        device.multiprocessors = properties.multiProcessorCount;
        device.memoryBytes = properties.totalGlobalMem;
        int clockKhz = 0;
        if (cudaDeviceGetAttribute(&clockKhz, cudaDevAttrMemoryClockRate, i) == cudaSuccess) {
            // Double data rate: two transfers per clock over the whole bus.
            device.peakBandwidth = 2.0 * clockKhz * 1e3 * properties.memoryBusWidth / 8.0;
        }
        available.devices.push_back(device);
    }
    // A device passed over above leaves its error behind, for a later launch to report.
    (void)cudaGetLastError();
    if (available.devices.empty()) {
        available.reason = "no device this build runs on (compute capability " +
                           std::to_string(kOldestMajor) + ".0 or newer): " + tooOld;
    }
    return available;
}

}  // namespace ttrace::gpu

// The CUDA backend's throughput on the first GPU, as fractions of what the device can move:
// the reduction over data already on the device (bytes of R and D read per second) against
// the memory's nominal peak and a device-to-device copy measured here; and the engine fed from
// page-locked host memory (the comparison job's path) against a plain host-to-device copy.
// Prints a Markdown table (scripts/gpu-check.sh). Usage: bench_cuda_kernels [ELEMENTS]
#include <cuda_runtime_api.h>
#include <thrust/system/cuda/execution_policy.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "CudaCheck.h"
#include "CudaDevices.h"
#include "CudaEngine.h"
#include "DeviceScratch.h"
#include "ReduceRun.h"

using namespace ttrace::gpu;

namespace {

constexpr int kRepeats = 10;

double seconds(std::chrono::steady_clock::duration d) {
    return std::chrono::duration<double>(d).count();
}

// Median time of kRepeats calls of `work`, after two untimed ones.
template <class Work>
double medianSeconds(Work&& work) {
    work();
    work();
    std::vector<double> times;
    for (int i = 0; i < kRepeats; ++i) {
        const auto start = std::chrono::steady_clock::now();
        work();
        times.push_back(seconds(std::chrono::steady_clock::now() - start));
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    const CudaAvailability available = probeCuda();
    if (available.devices.empty()) {
        std::fprintf(stderr, "bench_cuda_kernels: no CUDA device: %s\n", available.reason.c_str());
        return 2;
    }
    const CudaDevice& device = available.devices.front();
    // Elements per operand: at most 2^28 (1 GiB of fp32) and an eighth of the device's memory.
    std::size_t elements = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : std::size_t{1} << 28;
    elements = std::min(elements, device.memoryBytes / 8 / sizeof(float));
    try {
        TTRACE_CUDA_CHECK(cudaSetDevice(device.index));
        const std::size_t bytes = elements * sizeof(float);
        void *reference = nullptr, *distributed = nullptr;
        TTRACE_CUDA_CHECK(cudaMalloc(&reference, bytes));
        TTRACE_CUDA_CHECK(cudaMalloc(&distributed, bytes));
        // Finite values of every type (0x3c.. and 0x3d.. words): the work does not depend on
        // them, only on whether they are finite.
        TTRACE_CUDA_CHECK(cudaMemset(reference, 0x3c, bytes));
        TTRACE_CUDA_CHECK(cudaMemset(distributed, 0x3d, bytes));
        cudaStream_t stream = nullptr;
        TTRACE_CUDA_CHECK(cudaStreamCreate(&stream));

        const double copySeconds = medianSeconds([&] {
            TTRACE_CUDA_CHECK(
                cudaMemcpyAsync(distributed, reference, bytes, cudaMemcpyDeviceToDevice, stream));
            TTRACE_CUDA_CHECK(cudaStreamSynchronize(stream));
        });
        TTRACE_CUDA_CHECK(cudaMemset(distributed, 0x3d, bytes));
        const double copyBandwidth = 2.0 * static_cast<double>(bytes) / copySeconds;

        std::printf(
            "Device: %s (compute capability %d.%d, %d multiprocessors, %.0f GiB), "
            "CUDA driver %s, runtime %s; %zu elements per operand.\n\n",
            device.name.c_str(), device.major, device.minor, device.multiprocessors,
            static_cast<double>(device.memoryBytes) / (1 << 30),
            cudaVersionText(available.driverVersion).c_str(),
            cudaVersionText(available.runtimeVersion).c_str(), elements);
        std::printf(
            "| measurement | GB/s | of nominal peak (%.0f GB/s) | of device copy (%.0f GB/s) |\n",
            device.peakBandwidth / 1e9, copyBandwidth / 1e9);
        std::printf("|---|---|---|---|\n");
        DeviceScratch scratch;
        for (const StoredType type : {StoredType::F32, StoredType::F16, StoredType::BF16,
                                      StoredType::E4M3, StoredType::E5M2}) {
            RowRun run;
            run.reference = {reference, type, 1.0F};
            run.distributed = {distributed, type, 1.0F};
            run.rowLength = run.referenceStride = elements;
            run.rows = 1;
            const double s =
                medianSeconds([&] { (void)reduceRun(thrust::cuda::par(scratch).on(stream), run); });
            const double rate = 2.0 * static_cast<double>(elements * storedBytes(type)) / s;
            std::printf("| reduction on the device, %s | %.0f | %.2f | %.2f |\n",
                        storedTypeName(type), rate / 1e9,
                        device.peakBandwidth > 0 ? rate / device.peakBandwidth : 0.0,
                        rate / copyBandwidth);
        }

        // The comparison job's path: fp32 from page-locked host memory, copies overlapped with
        // reductions, against a plain copy of the same bytes to the device.
        const std::size_t hostElements = std::min<std::size_t>(elements, std::size_t{1} << 26);
        const std::size_t hostBytes = hostElements * sizeof(float);
        auto* hostReference = static_cast<float*>(CudaEngine::allocatePinned(hostBytes));
        auto* hostDistributed = static_cast<float*>(CudaEngine::allocatePinned(hostBytes));
        std::fill(hostReference, hostReference + hostElements, 1.0F);
        std::fill(hostDistributed, hostDistributed + hostElements, 1.0F + 0x1p-20F);
        const double uploadSeconds = medianSeconds([&] {
            TTRACE_CUDA_CHECK(cudaMemcpyAsync(reference, hostReference, hostBytes,
                                              cudaMemcpyHostToDevice, stream));
            TTRACE_CUDA_CHECK(cudaMemcpyAsync(distributed, hostDistributed, hostBytes,
                                              cudaMemcpyHostToDevice, stream));
            TTRACE_CUDA_CHECK(cudaStreamSynchronize(stream));
        });
        const double uploadRate = 2.0 * static_cast<double>(hostBytes) / uploadSeconds;
        const CudaEngine engine(available.devices);
        RowRun fromHost;
        fromHost.reference = {hostReference, StoredType::F32, 1.0F};
        fromHost.distributed = {hostDistributed, StoredType::F32, 1.0F};
        fromHost.rowLength = fromHost.referenceStride = hostElements;
        fromHost.rows = 1;
        const double engineSeconds = medianSeconds([&] { (void)engine.compare(fromHost); });
        const double engineRate = 2.0 * static_cast<double>(hostBytes) / engineSeconds;
        std::printf("| host-to-device copy, page-locked | %.0f | | |\n", uploadRate / 1e9);
        std::printf("| engine from page-locked host memory, fp32 | %.0f (%.2f of the copy) | | |\n",
                    engineRate / 1e9, engineRate / uploadRate);
        CudaEngine::freePinned(hostReference);
        CudaEngine::freePinned(hostDistributed);
        cudaFree(reference);
        cudaFree(distributed);
        cudaStreamDestroy(stream);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_cuda_kernels: %s\n", e.what());
        return 1;
    }
    return 0;
}

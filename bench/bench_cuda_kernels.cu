// The CUDA backend's throughput on the first GPU, as fractions of what the device can move:
// the reduction over data already on the device (bytes of R and D read per second) against
// the memory's nominal peak and a device-to-device copy measured here; and the engine fed from
// page-locked host memory (the comparison job's path) against a plain host-to-device copy, for
// each stored format, with the bytes it moves across PCIe per element compared.
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

// Bytes of a stored word per element: E2M1 packs two a byte.
double wordBytesPerElement(StoredType type) {
    return type == StoredType::E2M1 ? 0.5 : static_cast<double>(storedBytes(type));
}

// A run of `elements` stored words of `type` at `reference` and `distributed`, scaled per tensor,
// or by `table` (one entry per `block` elements, a single row) where given.
RowRun wordRun(const void* reference, const void* distributed, StoredType type,
               std::size_t elements, const float* table = nullptr, std::size_t block = 0) {
    RowRun run;
    run.reference.data = reference;
    run.distributed.data = distributed;
    run.reference.type = run.distributed.type = type;
    for (Operand* operand : {&run.reference, &run.distributed}) {
        operand->stride = elements;
        if (table != nullptr) {
            operand->scales = table;
            operand->scaleStride = elements;
            operand->pitch = elements;
            operand->rowEntries = (elements + block - 1) / block;
            operand->blockColumns = block;
        }
    }
    run.rowLength = elements;
    run.rows = 1;
    return run;
}

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
        float* deviceScales = nullptr;  // one per 16 elements: the finest block (NVFP4's)
        TTRACE_CUDA_CHECK(cudaMalloc(&deviceScales, (elements / 16 + 1) * sizeof(float)));
        TTRACE_CUDA_CHECK(cudaMemset(deviceScales, 0x3f, (elements / 16 + 1) * sizeof(float)));
        struct Format {
            const char* name;
            StoredType type;
            std::size_t block;  // elements per scale; 0: one per tensor
        };
        const Format formats[] = {{"fp32", StoredType::F32, 0},
                                  {"fp16", StoredType::F16, 0},
                                  {"bf16", StoredType::BF16, 0},
                                  {"fp8_e4m3, per tensor", StoredType::E4M3, 0},
                                  {"fp8_e5m2, per tensor", StoredType::E5M2, 0},
                                  {"MXFP8 (e4m3, a scale per 32)", StoredType::E4M3, 32},
                                  {"NVFP4 (e2m1, a scale per 16)", StoredType::E2M1, 16}};
        for (const Format& format : formats) {
            const RowRun run = wordRun(reference, distributed, format.type, elements,
                                       format.block ? deviceScales : nullptr, format.block);
            const double s =
                medianSeconds([&] { (void)reduceRun(thrust::cuda::par(scratch).on(stream), run); });
            const double rate =
                2.0 * static_cast<double>(elements) * wordBytesPerElement(format.type) / s;
            std::printf("| reduction on the device, %s | %.0f | %.2f | %.2f |\n", format.name,
                        rate / 1e9, device.peakBandwidth > 0 ? rate / device.peakBandwidth : 0.0,
                        rate / copyBandwidth);
        }

        // The comparison job's path: stored words from page-locked host memory, copies
        // overlapped with reductions, against a plain copy of the same bytes to the device.
        const std::size_t hostElements = std::min<std::size_t>(elements, std::size_t{1} << 26);
        const std::size_t hostBytes = hostElements * sizeof(float);
        auto* hostReference = static_cast<float*>(CudaEngine::allocatePinned(hostBytes));
        auto* hostDistributed = static_cast<float*>(CudaEngine::allocatePinned(hostBytes));
        auto* hostScales = static_cast<float*>(
            CudaEngine::allocatePinned((hostElements / 16 + 1) * sizeof(float)));
        std::fill(hostReference, hostReference + hostElements, 1.0F);
        std::fill(hostDistributed, hostDistributed + hostElements, 1.0F + 0x1p-20F);
        std::fill(hostScales, hostScales + hostElements / 16 + 1, 0.75F);
        const double uploadSeconds = medianSeconds([&] {
            TTRACE_CUDA_CHECK(cudaMemcpyAsync(reference, hostReference, hostBytes,
                                              cudaMemcpyHostToDevice, stream));
            TTRACE_CUDA_CHECK(cudaMemcpyAsync(distributed, hostDistributed, hostBytes,
                                              cudaMemcpyHostToDevice, stream));
            TTRACE_CUDA_CHECK(cudaStreamSynchronize(stream));
        });
        const double uploadRate = 2.0 * static_cast<double>(hostBytes) / uploadSeconds;
        std::printf("| host-to-device copy, page-locked | %.0f | | |\n\n", uploadRate / 1e9);
        std::printf(
            "| engine from page-locked host memory | bytes across PCIe per element (R and D) | "
            "G elements/s | of fp32's | of the copy's GB/s |\n");
        std::printf("|---|---|---|---|---|\n");
        const CudaEngine engine(available.devices);
        double fp32Rate = 0;
        for (const Format& format : formats) {
            const RowRun run = wordRun(hostReference, hostDistributed, format.type, hostElements,
                                       format.block ? hostScales : nullptr, format.block);
            const std::uint64_t before = engine.bytesCopied();
            (void)engine.compare(run);
            const double perElement = static_cast<double>(engine.bytesCopied() - before) /
                                      static_cast<double>(hostElements);
            const double engineSeconds = medianSeconds([&] { (void)engine.compare(run); });
            const double rate = static_cast<double>(hostElements) / engineSeconds;
            fp32Rate = fp32Rate > 0 ? fp32Rate : rate;
            std::printf("| %s | %.3f | %.2f | %.2f | %.2f |\n", format.name, perElement, rate / 1e9,
                        rate / fp32Rate, rate * perElement / uploadRate);
        }
        CudaEngine::freePinned(hostScales);
        cudaFree(deviceScales);
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

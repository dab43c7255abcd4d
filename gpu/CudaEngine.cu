#include <cuda_runtime_api.h>
#include <thrust/system/cuda/execution_policy.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "CopyPlan.h"
#include "CudaCheck.h"
#include "CudaEngine.h"
#include "DeviceScratch.h"
#include "ElementProfile.h"
#include "ReduceRun.h"
#include "RowChunks.h"

namespace ttrace::gpu {

namespace {

constexpr int kSlots = 2;  // chunk k is reduced while chunk k + 1 is copied

// Makes `device` current for the calling thread while it lives.
class DeviceScope {
public:
    explicit DeviceScope(int device) {
        TTRACE_CUDA_CHECK(cudaGetDevice(&previous_));
        TTRACE_CUDA_CHECK(cudaSetDevice(device));
    }
    ~DeviceScope() { cudaSetDevice(previous_); }
    DeviceScope(const DeviceScope&) = delete;
    DeviceScope& operator=(const DeviceScope&) = delete;

private:
    int previous_ = 0;
};

// The device's slot for one operand of a chunk: its words, and its scales where it has a
// table. A table is built in pageable memory, and the driver may stage a copy from there by
// waiting for the copies queued before it on the stream (the chunk's words: CUDA's "API
// synchronization behavior"), which would hold the host until they land and keep the next
// chunk's copy from overlapping this one's reduction. It goes through `stagedScales`,
// page-locked, which the chunk two after reuses once this one's reduction (queued after its
// copy) has returned.
struct OperandSlot {
    GrowingBuffer words;
    GrowingBuffer scales;
    GrowingPinned stagedScales;
};

// Queues the copy of `what` (bytes) from `from` to `to` on `stream`: one span, else rows the
// copy engine packs, one by one where their pitch is past what it takes (`maxPitch`).
void queueRows(void* to, const void* from, const CopyRows& what, std::size_t maxPitch,
               cudaStream_t stream) {
    const auto* source = static_cast<const std::byte*>(from) + what.first;
    auto* target = static_cast<std::byte*>(to);
    if (what.units() == 0) {
        return;
    }
    if (what.rows == 1) {
        TTRACE_CUDA_CHECK(
            cudaMemcpyAsync(target, source, what.width, cudaMemcpyHostToDevice, stream));
    } else if (what.pitch <= maxPitch) {
        TTRACE_CUDA_CHECK(cudaMemcpy2DAsync(target, what.width, source, what.pitch, what.width,
                                            what.rows, cudaMemcpyHostToDevice, stream));
    } else {
        for (std::size_t r = 0; r < what.rows; ++r) {
            TTRACE_CUDA_CHECK(cudaMemcpyAsync(target + r * what.width, source + r * what.pitch,
                                              what.width, cudaMemcpyHostToDevice, stream));
        }
    }
}

// Queues the copy of the words (and scales) that `host` holds for a chunk of `rows` rows of
// `rowLength` on `stream`, as planCopy says. Returns the operand as the device reads it; adds
// the bytes queued to `bytes`.
Operand queueCopy(const Operand& host, std::size_t rowLength, std::size_t rows, OperandSlot& slot,
                  std::size_t maxPitch, cudaStream_t stream, std::atomic<std::uint64_t>& bytes) {
    const CopyPlan plan = planCopy(host, rowLength, rows);
    void* words = slot.words.reserve(plan.words.units());
    queueRows(words, host.data, plan.words, maxPitch, stream);
    bytes += plan.words.units();
    void* scales = nullptr;
    if (plan.scales.rows > 0) {
        const std::size_t n = plan.scales.units() * sizeof(float);
        scales = slot.scales.reserve(n);
        void* staged = slot.stagedScales.reserve(n);
        gatherRows(host.scales, plan.scales, sizeof(float), staged);
        TTRACE_CUDA_CHECK(cudaMemcpyAsync(scales, staged, n, cudaMemcpyHostToDevice, stream));
        bytes += n;
    }
    return placed(plan, words, static_cast<const float*>(scales));
}

}  // namespace

struct CudaEngine::Lane {
    Lane(int deviceIndex, std::size_t chunkElements) : device(deviceIndex) {
        DeviceScope scope(device);
        try {
            TTRACE_CUDA_CHECK(cudaStreamCreateWithFlags(&copyStream, cudaStreamNonBlocking));
            TTRACE_CUDA_CHECK(cudaStreamCreateWithFlags(&computeStream, cudaStreamNonBlocking));
            int pitch = 0;
            TTRACE_CUDA_CHECK(cudaDeviceGetAttribute(&pitch, cudaDevAttrMaxPitch, device));
            maxPitch = static_cast<std::size_t>(pitch);
            // What the element-error profile needs: fp32 values of a chunk in every slot.
            const std::size_t bytes = chunkElements * sizeof(float);
            for (int s = 0; s < kSlots; ++s) {
                TTRACE_CUDA_CHECK(cudaEventCreateWithFlags(&copied[s], cudaEventDisableTiming));
                reference[s][0].words.reserve(bytes);
                distributed[s][0].words.reserve(bytes);
            }
        } catch (...) {
            release();  // no destructor runs for a lane half made
            throw;
        }
    }
    ~Lane() {
        cudaSetDevice(device);  // the slots are freed on it, after this body
        release();
    }
    // Waits for what the streams still hold (a failed call leaves copies from the caller's
    // buffers in flight, and the caller may refill them once this returns), then destroys
    // the handles made so far.
    void release() {
        for (const cudaStream_t stream : {copyStream, computeStream}) {
            if (stream != nullptr) {
                cudaStreamSynchronize(stream);
                cudaStreamDestroy(stream);
            }
        }
        for (const cudaEvent_t event : copied) {
            if (event != nullptr) {
                cudaEventDestroy(event);
            }
        }
        (void)cudaGetLastError();  // what failed here is not a later launch's
    }
    Lane(const Lane&) = delete;
    Lane& operator=(const Lane&) = delete;

    int device;
    cudaStream_t copyStream = nullptr;
    cudaStream_t computeStream = nullptr;
    std::size_t maxPitch = 0;  // the widest pitch a 2D copy takes, in bytes
    cudaEvent_t copied[kSlots] = {};
    // [slot][summand]
    OperandSlot reference[kSlots][kMaxSummands];
    OperandSlot distributed[kSlots][kMaxSummands];
    DeviceScratch scratch;
    // The element-error profile's working memory, kept: a cudaFree per part would wait for
    // the whole device, every other lane's work on it included.
    GrowingBuffer profileMemory;
};

void CudaEngine::LaneDeleter::operator()(Lane* lane) const {
    delete lane;
}

CudaEngine::CudaEngine(std::vector<CudaDevice> devices, std::size_t chunkElements)
    : devices_(std::move(devices)),
      chunkElements_(std::min(std::max<std::size_t>(chunkElements, 1), kMaxChunkElements)) {}

CudaEngine::~CudaEngine() = default;

CudaEngine::LanePtr CudaEngine::borrowLane() const {
    int device = 0;
    {
        const std::lock_guard lock(mutex_);
        if (!idle_.empty()) {
            LanePtr lane = std::move(idle_.back());
            idle_.pop_back();
            return lane;
        }
        device = devices_[lanesMade_++ % devices_.size()].index;
    }
    return LanePtr(new Lane(device, chunkElements_));
}

void CudaEngine::returnLane(LanePtr lane) const {
    const std::lock_guard lock(mutex_);
    idle_.push_back(std::move(lane));
}

ErrorAccumulator CudaEngine::compare(const RowRun& run) const {
    std::vector<RowChunk> chunks;
    forEachChunk(run.rowLength, run.rows, chunkElements_,
                 [&chunks](const RowChunk& chunk) { chunks.push_back(chunk); });
    ErrorAccumulator total;
    if (chunks.empty()) {
        return total;
    }
    LanePtr lane = borrowLane();
    {
        DeviceScope scope(lane->device);
        std::vector<RowRun> onDevice(kSlots);
        // Chunk k into slot k % 2.
        const auto copyChunk = [&](std::size_t k) {
            const RowRun part = chunkOf(run, chunks[k]);
            const int slot = static_cast<int>(k % kSlots);
            RowRun& device = onDevice[static_cast<std::size_t>(slot)];
            device = part;
            const auto copy = [&](const Operand& host, OperandSlot& to) {
                return queueCopy(host, part.rowLength, part.rows, to, lane->maxPitch,
                                 lane->copyStream, bytesCopied_);
            };
            device.reference = copy(part.reference, lane->reference[slot][0]);
            device.distributed = copy(part.distributed, lane->distributed[slot][0]);
            for (int s = 0; s + 1 < part.referenceSummands; ++s) {
                device.moreReference[s] = copy(part.moreReference[s], lane->reference[slot][s + 1]);
            }
            for (int s = 0; s + 1 < part.distributedSummands; ++s) {
                device.moreDistributed[s] =
                    copy(part.moreDistributed[s], lane->distributed[slot][s + 1]);
            }
            TTRACE_CUDA_CHECK(cudaEventRecord(lane->copied[slot], lane->copyStream));
        };
        copyChunk(0);
        for (std::size_t k = 0; k < chunks.size(); ++k) {
            // Slot (k + 1) % 2 last held chunk k - 1, whose reduction has returned.
            if (k + 1 < chunks.size()) {
                copyChunk(k + 1);
            }
            const int slot = static_cast<int>(k % kSlots);
            TTRACE_CUDA_CHECK(cudaStreamWaitEvent(lane->computeStream, lane->copied[slot], 0));
            const Partial partial =
                reduceRun(thrust::cuda::par(lane->scratch).on(lane->computeStream),
                          onDevice[static_cast<std::size_t>(slot)]);
            total.merge(
                toAccumulator(partial, chunks[k].elements(), chunks[k].position(run.rowLength)));
        }
    }
    returnLane(std::move(lane));
    return total;
}

void CudaEngine::profile(const ProfilePiece& piece, ErrorHistogram& histogram,
                         ErrorImage& image) const {
    if (piece.rows * piece.rowLength == 0) {
        return;
    }
    LanePtr lane = borrowLane();
    {
        DeviceScope scope(lane->device);
        const cudaStream_t stream = lane->computeStream;
        const BinEdges edges = binEdges();
        std::vector<int> slotEnds(kHistogramSlots), pixels;
        std::vector<float> maxima;
        forEachProfilePart(
            piece, image.width, chunkElements_, [&](const ProfileRun& part, std::size_t) {
                const std::size_t n = part.elements();
                // R and D in the lane's first slot; the working memory in the second and in one
                // more buffer (3 n + the part's pixel rows and columns + the slot ends).
                const ProfilePiece& host = part.piece;
                const std::size_t extra = 3 * n + host.rows + host.rowLength + kHistogramSlots;
                auto* buffer = static_cast<int*>(lane->profileMemory.reserve(extra * sizeof(int)));
                ProfileRun onDevice = part;
                auto* reference = static_cast<float*>(lane->reference[0][0].words.get());
                auto* values = static_cast<float*>(lane->distributed[0][0].words.get());
                int* pixelRows = buffer + 3 * n;
                int* pixelColumns = buffer + 3 * n + host.rows;
                onDevice.piece.reference = reference;
                onDevice.piece.values = values;
                onDevice.piece.pixelRows = pixelRows;
                onDevice.piece.pixelColumns = pixelColumns;
                const ProfileScratch scratch{static_cast<int*>(lane->reference[1][0].words.get()),
                                             static_cast<int*>(lane->distributed[1][0].words.get()),
                                             reinterpret_cast<float*>(buffer),
                                             buffer + n,
                                             reinterpret_cast<float*>(buffer + 2 * n),
                                             buffer + 3 * n + host.rows + host.rowLength};
                const auto upload = [&](void* device, const void* from, std::size_t bytes) {
                    TTRACE_CUDA_CHECK(
                        cudaMemcpyAsync(device, from, bytes, cudaMemcpyHostToDevice, stream));
                };
                upload(reference, host.reference, n * sizeof(float));
                upload(values, host.values, n * sizeof(float));
                upload(pixelRows, host.pixelRows, host.rows * sizeof(int));
                upload(pixelColumns, host.pixelColumns, host.rowLength * sizeof(int));
                const std::size_t count = profileRun(thrust::cuda::par(lane->scratch).on(stream),
                                                     onDevice, edges, scratch);
                pixels.resize(count);
                maxima.resize(count);
                TTRACE_CUDA_CHECK(cudaMemcpyAsync(slotEnds.data(), scratch.slotEnds,
                                                  kHistogramSlots * sizeof(int),
                                                  cudaMemcpyDeviceToHost, stream));
                TTRACE_CUDA_CHECK(cudaMemcpyAsync(pixels.data(), scratch.pixelsOut,
                                                  count * sizeof(int), cudaMemcpyDeviceToHost,
                                                  stream));
                TTRACE_CUDA_CHECK(cudaMemcpyAsync(maxima.data(), scratch.maximaOut,
                                                  count * sizeof(float), cudaMemcpyDeviceToHost,
                                                  stream));
                TTRACE_CUDA_CHECK(cudaStreamSynchronize(stream));
                mergeProfile(slotEnds.data(), pixels.data(), maxima.data(), count, histogram,
                             image);
            });
    }
    returnLane(std::move(lane));
}

void* CudaEngine::allocatePinned(std::size_t bytes) {
    void* memory = nullptr;
    TTRACE_CUDA_CHECK(cudaHostAlloc(&memory, bytes, cudaHostAllocPortable));
    return memory;
}

void CudaEngine::freePinned(void* memory) {
    cudaFreeHost(memory);
}

}  // namespace ttrace::gpu

#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "CudaCheck.h"

namespace ttrace::gpu {

// Memory that grows to the largest request and is kept, allocated by `Allocate` and freed by
// `Release` (GrowingBuffer, GrowingPinned).
template <cudaError_t (*Allocate)(void**, std::size_t), cudaError_t (*Release)(void*)>
class GrowingMemory {
public:
    GrowingMemory() = default;
    ~GrowingMemory() { Release(memory_); }
    GrowingMemory(const GrowingMemory&) = delete;
    GrowingMemory& operator=(const GrowingMemory&) = delete;
    void* reserve(std::size_t bytes) {
        if (bytes > size_) {
            TTRACE_CUDA_CHECK(Release(memory_));
            memory_ = nullptr;
            size_ = 0;
            TTRACE_CUDA_CHECK(Allocate(&memory_, bytes));
            size_ = bytes;
        }
        return memory_;
    }
    void* get() const { return memory_; }

private:
    void* memory_ = nullptr;
    std::size_t size_ = 0;
};

inline cudaError_t allocateDevice(void** memory, std::size_t bytes) {
    return cudaMalloc(memory, bytes);
}
inline cudaError_t allocatePortablePinned(void** memory, std::size_t bytes) {
    return cudaHostAlloc(memory, bytes, cudaHostAllocPortable);
}

// Device memory: a lane's slots, whose runs vary in type and in how many scales they bring,
// and Thrust's scratch.
using GrowingBuffer = GrowingMemory<allocateDevice, cudaFree>;
// Page-locked host memory: a slot's staged scale table.
using GrowingPinned = GrowingMemory<allocatePortablePinned, cudaFreeHost>;

// Thrust's scratch memory for the reductions on one stream, kept from call to call: a cudaMalloc
// and cudaFree around every reduction would serialise the device.
class DeviceScratch {
public:
    using value_type = char;
    DeviceScratch() = default;
    DeviceScratch(const DeviceScratch&) = delete;
    DeviceScratch& operator=(const DeviceScratch&) = delete;

    char* allocate(std::ptrdiff_t bytes) {
        const auto size = static_cast<std::size_t>(bytes);
        if (inUse_) {  // a second request while the first is held: its own block
            void* extra = nullptr;
            TTRACE_CUDA_CHECK(cudaMalloc(&extra, size));
            return static_cast<char*>(extra);
        }
        char* block = static_cast<char*>(block_.reserve(size));
        inUse_ = true;
        return block;
    }
    void deallocate(char* memory, std::size_t) {
        if (memory == block_.get()) {
            inUse_ = false;
        } else {
            cudaFree(memory);
        }
    }

private:
    GrowingBuffer block_;
    bool inUse_ = false;
};

}  // namespace ttrace::gpu

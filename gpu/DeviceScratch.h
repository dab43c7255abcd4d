#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "CudaCheck.h"

namespace ttrace::gpu {

// Device memory that grows to the largest request and is kept: a lane's slots, whose runs vary
// in type and in how many scales they bring, and Thrust's scratch.
class GrowingBuffer {
public:
    GrowingBuffer() = default;
    ~GrowingBuffer() { cudaFree(memory_); }
    GrowingBuffer(const GrowingBuffer&) = delete;
    GrowingBuffer& operator=(const GrowingBuffer&) = delete;
    void* reserve(std::size_t bytes) {
        if (bytes > size_) {
            TTRACE_CUDA_CHECK(cudaFree(memory_));
            memory_ = nullptr;
            size_ = 0;
            TTRACE_CUDA_CHECK(cudaMalloc(&memory_, bytes));
            size_ = bytes;
        }
        return memory_;
    }
    void* get() const { return memory_; }

private:
    void* memory_ = nullptr;
    std::size_t size_ = 0;
};

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

#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "CudaCheck.h"

namespace ttrace::gpu {

// Thrust's scratch memory for the reductions on one stream, kept from call to call: a cudaMalloc
// and cudaFree around every reduction would serialise the device.
class DeviceScratch {
public:
    using value_type = char;
    DeviceScratch() = default;
    DeviceScratch(const DeviceScratch&) = delete;
    DeviceScratch& operator=(const DeviceScratch&) = delete;
    ~DeviceScratch() { cudaFree(block_); }

    char* allocate(std::ptrdiff_t bytes) {
        const auto size = static_cast<std::size_t>(bytes);
        if (inUse_) {  // a second request while the first is held: its own block
            void* extra = nullptr;
            TTRACE_CUDA_CHECK(cudaMalloc(&extra, size));
            return static_cast<char*>(extra);
        }
        if (size > size_) {
            TTRACE_CUDA_CHECK(cudaFree(block_));
            block_ = nullptr;
            size_ = 0;
            TTRACE_CUDA_CHECK(cudaMalloc(&block_, size));
            size_ = size;
        }
        inUse_ = true;
        return static_cast<char*>(block_);
    }
    void deallocate(char* memory, std::size_t) {
        if (memory == block_) {
            inUse_ = false;
        } else {
            cudaFree(memory);
        }
    }

private:
    void* block_ = nullptr;
    std::size_t size_ = 0;
    bool inUse_ = false;
};

}  // namespace ttrace::gpu

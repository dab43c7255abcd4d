#include "CudaBackend.h"

#include <map>
#include <string>

#include "CudaEngine.h"
#include "StoredOperand.h"

namespace ttrace::gpu {

namespace {

// "NVIDIA H200", "2 x NVIDIA H200", "NVIDIA A100, NVIDIA H100".
std::string describeDevices(const std::vector<CudaDevice>& devices) {
    std::map<std::string, int> counts;
    for (const CudaDevice& device : devices) {
        ++counts[device.name];
    }
    std::string text;
    for (const auto& [name, count] : counts) {
        text +=
            (text.empty() ? "" : ", ") + (count > 1 ? std::to_string(count) + " x " : "") + name;
    }
    return text;
}

class CudaBackend final : public MetricsBackend {
public:
    explicit CudaBackend(const CudaAvailability& available)
        : engine_(available.devices), name_("CUDA on " + describeDevices(available.devices)) {}

    std::string name() const override { return name_; }

    HostBuffer allocateHostBuffer(std::size_t elements) const override {
        return HostBuffer(static_cast<float*>(CudaEngine::allocatePinned(elements * sizeof(float))),
                          {[](float* memory) { CudaEngine::freePinned(memory); }});
    }

    ErrorAccumulator compare(const float* reference, const float* distributed,
                             std::size_t n) const override {
        return compareRows(reference, n, distributed, n, 1);
    }

    ErrorAccumulator compareRows(const float* reference, std::size_t referenceStride,
                                 const float* distributed, std::size_t rowLength,
                                 std::size_t rows) const override {
        RowRun run;
        run.reference = floatsAt(reference, referenceStride);
        run.distributed = floatsAt(distributed, rowLength);
        run.rowLength = rowLength;
        run.rows = rows;
        return engine_.compare(run);
    }

    bool comparesStoredWords() const override { return true; }

    std::uint64_t bytesToDevice() const override { return engine_.bytesCopied(); }

    std::size_t summandsPerSide() const override { return kMaxSummands; }

    ErrorAccumulator compareStored(const StoredRun& stored) const override {
        if (const auto run = rowRunOf(stored)) {
            return engine_.compare(*run);
        }
        return MetricsBackend::compareStored(stored);  // more summands than a run holds
    }

    void profile(const ProfilePiece& piece, ErrorHistogram& histogram,
                 ErrorImage& image) const override {
        engine_.profile(piece, histogram, image);
    }

private:
    CudaEngine engine_;
    std::string name_;
};

}  // namespace

std::unique_ptr<MetricsBackend> makeCudaBackend(const CudaAvailability& available) {
    return std::make_unique<CudaBackend>(available);
}

}  // namespace ttrace::gpu

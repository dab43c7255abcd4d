#include "StoredOperand.h"

namespace ttrace::gpu {

namespace {

StoredType storedTypeOf(DType dtype) {
    switch (dtype) {
        case DType::F32:
            return StoredType::F32;
        case DType::F16:
            return StoredType::F16;
        case DType::BF16:
            return StoredType::BF16;
        case DType::FP8E4M3:
            return StoredType::E4M3;
        case DType::FP8E5M2:
            return StoredType::E5M2;
        case DType::FP4E2M1:
            return StoredType::E2M1;
    }
    return StoredType::F32;
}

Operand operandOf(const StoredWords& words) {
    Operand operand;
    operand.data = words.data;
    operand.type = storedTypeOf(words.dtype);
    operand.origin = words.origin;
    operand.stride = words.stride;
    const StoredScales& scales = words.scales;
    operand.scaleInv = scales.scaleInv;
    operand.scales = scales.table;
    // On the host the words are where the box put them: an element's place in the box is its
    // place in memory. A copy to the device may move the words, never this.
    operand.scaleOrigin = words.origin;
    operand.scaleStride = words.stride;
    operand.pitch = scales.pitch;
    operand.rowEntries = scales.rowEntries;
    operand.blockColumns = scales.blockColumns;
    operand.columnShift = scales.columnShift;
    return operand;
}

}  // namespace

std::optional<RowRun> rowRunOf(const StoredRun& run) {
    constexpr std::size_t kMore = kMaxSummands - 1;
    if (run.moreReference.size() > kMore || run.moreDistributed.size() > kMore) {
        return std::nullopt;
    }
    RowRun rowRun;
    rowRun.reference = operandOf(run.reference);
    rowRun.distributed = operandOf(run.distributed);
    for (std::size_t s = 0; s < run.moreReference.size(); ++s) {
        rowRun.moreReference[s] = operandOf(run.moreReference[s]);
    }
    for (std::size_t s = 0; s < run.moreDistributed.size(); ++s) {
        rowRun.moreDistributed[s] = operandOf(run.moreDistributed[s]);
    }
    rowRun.referenceSummands = static_cast<int>(run.moreReference.size()) + 1;
    rowRun.distributedSummands = static_cast<int>(run.moreDistributed.size()) + 1;
    rowRun.rowLength = run.rowLength;
    rowRun.rows = run.rows;
    return rowRun;
}

Operand floatsAt(const float* values, std::size_t stride) {
    Operand operand;
    operand.data = values;
    operand.stride = stride;
    return operand;
}

}  // namespace ttrace::gpu

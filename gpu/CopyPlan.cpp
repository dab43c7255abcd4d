#include "CopyPlan.h"

#include <cstring>

namespace ttrace::gpu {

namespace {

// The words of `rows` rows of `rowLength` from element host.origin, `host.stride` apart.
CopyRows wordRows(const Operand& host, std::size_t rowLength, std::size_t rows, Operand& device) {
    const bool fp4 = host.type == StoredType::E2M1;
    const std::size_t first = byteOfElement(host.type, host.origin);
    // Rows of packed fp4 start on the same nibble only where the stride is even, as it is for
    // boxes of a dataset (whole bytes a row); anything else travels as one span.
    if (rows == 1 || host.stride == rowLength || (fp4 && host.stride % 2 != 0)) {
        const std::size_t end = host.origin + (rows - 1) * host.stride + rowLength;
        const std::size_t n = bytesThroughElement(host.type, end) - first;
        device.origin = fp4 ? host.origin - 2 * first : 0;
        return {first, n, n, 1};
    }
    const std::size_t width = bytesThroughElement(host.type, host.origin + rowLength) - first;
    device.origin = fp4 ? host.origin % 2 : 0;
    device.stride = fp4 ? 2 * width : rowLength;
    return {first, width, bytesThroughElement(host.type, host.stride), rows};
}

// The rows of the scale table the chunk reads: each run row's table row, where the run's
// rows are whole table rows apart and each stays inside one (a shard's rows, spaced), else
// every table row from the first to the last the chunk touches.
CopyRows scaleRows(const Operand& host, std::size_t rowLength, std::size_t rows, Operand& device) {
    const std::size_t firstRow = host.scaleOrigin / host.pitch;
    const std::size_t column = host.scaleOrigin % host.pitch;
    if (rows > 1 && host.scaleStride > host.pitch && host.scaleStride % host.pitch == 0 &&
        column + rowLength <= host.pitch) {
        device.scaleOrigin = column;
        device.scaleStride = host.pitch;
        return {firstRow * host.rowEntries, host.rowEntries,
                host.scaleStride / host.pitch * host.rowEntries, rows};
    }
    const std::size_t last = host.scaleOrigin + (rows - 1) * host.scaleStride + rowLength - 1;
    const std::size_t n = (last / host.pitch - firstRow + 1) * host.rowEntries;
    device.scaleOrigin = host.scaleOrigin - firstRow * host.pitch;
    return {firstRow * host.rowEntries, n, n, 1};
}

}  // namespace

CopyPlan planCopy(const Operand& host, std::size_t rowLength, std::size_t rows) {
    CopyPlan plan;
    plan.device = host;
    if (rows == 0 || rowLength == 0) {
        return plan;
    }
    plan.words = wordRows(host, rowLength, rows, plan.device);
    if (host.scales != nullptr) {
        plan.scales = scaleRows(host, rowLength, rows, plan.device);
    }
    return plan;
}

Operand placed(const CopyPlan& plan, const void* words, const float* scales) {
    Operand device = plan.device;
    device.data = words;
    device.scales = plan.scales.rows > 0 ? scales : nullptr;
    return device;
}

void gatherRows(const void* from, const CopyRows& what, std::size_t unitBytes, void* to) {
    const auto* source = static_cast<const std::byte*>(from) + what.first * unitBytes;
    auto* target = static_cast<std::byte*>(to);
    for (std::size_t r = 0; r < what.rows; ++r) {
        std::memcpy(target + r * what.width * unitBytes, source + r * what.pitch * unitBytes,
                    what.width * unitBytes);
    }
}

}  // namespace ttrace::gpu

#include "ElementProfile.h"

#include <algorithm>

#include "RowChunks.h"

namespace ttrace::gpu {

BinEdges binEdges() {
    BinEdges edges{};
    std::copy(ErrorHistogram::edges().begin(), ErrorHistogram::edges().end(), edges.at);
    return edges;
}

void mergeProfile(const int* slotEnds, const int* pixels, const float* maxima, std::size_t count,
                  ErrorHistogram& histogram, ErrorImage& image) {
    int previous = 0;
    for (int slot = 0; slot < kHistogramSlots; ++slot) {
        const int inSlot = slotEnds[slot] - previous;
        previous = slotEnds[slot];
        if (slot < ErrorHistogram::kBinCount) {
            histogram.bins[static_cast<std::size_t>(slot)] += inSlot;
        } else if (slot == kExactSlot) {
            histogram.exact += inSlot;
        } else if (slot == kBelowSlot) {
            histogram.below += inSlot;
        } else {
            histogram.above += inSlot;
        }
    }
    for (std::size_t i = 0; i < count; ++i) {
        float& pixel = image.maxError[static_cast<std::size_t>(pixels[i])];
        pixel = std::max(pixel, maxima[i]);
    }
}

void forEachProfilePart(
    const ProfilePiece& piece, int imageWidth, std::size_t maxElements,
    const std::function<void(const ProfileRun& part, std::size_t start)>& visit) {
    forEachChunk(piece.rowLength, piece.rows, maxElements, [&](const RowChunk& chunk) {
        const std::size_t start = chunk.position(piece.rowLength);
        ProfileRun part;
        ProfilePiece& p = part.piece;
        p.reference = piece.reference + start;
        p.values = piece.values + start;
        p.rowLength = chunk.rowLength;
        p.rows = chunk.rows;
        p.pixelRows = piece.pixelRows + chunk.firstRow;
        p.pixelColumns = piece.pixelColumns + chunk.firstColumn;
        part.imageWidth = imageWidth;
        visit(part, start);
    });
}

}  // namespace ttrace::gpu

#include "compare/WholeScales.h"

#include <algorithm>
#include <map>
#include <utility>

#include "compare/FaultDescription.h"
#include "compare/ScaleBlocks.h"
#include "compare/TrustedRunWarnings.h"
#include "trace/ShapeText.h"

namespace ttrace {

namespace {

// The pieces whose blocks can carry the whole tensor's scales: single copies (a summand's
// scale is not the sum's), fp8, of the tensor's rank and not empty.
std::vector<const TensorRecord*> scaledPieces(const LogicalTensor& run) {
    std::vector<const TensorRecord*> pieces;
    for (const auto& shard : run.shards) {
        for (const auto& replica : shard.replicas) {
            if (replica.summands.size() != 1) {
                continue;
            }
            const TensorRecord* piece = replica.summands.front();
            if (isScaled(piece->dtype) && !piece->scales.scaleInv.empty() &&
                piece->localShape.size() == run.globalShape.size() &&
                std::find(piece->localShape.begin(), piece->localShape.end(), 0) ==
                    piece->localShape.end()) {
                pieces.push_back(piece);
            }
        }
    }
    return pieces;
}

// The whole tensor's block extent per dimension as the pieces show it (WholeScales.h); none
// when two pieces show different ones.
std::optional<std::vector<std::int64_t>> wholeBlockExtent(
    const std::vector<const TensorRecord*>& pieces, const std::vector<std::int64_t>& globalShape) {
    std::vector<std::int64_t> extent(globalShape.size(), 0);
    for (const TensorRecord* piece : pieces) {
        if (piece->scales.perTensor()) {
            continue;
        }
        const auto& format = piece->scales.format;
        for (std::size_t d = 0; d < extent.size(); ++d) {
            const std::int64_t block = piece->scales.block[d];
            // One block along d may span the whole dimension, unless it is a microscaling
            // recipe's (MX's 32, NVFP4's 16 elements: scale_format), which never joins others.
            const bool recipeBlock = format && block == recipeBlockElements(*format);
            if (block == piece->localShape[d] && block != 1 && !recipeBlock) {
                continue;
            }
            if (extent[d] != 0 && extent[d] != block) {
                return std::nullopt;
            }
            extent[d] = block;
        }
    }
    for (std::size_t d = 0; d < extent.size(); ++d) {
        if (extent[d] == 0) {
            extent[d] = std::max<std::int64_t>(globalShape[d], 1);
        }
    }
    return extent;
}

// Which piece gave a block of the whole tensor its scale, and from which of its blocks.
struct ScaleSource {
    const TensorRecord* piece = nullptr;
    ShardRanges box;
};

Diagnostic disagreementOf(const QString& role, const QString& consequence, const ScaleSource& first,
                          const TensorRecord& piece, const PlacedScaleBlock& block,
                          double firstScale) {
    Diagnostic d;
    d.severity = Severity::Warning;
    d.code = trusted_run_code::kScalesDiffer;
    d.file = piece.file;
    d.dataset = piece.dataset;
    d.tensor = piece.key.toString();
    d.message =
        QStringLiteral(
            "the %1's %9 scales disagree with themselves: its block %2 on %3 carries "
            "scale_inv %4 where its block %5 on %6, in the same block of the whole tensor, "
            "carries %7 (its amax not reduced over its ranks, or scale blocks exactly as wide "
            "as its shards, which its pieces cannot tell apart); %8")
            .arg(role, block.box.toString(), rankPhrase({piece.rank}), formatValue(block.scaleInv),
                 first.box.toString(), rankPhrase({first.piece->rank}), formatValue(firstScale),
                 consequence,
                 recipeName(piece.dtype, piece.scales.format, !piece.scales.perTensor()));
    return d;
}

}  // namespace

double WholeScales::largest() const {
    double value = 0;
    for (std::size_t i = 0; i < scales.scaleInv.size(); ++i) {
        if (known[i]) {
            value = std::max(value, scales.scaleInv[i]);
        }
    }
    return value;
}

AssembledScales assembleWholeScales(const LogicalTensor& run, const QString& role,
                                    const QString& consequence) {
    AssembledScales out;
    if (!isScaled(run.dtype)) {
        return out;
    }
    if (const TensorRecord* whole = run.wholeRecord()) {
        if (isScaled(whole->dtype) && !whole->scales.scaleInv.empty()) {
            out.whole = WholeScales{whole->scales,
                                    std::vector<bool>(whole->scales.scaleInv.size(), true), 0};
        }
        return out;
    }
    const auto pieces = scaledPieces(run);
    const auto extent = wholeBlockExtent(pieces, run.globalShape);
    if (pieces.empty() || !extent) {
        return out;
    }
    WholeScales whole;
    const bool perTensor = std::all_of(pieces.begin(), pieces.end(),
                                       [](const TensorRecord* p) { return p->scales.perTensor(); });
    whole.scales.block = perTensor ? std::vector<std::int64_t>{} : *extent;
    whole.scales.format = pieces.front()->scales.format;  // what the scales are: the recipe's
    whole.scales.tensorScale = pieces.front()->scales.tensorScale;
    std::size_t blocks = 1;
    for (const auto n : whole.scales.grid(run.globalShape)) {
        blocks *= static_cast<std::size_t>(n);
    }
    whole.scales.scaleInv.assign(blocks, 0);
    whole.known.assign(blocks, false);
    // Per whole block and samples (samplesOf): the first piece's block that gave its scale.
    // Pieces of one block's samples must carry one scale; data-parallel ranks, holding other
    // samples, scale their own, and the whole block's is the largest, a reduced amax's.
    std::map<std::pair<std::size_t, QString>, std::pair<double, ScaleSource>> bySamples;
    std::vector<bool> scaledApart(blocks, false);
    for (const TensorRecord* piece : pieces) {
        const QString samples = samplesOf(*piece);
        for (PlacedScaleBlock& block : placeScaleBlocks(*piece, *extent, run.globalShape)) {
            if (!block.wholeBlock) {
                continue;
            }
            const auto at = static_cast<std::size_t>(*block.wholeBlock);
            const auto [first, inserted] =
                bySamples.try_emplace({at, samples}, block.scaleInv, ScaleSource{piece, block.box});
            if (!inserted && first->second.first != block.scaleInv) {
                out.disagreement = disagreementOf(role, consequence, first->second.second, *piece,
                                                  block, first->second.first);
                return out;
            }
            if (whole.known[at] && whole.scales.scaleInv[at] != block.scaleInv) {
                scaledApart[at] = true;
            }
            whole.scales.scaleInv[at] = whole.known[at]
                                            ? std::max(whole.scales.scaleInv[at], block.scaleInv)
                                            : block.scaleInv;
            whole.known[at] = true;
        }
    }
    whole.dataParallelBlocks = std::count(scaledApart.begin(), scaledApart.end(), true);
    out.whole = std::move(whole);
    return out;
}

}  // namespace ttrace

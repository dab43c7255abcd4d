#pragma once

#include <QString>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "compare/ErrorMetrics.h"
#include "compare/Threshold.h"
#include "trace/DType.h"
#include "trace/Diagnostic.h"
#include "trace/Placement.h"
#include "trace/ScaleFormat.h"
#include "trace/TensorKey.h"

namespace ttrace {

// One shard (or replica) of a distributed tensor compared with the matching slice of the
// reference.
struct ShardResult {
    ShardRanges ranges;
    std::vector<int> ranks;  // the ranks this copy comes from (several for partial sums)
    int replica = 0;         // index among the copies of this shard
    ErrorMetrics metrics;
    double normalizedError = 0;  // metrics.relativeError / tensor threshold
};

// Two copies of the same shard that must be bit-for-bit identical and are not.
struct ReplicaMismatch {
    ShardRanges ranges;
    std::vector<int> ranksA;  // the first copy (reference copy of the comparison)
    std::vector<int> ranksB;  // the copy that differs
    std::int64_t differingElements = 0;
    double maxAbsDifference = 0;
};

// A piece whose forward, recomputed by activation checkpointing during the backward, did not
// repeat its first forward (the rank file's `recomputations`): the backward used other values
// than the trace holds.
struct RecomputationMismatch {
    ShardRanges ranges;  // the piece
    int rank = 0;
    std::int64_t differingElements = 0;
    std::int64_t elements = 0;
    bool scalesDiffer = false;
};

// One copy of an fp8 tensor whose scale differs from the reference's beyond the tolerance,
// shown by its worst block.
struct ScaleMismatch {
    ShardRanges ranges;  // the copy's shard
    std::vector<int> ranks;
    ShardRanges block;  // the worst block, in global indices; per-tensor scaling: the shard
    double scaleInv = 1;
    double referenceScaleInv = 1;   // of the reference's block holding it
    double ratio = 1;               // scaleInv / referenceScaleInv
    std::int64_t blocksBeyond = 1;  // the copy's blocks beyond the tolerance
    // The copy's blocks lie across the reference's: its scales run along another axis, or
    // over other blocks, than the reference's (MX scales laid along the wrong axis). Then
    // `block` is its first such block, held to the reference's block at its first element,
    // and `blocksBeyond` counts such blocks, whatever their scales.
    bool acrossReferenceBlocks = false;
};

// fp8 scaling: every block of every shard must carry the scale of the reference's block that
// holds it: per tensor, the whole tensor's (docs/thresholds.md, "fp8 scales").
struct Fp8ScaleCheck {
    std::vector<std::int64_t> referenceBlock;  // the reference's blocks; empty: per tensor
    // What the reference's scales are (BlockScales::format, ::tensorScale): they name the
    // recipe, MXFP8 or NVFP4 (recipeName).
    std::optional<ScaleFormat> referenceFormat;
    bool referenceTensorScale = false;
    double referenceScaleInv = 1;             // per tensor the reference's; per block its largest
    std::optional<double> perturbedScaleInv;  // the same of the perturbed reference
    double tolerance = 0;                     // largest accepted |scaleInv / reference's - 1|
    double maxDifference = 0;                 // largest |scaleInv / reference's - 1| of any block
    bool copiesAgree = true;  // the blocks inside each reference block carry one scale
    // Blocks of the copies that no one block of the reference holds and that cannot be held
    // to one: a copy scaled per tensor against a reference scaled per row or block (another
    // recipe), or blocks inside one the reference's pieces do not show. Not compared.
    std::int64_t blocksNotCompared = 0;
    // Blocks of the copies inside a reference block that data-parallel ranks split (a tensor
    // scaled per tensor, its samples over dp), scaled otherwise than the reference's block:
    // each data-parallel rank quantizes its own samples, so such a block is held to agree
    // with the copies of its own samples only, and its values lie on another fp8 grid than
    // the reference's (Threshold: ThresholdInput::ownScales). Counted too: the blocks of a
    // reference laid out over data-parallel ranks whose pieces scaled apart
    // (WholeScales::dataParallelBlocks), its values on their ranks' grids.
    std::int64_t dataParallelBlocks = 0;
    std::vector<ScaleMismatch> mismatches;  // copies beyond the tolerance, worst first
};

// The outcome of comparing one logical tensor.
struct TensorResult {
    TensorKey key;
    int layer = -1;
    int expert = -1;
    DType dtype = DType::F32;
    std::vector<std::int64_t> globalShape;
    std::int64_t bytesCompared = 0;  // trace bytes read for it (distributed + references)

    ErrorMetrics metrics;                      // D (worst copy of each shard) vs R
    std::optional<ErrorMetrics> perturbation;  // P vs R, when a perturbed reference was given
    Threshold threshold;
    double normalizedError = 0;  // judgedError() / threshold.value
    // A factor common to every gradient of its iteration that its error is measured beyond
    // (CommonGradientFactor.h), set by the check's conclusion; 1: none.
    double commonFactor = 1;

    std::vector<ShardResult> shards;  // every shard and replica
    std::vector<ReplicaMismatch> replicaMismatches;
    std::vector<RecomputationMismatch> recomputationMismatches;

    std::int64_t referenceSeq = -1;       // position in the reference's execution order
    std::map<int, std::int64_t> rankSeq;  // rank -> position in that rank's own order
    Diagnostics diagnostics;              // problems found while comparing this tensor

    // Each copy's fp8 scale against the reference's, for fp8 tensors whose reference is fp8.
    std::optional<Fp8ScaleCheck> fp8Scales;

    // The relative error it is judged by: metrics.relativeError beyond commonFactor.
    double judgedError() const;
    // Above tolerance, non-finite where the reference is finite, replicas that diverge, a
    // recomputation that differs from its first forward, or an fp8 shard quantized with
    // another scale than the whole tensor's.
    bool isFaulty() const;
    // worstCopies() and worstCopyRanks() below, of `shards`.
    std::vector<std::size_t> worstCopies() const;
    std::vector<int> worstCopyRanks() const;
};

// Indices into `shards` of the worst copy of every shard (the one TensorResult::metrics
// counts), in the order the shards first appear; the first copy where copies tie.
[[nodiscard]] std::vector<std::size_t> worstCopies(const std::vector<ShardResult>& shards);
// The ranks of those copies.
[[nodiscard]] std::vector<int> worstCopyRanks(const std::vector<ShardResult>& shards);

}  // namespace ttrace

#include "compare/ComparisonJob.h"

#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>

#include "compare/BlockComparer.h"
#include "compare/ProgressThrottle.h"
#include "compare/TensorPairing.h"
#include "compare/TensorTally.h"
#include "compare/WorkQueue.h"
#include "mapping/CanonicalMapping.h"
#include "trace/Hdf5Reader.h"
#include "trace/ShapeText.h"

namespace ttrace {

namespace {

double normalize(double error, double threshold) {
    if (threshold > 0) {
        return error / threshold;
    }
    return error > 0 ? std::numeric_limits<double>::infinity() : 0.0;
}

// Trace bytes a task reads: every summand of every replica, plus the reference (and
// perturbed) slice once per shard.
std::int64_t plannedBytes(const ComparisonTask& task) {
    std::int64_t bytes = 0;
    for (const auto& shard : task.distributed->shards) {
        const auto elements = shard.ranges.elementCount();
        for (const auto& replica : shard.replicas) {
            for (const auto* summand : replica.summands) {
                bytes += elements * storageBytes(summand->dtype);
            }
        }
        bytes += elements * storageBytes(task.reference->dtype);
        if (task.perturbed) {
            bytes += elements * storageBytes(task.perturbed->dtype);
        }
    }
    return bytes;
}

// Non-finite values in D that the reference does not have at the same places (different
// counts, or an unbounded error where one side only is non-finite): the ranks whose copies
// hold them.
std::optional<Diagnostic> nonFiniteWarning(const TensorResult& result, const QString& folder) {
    // Counts are the tensor's own (one copy of each shard); ranks are every copy holding one.
    const auto& m = result.metrics;
    const std::int64_t nan = m.nanDist, inf = m.infDist;
    const bool matched = nan == m.nanRef && inf == m.infRef && !std::isinf(m.relativeError);
    if (nan + inf == 0 || matched) {
        return std::nullopt;
    }
    std::vector<int> ranks;
    for (const auto& shard : result.shards) {
        if (shard.metrics.nanDist + shard.metrics.infDist > 0) {
            ranks.insert(ranks.end(), shard.ranks.begin(), shard.ranks.end());
        }
    }
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    Diagnostic warning;
    warning.severity = Severity::Warning;
    warning.file = folder;
    warning.tensor = result.key.toString();
    warning.message = QStringLiteral(
                          "non-finite values in the distributed run: %1 NaN and %2 Inf "
                          "on ranks %3 that do not match the reference's %4 NaN and %5 Inf")
                          .arg(nan)
                          .arg(inf)
                          .arg(formatRanks(ranks))
                          .arg(m.nanRef)
                          .arg(m.infRef);
    return warning;
}

TensorResult makeResult(const ComparisonTask& task, const TensorTally& tally,
                        const TraceSet& distributed, const ComparisonOptions& options) {
    const auto& tensor = *task.distributed;
    TensorResult result;
    result.key = tensor.key;
    result.layer = tensor.layer;
    result.expert = tensor.expert;
    result.dtype = tensor.dtype;
    result.globalShape = tensor.globalShape;
    result.bytesCompared = tally.bytes();
    result.metrics = finalizeMetrics(tally.total(), tensor.globalShape);
    if (tally.perturbation()) {
        result.perturbation = finalizeMetrics(*tally.perturbation(), tensor.globalShape);
    }

    ThresholdInput input;
    input.key = tensor.key;
    input.layer = tensor.layer;
    input.numLayers = distributed.manifest.numLayers;
    input.computeDtype = distributed.manifest.computeDtype;
    if (result.perturbation) {
        input.perturbationError = result.perturbation->relativeError;
    }
    result.threshold = computeThreshold(input, options.thresholds);
    result.normalizedError = normalize(result.metrics.relativeError, result.threshold.value);

    for (std::size_t s = 0; s < tensor.shards.size(); ++s) {
        const auto& shard = tensor.shards[s];
        for (std::size_t k = 0; k < shard.replicas.size(); ++k) {
            ShardResult shardResult;
            shardResult.ranges = shard.ranges;
            shardResult.ranks = shard.replicas[k].ranks();
            shardResult.replica = static_cast<int>(k);
            shardResult.metrics = finalizeMetrics(tally.replicas()[s][k], tensor.globalShape);
            shardResult.normalizedError =
                normalize(shardResult.metrics.relativeError, result.threshold.value);
            result.shards.push_back(std::move(shardResult));
            if (k == 0) {
                continue;
            }
            const auto& mismatch = tally.mismatches()[s][k - 1];
            if (mismatch.bitDifferences > 0) {
                ReplicaMismatch replicaMismatch;
                replicaMismatch.ranges = shard.ranges;
                replicaMismatch.ranksA = shard.replicas.front().ranks();
                replicaMismatch.ranksB = shard.replicas[k].ranks();
                replicaMismatch.differingElements = mismatch.bitDifferences;
                replicaMismatch.maxAbsDifference = mismatch.maxAbsError;
                result.replicaMismatches.push_back(std::move(replicaMismatch));
            }
        }
    }
    result.referenceSeq = task.reference->seq;
    for (const auto rank : tensor.ranks()) {
        result.rankSeq[rank] = tensor.seqOnRank(rank);
    }
    if (auto warning = nonFiniteWarning(result, distributed.folder)) {
        result.diagnostics.push_back(*warning);
    }
    return result;
}

}  // namespace

ComparisonOutput compareTraceSets(const TraceSet& distributed, const TraceSet& reference,
                                  const TraceSet* perturbed, const ComparisonOptions& options) {
    ComparisonOutput output;
    std::unique_ptr<MetricsBackend> cpuBackend;
    const MetricsBackend* backend = options.backend;
    if (!backend) {
        cpuBackend = makeCpuBackend();
        backend = cpuBackend.get();
    }
    output.backendName = backend->name();

    const auto distMapping = buildLogicalTensors(distributed);
    const auto refMapping = buildLogicalTensors(reference);
    std::optional<MappingResult> pertMapping;
    if (perturbed) {
        pertMapping = buildLogicalTensors(*perturbed);
    }
    for (const auto* mapping : {&distMapping, &refMapping}) {
        output.diagnostics.insert(output.diagnostics.end(), mapping->diagnostics.begin(),
                                  mapping->diagnostics.end());
    }
    if (pertMapping) {
        output.diagnostics.insert(output.diagnostics.end(), pertMapping->diagnostics.begin(),
                                  pertMapping->diagnostics.end());
    }
    const auto tasks =
        pairTensors(distMapping.tensors, reference, refMapping.tensors, perturbed,
                    pertMapping ? &pertMapping->tensors : nullptr, output.diagnostics);

    // Blocks of the whole tensor, each contiguous in the reference, computed on demand; the
    // data itself is only ever read a block at a time.
    const std::int64_t chunk = std::max<std::int64_t>(1, options.chunkElements);
    std::vector<TensorBlocks> plans;
    std::vector<std::size_t> blockCounts(tasks.size());
    std::vector<std::unique_ptr<TensorTally>> tallies;
    std::int64_t totalBytes = 0;
    std::size_t totalBlocks = 0;
    for (std::size_t t = 0; t < tasks.size(); ++t) {
        const auto& tensor = *tasks[t].distributed;
        plans.emplace_back(tensor.globalShape, chunk);
        blockCounts[t] = plans[t].size();
        totalBlocks += plans[t].size();
        tallies.push_back(std::make_unique<TensorTally>(tensor, tasks[t].perturbed != nullptr));
        totalBytes += plannedBytes(tasks[t]);
    }

    WorkQueue queue(std::move(blockCounts));
    ProgressThrottle progress(options.progress, totalBytes);
    Hdf5Reader reader;
    std::atomic<bool> cancelled{false};
    const auto work = [&] {
        BlockComparer comparer(reader, *backend, chunk);
        BlockOutcome outcome;
        while (auto item = queue.next()) {
            if (options.cancel && options.cancel->load(std::memory_order_relaxed)) {
                cancelled.store(true);
                return;
            }
            auto& tally = *tallies[item->tensor];
            if (tally.failed()) {
                continue;
            }
            const auto& task = tasks[item->tensor];
            const Block block = plans[item->tensor].at(item->block);
            if (auto error = comparer.compare(task, block, outcome)) {
                error->severity = Severity::Error;
                if (error->tensor.isEmpty()) {
                    error->tensor = task.distributed->key.toString();
                }
                tally.fail(*error);
                continue;
            }
            progress.add(outcome.bytes);
            tally.add(static_cast<std::int64_t>(item->block), std::move(outcome));
        }
    };

    std::size_t threads = options.threads > 0 ? static_cast<std::size_t>(options.threads)
                                              : std::thread::hardware_concurrency();
    // Workers read HDF5 concurrently; a library built without thread safety gets one worker.
    hbool_t threadSafe = false;
    if (H5is_library_threadsafe(&threadSafe) < 0 || !threadSafe) {
        threads = 1;
    }
    threads = std::clamp<std::size_t>(threads, 1, std::max<std::size_t>(1, totalBlocks));
    std::vector<std::thread> workers;
    for (std::size_t i = 1; i < threads; ++i) {
        workers.emplace_back(work);
    }
    work();  // the calling thread is one of the workers
    for (auto& worker : workers) {
        worker.join();
    }
    if (cancelled.load() || (options.cancel && options.cancel->load())) {
        output.cancelled = true;
        return output;  // partial results would be misleading
    }

    for (std::size_t t = 0; t < tasks.size(); ++t) {
        const auto& tally = *tallies[t];
        if (auto failure = tally.failure()) {
            failure->message += QStringLiteral("; tensor not compared");
            output.diagnostics.push_back(*failure);
            continue;
        }
        output.results.push_back(makeResult(tasks[t], tally, distributed, options));
        output.bytesCompared += output.results.back().bytesCompared;
    }
    std::stable_sort(output.results.begin(), output.results.end(),
                     [](const TensorResult& a, const TensorResult& b) {
                         return a.referenceSeq < b.referenceSeq;
                     });
    progress.finish();
    return output;
}

}  // namespace ttrace

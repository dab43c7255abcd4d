#include "compare/ComparisonJob.h"

#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <numeric>
#include <thread>

#include "compare/BlockComparer.h"
#include "compare/Fp8Scales.h"
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
                        const TraceSet& distributed, const ThresholdConfig& thresholds) {
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
    result.threshold = computeThreshold(input, thresholds);
    result.normalizedError = normalize(result.metrics.relativeError, result.threshold.value);
    result.fp8Scales =
        checkFp8Scales(task, result.threshold, safetyFactorFor(tensor.key, thresholds));

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

TaskOutcome taskOutcome(const ComparisonPlan& plan, std::size_t task, const TensorTally& tally,
                        const TraceSet& distributed, const ThresholdConfig& thresholds) {
    TaskOutcome outcome;
    outcome.task = task;
    if (auto failure = tally.failure()) {
        failure->message += QStringLiteral("; tensor not compared");
        outcome.failure = std::move(*failure);
    } else {
        outcome.result = makeResult(plan.tasks[task], tally, distributed, thresholds);
    }
    return outcome;
}

}  // namespace

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

ComparisonPlan planComparison(const TraceSet& distributed, const TraceSet& reference,
                              const TraceSet* perturbed) {
    ComparisonPlan plan;
    plan.distributed = buildLogicalTensors(distributed);
    plan.reference = buildLogicalTensors(reference);
    if (perturbed) {
        plan.perturbed = buildLogicalTensors(*perturbed);
    }
    for (const auto* mapping : {&plan.distributed, &plan.reference}) {
        plan.diagnostics.insert(plan.diagnostics.end(), mapping->diagnostics.begin(),
                                mapping->diagnostics.end());
    }
    if (plan.perturbed) {
        plan.diagnostics.insert(plan.diagnostics.end(), plan.perturbed->diagnostics.begin(),
                                plan.perturbed->diagnostics.end());
    }
    plan.tasks = pairTensors(plan.distributed.tensors, reference, plan.reference.tensors, perturbed,
                             plan.perturbed ? &plan.perturbed->tensors : nullptr, plan.diagnostics);
    return plan;
}

TaskOutcomes compareTasks(const ComparisonPlan& plan, const std::vector<std::size_t>& selected,
                          const TraceSet& distributed, const ComparisonOptions& options) {
    TaskOutcomes outcomes;
    std::unique_ptr<MetricsBackend> cpuBackend;
    const MetricsBackend* backend = options.backend;
    if (!backend) {
        cpuBackend = makeCpuBackend();
        backend = cpuBackend.get();
    }
    outcomes.backendName = backend->name();

    // Blocks of the whole tensor, each contiguous in the reference, computed on demand; the
    // data itself is only ever read a block at a time. Index i below is selected[i].
    const std::int64_t chunk = std::max<std::int64_t>(1, options.chunkElements);
    std::vector<TensorBlocks> plans;
    std::vector<std::size_t> blockCounts(selected.size());
    std::vector<std::unique_ptr<TensorTally>> tallies;
    // Blocks not yet handled, per tensor: zero once the tensor is finished.
    std::vector<std::atomic<std::size_t>> remaining(selected.size());
    std::int64_t totalBytes = 0;
    std::size_t totalBlocks = 0;
    for (std::size_t i = 0; i < selected.size(); ++i) {
        const auto& task = plan.tasks[selected[i]];
        const auto& tensor = *task.distributed;
        plans.emplace_back(tensor.globalShape, chunk);
        blockCounts[i] = plans[i].size();
        remaining[i].store(blockCounts[i]);
        totalBlocks += plans[i].size();
        tallies.push_back(std::make_unique<TensorTally>(tensor, task.perturbed != nullptr));
        totalBytes += plannedBytes(task);
    }

    // Set as each tensor finishes, so that its outcome can be persisted right away.
    std::vector<std::optional<TaskOutcome>> finishedOutcomes(selected.size());
    WorkQueue queue(std::move(blockCounts));
    ProgressThrottle progress(options.progress, totalBytes);
    Hdf5Reader reader;
    std::atomic<bool> stop{false};
    std::atomic<bool> cancelled{false};
    std::mutex failureMutex;
    const auto work = [&] {
        try {
            BlockComparer comparer(reader, *backend, chunk);
            BlockOutcome outcome;
            while (auto item = queue.next()) {
                if (options.cancel && options.cancel->load(std::memory_order_relaxed)) {
                    cancelled.store(true);
                    return;
                }
                if (stop.load(std::memory_order_relaxed)) {
                    return;
                }
                auto& tally = *tallies[item->tensor];
                const auto& task = plan.tasks[selected[item->tensor]];
                if (!tally.failed()) {
                    const Block block = plans[item->tensor].at(item->block);
                    if (auto error = comparer.compare(task, block, outcome)) {
                        error->severity = Severity::Error;
                        if (error->tensor.isEmpty()) {
                            error->tensor = task.distributed->key.toString();
                        }
                        tally.fail(*error);
                    } else {
                        progress.add(outcome.bytes);
                        tally.add(static_cast<std::int64_t>(item->block), std::move(outcome));
                    }
                }
                if (remaining[item->tensor].fetch_sub(1) == 1) {
                    // Only the thread that finished the tensor writes its slot.
                    auto& finished = finishedOutcomes[item->tensor];
                    finished = taskOutcome(plan, selected[item->tensor], tally, distributed,
                                           options.thresholds);
                    if (options.tensorFinished) {
                        options.tensorFinished(*finished);
                    }
                }
            }
        } catch (const std::exception& e) {
            stop.store(true);
            const std::lock_guard lock(failureMutex);
            if (outcomes.failure.isEmpty()) {
                outcomes.failure = QString::fromLocal8Bit(e.what());
            }
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
        outcomes.cancelled = true;
        return outcomes;  // partial results would be misleading
    }

    for (std::size_t i = 0; i < selected.size(); ++i) {
        if (finishedOutcomes[i]) {
            outcomes.finished.push_back(std::move(*finishedOutcomes[i]));
        } else {
            outcomes.unchecked.push_back(selected[i]);
        }
    }
    progress.finish();
    return outcomes;
}

ComparisonOutput assembleComparison(const ComparisonPlan& plan, std::vector<TaskOutcome> outcomes,
                                    const std::vector<std::pair<std::size_t, QString>>& unchecked,
                                    const QString& backendName) {
    ComparisonOutput output;
    output.backendName = backendName;
    output.diagnostics = plan.diagnostics;
    std::sort(outcomes.begin(), outcomes.end(),
              [](const TaskOutcome& a, const TaskOutcome& b) { return a.task < b.task; });
    for (auto& outcome : outcomes) {
        if (outcome.failure) {
            output.diagnostics.push_back(std::move(*outcome.failure));
            continue;
        }
        output.bytesCompared += outcome.result->bytesCompared;
        output.results.push_back(std::move(*outcome.result));
    }
    std::stable_sort(output.results.begin(), output.results.end(),
                     [](const TensorResult& a, const TensorResult& b) {
                         return a.referenceSeq < b.referenceSeq;
                     });
    for (const auto& [task, reason] : unchecked) {
        const QString key = plan.tasks[task].distributed->key.toString();
        // About a whole tensor spread over many rank files: no single file to name.
        Diagnostic d;
        d.severity = Severity::Error;
        d.tensor = key;
        d.message = QStringLiteral("not checked: ") + reason;
        output.diagnostics.push_back(std::move(d));
        output.unchecked.push_back(key);
    }
    return output;
}

ComparisonOutput compareTraceSets(const TraceSet& distributed, const TraceSet& reference,
                                  const TraceSet* perturbed, const ComparisonOptions& options) {
    const ComparisonPlan plan = planComparison(distributed, reference, perturbed);
    std::vector<std::size_t> all(plan.tasks.size());
    std::iota(all.begin(), all.end(), std::size_t{0});
    TaskOutcomes outcomes = compareTasks(plan, all, distributed, options);
    if (outcomes.cancelled) {
        ComparisonOutput output;
        output.backendName = outcomes.backendName;
        output.cancelled = true;
        return output;  // partial results would be misleading
    }
    std::vector<std::pair<std::size_t, QString>> unchecked;
    for (const std::size_t task : outcomes.unchecked) {
        unchecked.emplace_back(task, QStringLiteral("the comparison stopped: ") + outcomes.failure);
    }
    return assembleComparison(plan, std::move(outcomes.finished), unchecked, outcomes.backendName);
}

}  // namespace ttrace

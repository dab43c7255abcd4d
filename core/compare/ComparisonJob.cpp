#include "compare/ComparisonJob.h"

#include <hdf5.h>

#include <QDir>
#include <QStringList>
#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>

#include "compare/BlockComparer.h"
#include "compare/Fp8Scales.h"
#include "compare/ProgressThrottle.h"
#include "compare/TensorPairing.h"
#include "compare/TensorTally.h"
#include "compare/TrustedRunWarnings.h"
#include "compare/UntrustedThresholds.h"
#include "compare/WorkQueue.h"
#include "mapping/TilingCheck.h"
#include "trace/Hdf5Reader.h"
#include "trace/ShapeText.h"

namespace ttrace {

namespace {

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
                          .arg(listRanks(ranks))
                          .arg(m.nanRef)
                          .arg(m.infRef);
    return warning;
}

// The pieces whose recomputation under activation checkpointing differed from their first
// forward, as their rank files say.
std::vector<RecomputationMismatch> recomputationMismatches(const LogicalTensor& tensor) {
    std::vector<RecomputationMismatch> mismatches;
    for (const auto& shard : tensor.shards) {
        for (const auto& replica : shard.replicas) {
            for (const TensorRecord* piece : replica.summands) {
                if (piece->recomputation) {
                    mismatches.push_back(
                        {shard.ranges, piece->rank, piece->recomputation->elementsDiffering,
                         piece->recomputation->elements, piece->recomputation->scalesDiffer});
                }
            }
        }
    }
    return mismatches;
}

TensorResult makeResult(const ComparisonTask& task, const TensorTally& tally,
                        const ComparisonPlan& plan, const PlannedTask& planned,
                        const ThresholdConfig& thresholds) {
    const TraceCatalog& distributed = *plan.distributed;
    const auto& tensor = *task.distributed;
    TensorResult result;
    result.key = tensor.key;
    result.layer = tensor.layer;
    result.expert = tensor.expert;
    result.dtype = tensor.dtype;
    result.globalShape = tensor.globalShape;
    result.bytesCompared = tally.bytes();
    result.metrics = finalizeMetrics(tally.total(), tensor.globalShape);
    // A perturbed reference whose copies disagree measures that, not round-off.
    const Diagnostics perturbedDisagrees =
        task.perturbed
            ? copiesDisagree(*task.perturbed, tally.perturbedCopies(),
                             QStringLiteral("perturbed reference"), Severity::Warning,
                             QStringLiteral("this tensor's threshold is the theoretical one"))
            : Diagnostics{};
    if (tally.perturbation() && perturbedDisagrees.empty()) {
        result.perturbation = finalizeMetrics(*tally.perturbation(), tensor.globalShape);
    }
    result.diagnostics = perturbedDisagrees;

    ThresholdInput input;
    input.key = tensor.key;
    input.layer = tensor.layer;
    input.numLayers = distributed.manifest().numLayers;
    input.dtype = tensor.dtype;
    input.computeDtype = distributed.manifest().computeDtype;
    input.operandDtype = distributed.manifest().operandDtype(tensor.key.kind, tensor.dtype);
    input.madeInForward = distributed.manifest().madeInForward(tensor.key.kind, tensor.dtype);
    input.referenceDtype = task.reference->dtype;
    if (result.perturbation) {
        input.perturbationError = result.perturbation->relativeError;
    }
    input.declaredPerturbation = plan.declaredPerturbation;
    // The trusted runs' whole-tensor fp8 scales; a run whose pieces disagree on them has none.
    auto referenceScales = assembleWholeScales(
        *task.reference, QStringLiteral("reference"),
        QStringLiteral("this tensor's quantization scales are not checked against it"));
    auto perturbedScales =
        task.perturbed && perturbedDisagrees.empty()
            ? assembleWholeScales(*task.perturbed, QStringLiteral("perturbed reference"),
                                  QStringLiteral("this tensor's scale tolerance is the "
                                                 "theoretical one"))
            : AssembledScales{};
    for (auto* assembled : {&referenceScales, &perturbedScales}) {
        if (assembled->disagreement) {
            result.diagnostics.push_back(std::move(*assembled->disagreement));
        }
    }
    // A scale follows its block's largest element: the floor of its tolerance is that
    // element's round-off in the compute dtype, not the operand steps the values' bound allows
    // under a quantizing recipe (a scale off by one such step is a fault to show).
    ThresholdInput roundOff = input;
    roundOff.operandDtype.reset();
    const double scaleFloor = computeThreshold(roundOff, thresholds).theoretical;
    result.fp8Scales = checkFp8Scales(tensor, referenceScales.whole, perturbedScales.whole,
                                      scaleFloor, safetyFactorFor(tensor.key, thresholds));
    input.ownScales = result.fp8Scales && result.fp8Scales->dataParallelBlocks > 0;
    result.threshold = computeThreshold(input, thresholds);
    result.normalizedError = result.threshold.normalize(result.metrics.relativeError);

    for (std::size_t s = 0; s < tensor.shards.size(); ++s) {
        const auto& shard = tensor.shards[s];
        for (std::size_t k = 0; k < shard.replicas.size(); ++k) {
            ShardResult shardResult;
            shardResult.ranges = shard.ranges;
            shardResult.ranks = shard.replicas[k].ranks();
            shardResult.replica = static_cast<int>(k);
            shardResult.metrics = finalizeMetrics(tally.replicas()[s][k], tensor.globalShape);
            shardResult.normalizedError =
                result.threshold.normalize(shardResult.metrics.relativeError);
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
    result.recomputationMismatches = recomputationMismatches(tensor);
    result.referenceSeq = planned.reference->order;
    for (const auto rank : tensor.ranks()) {
        result.rankSeq[rank] = tensor.seqOnRank(rank);
    }
    if (auto warning = nonFiniteWarning(result, distributed.folder())) {
        result.diagnostics.push_back(*warning);
    }
    for (const auto& [run, role] :
         {std::pair{task.reference, QStringLiteral("reference")},
          std::pair{task.perturbed, QStringLiteral("perturbed reference")}}) {
        if (run) {
            if (auto warning = recomputedDifferently(*run, role)) {
                result.diagnostics.push_back(std::move(*warning));
            }
        }
    }
    return result;
}

// Tensors computed in another dtype in the distributed run than in the reference: a layer
// run in another precision (a mixed-precision setting) or a reference of another recipe.
// One warning per pair of dtypes, naming the first few tensors: a whole run in the wrong
// dtype is one line, not one per tensor.
class DtypeMismatches {
public:
    // In task order, so that the tensors named first are the first compared.
    DtypeMismatches(const ComparisonPlan& plan, std::vector<StoredResultDtype> results) {
        std::sort(results.begin(), results.end(),
                  [](const auto& a, const auto& b) { return a.task < b.task; });
        for (const auto& [task, dtype] : results) {
            const PlannedTask& planned = plan.tasks[task];
            if (dtype != planned.reference->dtype) {
                tensors_[{dtype, planned.reference->dtype}].push_back(planned.key.toString());
            }
        }
    }

    void report(const QString& folder, Diagnostics& diagnostics) const {
        constexpr std::size_t kNamed = 3;
        for (const auto& [dtypes, keys] : tensors_) {
            QStringList named(keys.begin(), keys.begin() + std::min(kNamed, keys.size()));
            if (keys.size() > kNamed) {
                named << QStringLiteral("and %1 more").arg(keys.size() - kNamed);
            }
            Diagnostic d;
            d.severity = Severity::Warning;
            d.file = folder;
            d.message =
                QStringLiteral(
                    "%1 computed in %2 in the distributed run but in %3 in the "
                    "reference (%4): a mixed-precision setting, or a "
                    "reference of another recipe? Compared as they are, with "
                    "the distributed run's threshold; where its dtype is the "
                    "coarser, never below that dtype's epsilon")
                    .arg(keys.size() == 1 ? QStringLiteral("1 tensor was")
                                          : QStringLiteral("%1 tensors were").arg(keys.size()),
                         dtypeName(dtypes.first), dtypeName(dtypes.second),
                         named.join(QStringLiteral(", ")));
            diagnostics.push_back(std::move(d));
        }
    }

private:
    std::map<std::pair<DType, DType>, std::vector<QString>> tensors_;
};

// Ranks whose rank file could not be read at all: missing, unreadable or corrupt.
std::vector<int> unreadableRanks(const TraceCatalog& catalog) {
    std::vector<int> ranks;
    const QDir folder(catalog.folder());
    for (const RankEntry& entry : catalog.manifest().ranks) {
        const QString path = folder.absoluteFilePath(entry.file);
        const auto& diagnostics = catalog.diagnostics();
        if (std::any_of(diagnostics.begin(), diagnostics.end(), [&](const Diagnostic& d) {
                return d.severity == Severity::Error && d.file == path && d.dataset.isEmpty();
            })) {
            ranks.push_back(entry.rank);
        }
    }
    return ranks;
}

// Tensors whose shards leave gaps: a few are said one by one; more, the trail of rank files
// that could not be read, are one error naming the likely cause and the first few tensors.
void reportGaps(const TraceCatalog& catalog, Diagnostics gaps, Diagnostics& diagnostics) {
    constexpr std::size_t kOneByOne = 3;
    if (gaps.size() <= kOneByOne) {
        diagnostics.insert(diagnostics.end(), gaps.begin(), gaps.end());
        return;
    }
    QStringList named;
    for (std::size_t i = 0; i < kOneByOne; ++i) {
        named << gaps[i].tensor;
    }
    const auto unreadable = unreadableRanks(catalog);
    Diagnostic d;
    d.severity = Severity::Error;
    d.file = catalog.folder();
    d.message =
        QStringLiteral(
            "%1 tensors not compared: their shards leave gaps, elements no rank "
            "holds%2: %3 and %4 more (the first: %5)")
            .arg(QString::number(gaps.size()),
                 unreadable.empty()
                     ? QString()
                     : QStringLiteral(", most likely the pieces in the rank files that could "
                                      "not be read (%1 %2; see their errors)")
                           .arg(unreadable.size() == 1 ? QStringLiteral("rank")
                                                       : QStringLiteral("ranks"),
                                listRanks(unreadable)),
                 named.join(QStringLiteral(", ")), QString::number(gaps.size() - kOneByOne),
                 gaps.front().message);
    diagnostics.push_back(std::move(d));
}

}  // namespace

ComparisonPlan planComparison(const TraceCatalog& distributed, const TraceCatalog& reference,
                              const TraceCatalog* perturbed) {
    ComparisonPlan plan;
    plan.distributed = &distributed;
    plan.reference = outlineTrustedRun(reference);
    if (perturbed) {
        plan.perturbed = outlineTrustedRun(*perturbed);
        plan.declaredPerturbation = perturbed->manifest().perturbation;
    }
    plan.diagnostics = plan.reference.diagnostics;
    if (plan.perturbed) {
        plan.diagnostics.insert(plan.diagnostics.end(), plan.perturbed->diagnostics.begin(),
                                plan.perturbed->diagnostics.end());
    }
    plan.tasks = pairTensors(distributed.tensors(), plan.reference,
                             plan.perturbed ? &*plan.perturbed : nullptr, plan.diagnostics);
    plan.coverage = measureCoverage(distributed, plan.reference, plan.diagnostics);
    std::vector<std::size_t> order(plan.tasks.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(), [&plan](std::size_t a, std::size_t b) {
        return plan.tasks[a].reference->order < plan.tasks[b].reference->order;
    });
    plan.positions.resize(order.size());
    for (std::size_t position = 0; position < order.size(); ++position) {
        plan.positions[order[position]] = position;
    }
    return plan;
}

std::unique_ptr<LoadedTask> loadTask(const ComparisonPlan& plan, std::size_t task) {
    const PlannedTask& planned = plan.tasks[task];
    auto loaded = std::make_unique<LoadedTask>();
    loaded->distributed = assembleTensor(*plan.distributed, planned.key);
    if (!loaded->distributed.tensor) {
        loaded->problems = std::move(loaded->distributed.problems);
        return loaded;
    }
    // The trusted runs' copies assembled when the plan was made; read again, they do unless
    // their index changed meanwhile.
    loaded->reference = assembleTensor(*plan.reference.catalog, planned.key);
    if (planned.perturbed) {
        loaded->perturbed = assembleTensor(*plan.perturbed->catalog, planned.key);
    }
    for (const AssembledTensor* side : {&loaded->reference, &loaded->perturbed}) {
        loaded->problems.insert(loaded->problems.end(), side->problems.begin(),
                                side->problems.end());
    }
    if (loaded->reference.tensor && (!planned.perturbed || loaded->perturbed.tensor)) {
        loaded->task.distributed = &*loaded->distributed.tensor;
        loaded->task.reference = &*loaded->reference.tensor;
        loaded->task.perturbed = planned.perturbed ? &*loaded->perturbed.tensor : nullptr;
    }
    return loaded;
}

namespace {

// A tensor while it is compared: read and assembled when its first block is handed out,
// released when its last block is done.
struct TensorInFlight {
    std::once_flag loadOnce;
    std::unique_ptr<LoadedTask> loaded;
    std::unique_ptr<TensorTally> tally;  // null when the task could not be loaded
    std::optional<TensorBlocks> blocks;
};

TaskOutcome finishedOutcome(const ComparisonPlan& plan, std::size_t task,
                            const TensorInFlight& tensor, const ThresholdConfig& thresholds) {
    TaskOutcome outcome;
    outcome.task = task;
    if (!tensor.tally) {
        outcome.failures = tensor.loaded->problems;
    } else if (auto failure = tensor.tally->failure()) {
        failure->message += QStringLiteral("; tensor not compared");
        outcome.failures.push_back(std::move(*failure));
    } else if (auto disagree = copiesDisagree(
                   *tensor.loaded->task.reference, tensor.tally->referenceCopies(),
                   QStringLiteral("reference"), Severity::Error,
                   QStringLiteral("tensor not compared: the reference cannot be trusted for it"));
               !disagree.empty()) {
        outcome.failures = std::move(disagree);
    } else {
        outcome.result =
            makeResult(tensor.loaded->task, *tensor.tally, plan, plan.tasks[task], thresholds);
    }
    return outcome;
}

}  // namespace

TaskOutcomes compareTasks(const ComparisonPlan& plan, const std::vector<std::size_t>& selected,
                          const ComparisonOptions& options) {
    TaskOutcomes outcomes;
    std::unique_ptr<MetricsBackend> cpuBackend;
    const MetricsBackend* backend = options.backend;
    if (!backend) {
        cpuBackend = makeCpuBackend();
        backend = cpuBackend.get();
    }
    outcomes.backendName = QString::fromStdString(backend->name());

    // Blocks of the whole tensor, each contiguous in the reference, computed on demand; the
    // data itself is only ever read a block at a time. Index i below is selected[i].
    const std::int64_t chunk = std::max<std::int64_t>(1, options.chunkElements);
    std::vector<std::size_t> blockCounts(selected.size());
    // Blocks not yet handled, per tensor: zero once the tensor is finished.
    std::vector<std::atomic<std::size_t>> remaining(selected.size());
    std::int64_t totalBytes = 0;
    std::size_t totalBlocks = 0;
    for (std::size_t i = 0; i < selected.size(); ++i) {
        const PlannedTask& task = plan.tasks[selected[i]];
        blockCounts[i] = TensorBlocks(task.globalShape, chunk).size();
        remaining[i].store(blockCounts[i]);
        totalBlocks += blockCounts[i];
        totalBytes += task.bytes;
    }
    std::vector<TensorInFlight> inFlight(selected.size());
    // Without tensorFinished, each outcome is kept here as its tensor finishes.
    std::vector<std::optional<TaskOutcome>> kept(options.tensorFinished ? 0 : selected.size());

    WorkQueue queue(std::move(blockCounts));
    ProgressThrottle progress(options.progress, totalBytes);
    Hdf5Reader reader(options.cancel);
    std::atomic<bool> stop{false};
    std::atomic<bool> cancelled{false};
    std::vector<bool> finished(selected.size(), false);
    std::mutex finishedMutex;  // guards `finished`, `outcomes.failure`
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
                const std::size_t task = selected[item->tensor];
                TensorInFlight& tensor = inFlight[item->tensor];
                std::call_once(tensor.loadOnce, [&] {
                    tensor.loaded = loadTask(plan, task);
                    if (tensor.loaded->ready()) {
                        tensor.tally =
                            std::make_unique<TensorTally>(*tensor.loaded->task.distributed,
                                                          plan.tasks[task].perturbed != nullptr);
                        tensor.blocks.emplace(plan.tasks[task].globalShape, chunk);
                    }
                });
                if (tensor.tally && !tensor.tally->failed()) {
                    const Block block = tensor.blocks->at(item->block);
                    if (auto error = comparer.compare(tensor.loaded->task, block, outcome)) {
                        error->severity = Severity::Error;
                        if (error->tensor.isEmpty()) {
                            error->tensor = plan.tasks[task].key.toString();
                        }
                        tensor.tally->fail(*error);
                    } else {
                        progress.add(outcome.bytes);
                        tensor.tally->add(static_cast<std::int64_t>(item->block),
                                          std::move(outcome));
                    }
                }
                if (remaining[item->tensor].fetch_sub(1) != 1) {
                    continue;
                }
                // The last block of the tensor: only this thread touches it from here on.
                TaskOutcome done = finishedOutcome(plan, task, tensor, options.thresholds);
                tensor.tally.reset();
                tensor.loaded.reset();
                {
                    const std::lock_guard lock(finishedMutex);
                    finished[item->tensor] = true;
                }
                if (options.tensorFinished) {
                    options.tensorFinished(std::move(done));  // handed over, even if it throws
                } else {
                    kept[item->tensor] = std::move(done);
                }
            }
        } catch (const std::exception& e) {
            stop.store(true);
            const std::lock_guard lock(finishedMutex);
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
        if (!finished[i]) {
            outcomes.unchecked.push_back(selected[i]);
        } else if (!options.tensorFinished) {
            outcomes.finished.push_back(std::move(*kept[i]));
        }
    }
    progress.finish();
    return outcomes;
}

bool outcomeFits(const ComparisonPlan& plan, const TaskOutcome& outcome) {
    return outcome.task < plan.tasks.size() &&
           (outcome.result ? outcome.result->key == plan.tasks[outcome.task].key
                           : !outcome.failures.empty());
}

Diagnostic uncheckedTask(const ComparisonPlan& plan, std::size_t task, const QString& reason) {
    // About a whole tensor spread over many rank files: no single file to name.
    Diagnostic d;
    d.severity = Severity::Error;
    d.tensor = plan.tasks[task].key.toString();
    d.message = QStringLiteral("not checked: ") + reason;
    return d;
}

ComparisonOutput assembleComparison(const ComparisonPlan& plan, std::vector<TaskOutcome> outcomes,
                                    const std::vector<std::pair<std::size_t, QString>>& unchecked,
                                    const QString& backendName,
                                    const std::vector<StoredResultDtype>& stored) {
    ComparisonOutput output;
    output.backendName = backendName;
    output.diagnostics = plan.diagnostics;
    output.coverage = plan.coverage;
    std::sort(outcomes.begin(), outcomes.end(),
              [](const TaskOutcome& a, const TaskOutcome& b) { return a.task < b.task; });
    std::vector<std::pair<std::size_t, TensorResult>> results;
    std::vector<StoredResultDtype> dtypes = stored;
    Diagnostics gaps;
    for (auto& outcome : outcomes) {
        if (!outcome.result) {
            for (auto& failure : outcome.failures) {
                (failure.message.startsWith(QStringView(kGapMessageStart)) ? gaps
                                                                           : output.diagnostics)
                    .push_back(std::move(failure));
            }
            continue;
        }
        dtypes.push_back({outcome.task, outcome.result->dtype});
        output.bytesCompared += outcome.result->bytesCompared;
        results.emplace_back(plan.positions[outcome.task], std::move(*outcome.result));
    }
    DtypeMismatches(plan, std::move(dtypes)).report(plan.distributed->folder(), output.diagnostics);
    reportGaps(*plan.distributed, std::move(gaps), output.diagnostics);
    std::sort(results.begin(), results.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [position, result] : results) {
        output.results.push_back(std::move(result));
    }
    output.coverage.blind = countBlind(output.results);
    for (const auto& [task, reason] : unchecked) {
        output.diagnostics.push_back(uncheckedTask(plan, task, reason));
        output.unchecked.push_back(plan.tasks[task].key.toString());
    }
    return output;
}

ComparisonOutput compareTraceSets(const TraceSet& distributed, const TraceSet& reference,
                                  const TraceSet* perturbed, const ComparisonOptions& options) {
    const TraceCatalog catalog = TraceCatalog::of(distributed);
    const TraceCatalog referenceCatalog = TraceCatalog::of(reference);
    const std::optional<TraceCatalog> perturbedCatalog =
        perturbed ? std::optional(TraceCatalog::of(*perturbed)) : std::nullopt;
    const ComparisonPlan plan =
        planComparison(catalog, referenceCatalog, perturbedCatalog ? &*perturbedCatalog : nullptr);
    std::vector<std::size_t> all(plan.tasks.size());
    std::iota(all.begin(), all.end(), std::size_t{0});
    // Every outcome is kept, then shown to the caller's tensorFinished (which may throw).
    std::vector<TaskOutcome> kept;
    std::mutex keptMutex;
    ComparisonOptions keepAll = options;
    keepAll.tensorFinished = [&](TaskOutcome&& outcome) {
        TaskOutcome copy = options.tensorFinished ? outcome : TaskOutcome();
        {
            const std::lock_guard lock(keptMutex);
            kept.push_back(std::move(outcome));
        }
        if (options.tensorFinished) {
            options.tensorFinished(std::move(copy));
        }
    };
    TaskOutcomes outcomes = compareTasks(plan, all, keepAll);
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
    return assembleComparison(plan, std::move(kept), unchecked, outcomes.backendName);
}

}  // namespace ttrace

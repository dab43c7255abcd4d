#include "session/CheckSession.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QThread>
#include <algorithm>
#include <functional>
#include <memory>
#include <thread>

#include "compare/FaultyShard.h"
#include "compare/Localization.h"
#include "compare/UntrustedThresholds.h"
#include "session/CacheFailures.h"
#include "session/DistributedComparison.h"
#include "session/ParallelIndexing.h"
#include "session/SingleProcessGroup.h"
#include "session/StoredComparison.h"
#include "store/CacheLocation.h"
#include "store/IndexCache.h"
#include "store/OutcomeJournal.h"
#include "store/ResultsStore.h"
#include "trace/TraceFolderGuard.h"

namespace ttrace {

namespace {

void append(Diagnostics& into, const Diagnostics& from) {
    into.insert(into.end(), from.begin(), from.end());
}

RunInfo runInfo(const TraceSet& set) {
    return RunInfo{set.folder, set.manifest, static_cast<int>(set.records.size())};
}

RunInfo runInfo(const TraceCatalog& catalog) {
    return RunInfo{catalog.folder(), catalog.manifest(), static_cast<int>(catalog.datasetCount())};
}

// A trace set given in the wrong slot (reference passed as distributed, say) would compare
// without error and mean nothing, so roles are checked before anything else.
void checkRole(const Manifest& manifest, bool usable, RunRole expected, Diagnostics& diagnostics) {
    if (usable && manifest.role != expected) {
        diagnostics.push_back(fileDiagnostic(
            Severity::Error, manifest.path,
            QStringLiteral("this trace set's role is '%1' but it was given as the %2 run")
                .arg(runRoleName(manifest.role), runRoleName(expected))));
    }
}

// Worker threads: as asked, else the machine's cores shared by the processes running on it.
int threadsPerProcess(const CheckRequest& request, const ProcessGroup* group) {
    if (request.threads > 0 || !group) {
        return request.threads;
    }
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    return std::max(1, cores / std::max(1, group->sizeOnThisMachine()));
}

// What the processes other than rank 0 do: wait for rank 0 to open the traces and decide
// whether there is anything to compare, then open the traces from the index cache (never
// writing to it: rank 0 is its one writer) and compare their share.
CheckOutcome runAsHelper(const CheckRequest& request, const CacheLocation& cache,
                         ProcessGroup& group) {
    CheckOutcome outcome;
    outcome.root = false;
    QString error;
    const auto compare = group.broadcast(0, &error);
    if (!compare || *compare == 0) {
        return outcome;
    }
    ComparisonOptions options;
    if (!request.configPath.isEmpty()) {
        options.thresholds = readThresholdConfig(request.configPath).config;
    }
    options.threads = threadsPerProcess(request, &group);
    options.chunkElements = request.chunkElements;
    options.backend = request.backend.get();
    options.cancel = request.cancel;

    std::unique_ptr<IndexCache> indexCache;
    if (cache.usable()) {
        indexCache =
            IndexCache::open(QDir(cache.dir).filePath(QStringLiteral("index.sqlite")), &error);
    }
    OpenOptions open;
    open.cache = indexCache.get();
    open.fillCache = false;
    open.cancel = request.cancel;
    const TraceCatalog distributed = TraceCatalog::open(request.distributed, open);
    const TraceSet reference = openTraceSet(request.reference, open);
    std::optional<TraceSet> perturbed;
    if (!request.perturbed.isEmpty()) {
        perturbed = openTraceSet(request.perturbed, open);
    }
    const TraceSet* perturbedSet = perturbed ? &*perturbed : nullptr;
    QString problem;
    const auto cannotOpen = [&problem](const QString& folder, const Diagnostics& diagnostics) {
        if (problem.isEmpty()) {
            problem = QStringLiteral("cannot open the trace set %1 that rank 0 opened: %2")
                          .arg(folder, diagnostics.empty() ? QStringLiteral("cancelled")
                                                           : diagnostics.front().toString());
        }
    };
    if (!distributed.usable()) {
        cannotOpen(distributed.folder(), distributed.diagnostics());
    }
    for (const TraceSet* set : {&reference, perturbedSet}) {
        if (set && !set->usable()) {
            cannotOpen(set->folder, set->diagnostics);
        }
    }
    if (!problem.isEmpty()) {
        // Takes part in the comparison's collective steps with nothing to compare.
        const auto end = compareAcrossProcesses(nullptr, options, problem, OutcomePersistence{},
                                                group, OutcomeSink());
        outcome.cancelled = end.cancelled;
        return outcome;
    }
    const ComparisonPlan plan = planComparison(distributed, reference, perturbedSet);
    const auto compared =
        compareIntoStore(plan, options, OutcomePersistence{}, group, ResultsDestination{});
    outcome.cancelled = compared.cancelled;
    return outcome;
}

// The journals of a check whose results are stored: left behind when a check was killed
// between storing its results and removing them, and of no use once the results are there.
void forgetUnfinished(const QString& cacheDir, const QString& fingerprint) {
    QDir(outcomeJournalFolder(cacheDir, fingerprint)).removeRecursively();
}

// The trace sets of a check with their manifests only (not indexed) and the run's
// fingerprint.
struct UnindexedRun {
    TraceSet distributed;
    TraceSet reference;
    std::optional<TraceSet> perturbed;
    QString fingerprint;
};

// Nullopt when a manifest is unreadable or in the wrong slot: the full open then says why.
std::optional<UnindexedRun> unindexedRun(const CheckRequest& request,
                                         const ThresholdConfig& thresholds) {
    const auto unindexed = [](const QString& folder, RunRole role) -> std::optional<TraceSet> {
        TraceSet set;
        set.folder = QDir(folder).absolutePath();
        auto manifest = readManifest(set.folder).manifest;
        if (!manifest || manifest->role != role) {
            return std::nullopt;
        }
        set.manifest = std::move(*manifest);
        return set;
    };
    auto distributed = unindexed(request.distributed, RunRole::Distributed);
    auto reference = unindexed(request.reference, RunRole::Reference);
    std::optional<TraceSet> perturbed;
    if (!request.perturbed.isEmpty()) {
        perturbed = unindexed(request.perturbed, RunRole::PerturbedReference);
        if (!perturbed) {
            return std::nullopt;
        }
    }
    if (!distributed || !reference) {
        return std::nullopt;
    }
    UnindexedRun run{std::move(*distributed), std::move(*reference), std::move(perturbed), {}};
    run.fingerprint =
        runFingerprint(run.distributed, run.reference, run.perturbed ? &*run.perturbed : nullptr,
                       thresholds, request.chunkElements);
    return run;
}

// Whether the results store holds this check's run with its opening, so that it is shown
// without indexing (what showStoredRun() then does). Creates nothing.
bool runIsStored(const CheckRequest& request, const CacheLocation& cache) {
    const QString path = QDir(cache.dir).filePath(QStringLiteral("results.sqlite"));
    if (!cache.usable() || !QFileInfo::exists(path)) {
        return false;
    }
    ThresholdConfig thresholds;
    if (!request.configPath.isEmpty()) {
        auto config = readThresholdConfig(request.configPath);
        if (std::any_of(config.diagnostics.begin(), config.diagnostics.end(),
                        [](const Diagnostic& d) { return d.severity == Severity::Error; })) {
            return false;
        }
        thresholds = config.config;
    }
    QString error;
    const auto store = ResultsStore::open(path, &error);
    const auto run = store ? unindexedRun(request, thresholds) : std::nullopt;
    return run && store->loadOpening(run->fingerprint).has_value();
}

// The stored run of these traces, when none of their files changed: shown from the results
// store alone, without indexing the traces (minutes and gigabytes at 10,000 ranks). False
// when there is none, or a manifest is unreadable or in the wrong slot: the full open then
// says why.
bool showStoredRun(const CheckRequest& request, const QString& cacheDir, ResultsStore& store,
                   CheckReport& report) {
    auto run = unindexedRun(request, report.thresholds);
    if (!run) {
        return false;
    }
    const QString& fingerprint = run->fingerprint;
    auto opening = store.loadOpening(fingerprint);
    if (!opening) {
        return false;
    }
    auto stored = store.load(fingerprint, request.detailsOnDemand ? DetailLoading::OnDemand
                                                                  : DetailLoading::WithResults);
    if (!stored) {
        return false;
    }
    if (request.detailsOnDemand) {
        report.details = store.details(fingerprint);
        if (!report.details) {
            return false;
        }
    }
    const auto infoOf = [](TraceSet& set, std::int64_t datasets) {
        return RunInfo{set.folder, std::move(set.manifest), static_cast<int>(datasets)};
    };
    report.distributed = infoOf(run->distributed, opening->distributedDatasets);
    report.reference = infoOf(run->reference, opening->referenceDatasets);
    if (run->perturbed) {
        report.perturbed = infoOf(*run->perturbed, opening->perturbedDatasets.value_or(0));
    }
    append(report.diagnostics, opening->diagnostics);
    report.comparison = std::move(*stored);
    report.fromCache = true;
    forgetUnfinished(cacheDir, fingerprint);
    return true;
}

// The last steps of a check that compared or found its results: every diagnostic of the
// results into the report, then the localization.
CheckOutcome finish(const CheckRequest& request, const QElapsedTimer& timer, CheckOutcome outcome) {
    CheckReport& report = outcome.report;
    append(report.diagnostics, report.comparison.diagnostics);
    for (const auto& result : report.comparison.results) {
        append(report.diagnostics, result.diagnostics);
    }
    // Derived from the results, however they came (compared now, or from the store).
    PerturbedReferenceInfo perturbed;
    if (report.perturbed) {
        perturbed.folder = report.perturbed->folder;
        perturbed.declaredPerturbation = report.perturbed->manifest.perturbation;
    }
    perturbed.computeDtype = report.distributed.manifest.computeDtype;
    warnUntrustedThresholds(report.comparison.results, perturbed, report.distributed.folder,
                            report.diagnostics);
    if (request.progress) {
        request.progress(CheckStage::Localizing, 0.0);
    }
    report.localization = localize(report.comparison.results, report.details.get());
    // Loaded without shards: those of the tensor the faulty shard is looked for in are read.
    if (report.details) {
        if (const auto target = report.localization.shardTensor()) {
            report.comparison.results[*target].shards = report.details->shardsOf(*target);
            report.localization.faultyShard = findFaultyShard(report.comparison.results, *target);
        }
    }
    outcome.compared = true;
    report.seconds = timer.elapsed() / 1000.0;
    return outcome;
}

// Rank 0, or the only process: the whole check.
CheckOutcome runAsRoot(const CheckRequest& request, const CacheLocation& cache, ProcessGroup* group,
                       const std::function<bool(bool compare)>& tellHelpers,
                       CacheFailures& cacheFailures) {
    QElapsedTimer timer;
    timer.start();
    CheckOutcome outcome;
    CheckReport& report = outcome.report;
    report.toolVersion = QStringLiteral(TTRACE_VERSION);
    report.created = QDateTime::currentDateTimeUtc();
    report.configPath = request.configPath;

    if (!request.configPath.isEmpty()) {
        auto config = readThresholdConfig(request.configPath);
        report.thresholds = config.config;
        append(report.diagnostics, config.diagnostics);
    }

    // Trace folders are only ever read: a cache that would land inside one is refused
    // before anything is created.
    if (!cache.insideTraceFolder.isEmpty()) {
        report.diagnostics.push_back(fileDiagnostic(
            Severity::Error, cache.path,
            QStringLiteral("the cache directory (from %1) is inside the trace folder %2; trace "
                           "folders are never written to: choose another cache "
                           "directory (--cache-dir or TTRACE_CACHE_DIR)")
                .arg(cache.why(), cache.insideTraceFolder)));
        report.seconds = timer.elapsed() / 1000.0;
        return outcome;
    }
    const QString& cacheDir = cache.dir;
    std::unique_ptr<IndexCache> indexCache;
    std::unique_ptr<ResultsStore> resultsStore;
    if (cache.wanted) {
        if (!cache.usable()) {
            cacheFailures.add(
                QStringLiteral("the cache folder (from %1) cannot be created").arg(cache.why()));
        } else {
            QString error, setAside;
            resultsStore = ResultsStore::open(
                QDir(cacheDir).filePath(QStringLiteral("results.sqlite")), &error, &setAside);
            if (!resultsStore) {
                cacheFailures.add(error);
            }
            if (!setAside.isEmpty()) {
                report.diagnostics.push_back(fileDiagnostic(Severity::Warning, cacheDir, setAside));
            }
        }
    }
    const bool configUsable =
        std::none_of(report.diagnostics.begin(), report.diagnostics.end(),
                     [](const Diagnostic& d) { return d.severity == Severity::Error; });
    if (resultsStore && configUsable && showStoredRun(request, cacheDir, *resultsStore, report)) {
        cacheFailures.resultsKept = true;
        return finish(request, timer, std::move(outcome));
    }
    if (!cacheDir.isEmpty()) {
        QString error, setAside;
        indexCache = IndexCache::open(QDir(cacheDir).filePath(QStringLiteral("index.sqlite")),
                                      &error, &setAside);
        if (!indexCache) {
            cacheFailures.add(error);
        }
        if (!setAside.isEmpty()) {
            report.diagnostics.push_back(fileDiagnostic(Severity::Warning, cacheDir, setAside));
        }
    }

    const int setCount = request.perturbed.isEmpty() ? 2 : 3;
    int setsOpened = 0;
    TraceOpening opening;  // stored with the results
    const auto openOptions = [&] {
        OpenOptions options;
        options.cache = indexCache.get();
        options.cancel = request.cancel;
        options.threads = threadsPerProcess(request, group);
        if (request.progress) {
            options.progress = [&request, setsOpened, setCount](double fraction) {
                request.progress(CheckStage::Indexing, (setsOpened + fraction) / setCount);
                return true;
            };
        }
        ++setsOpened;
        return options;
    };
    const auto opened = [&](const Diagnostics& diagnostics) {
        append(report.diagnostics, diagnostics);
        append(opening.diagnostics, diagnostics);
    };
    // The distributed run's index stays in the cache: its tensors' records are read one tensor
    // at a time as they are compared. The references hold one record per tensor.
    const TraceCatalog distributed = TraceCatalog::open(request.distributed, openOptions());
    opened(distributed.diagnostics());
    const TraceSet reference = openTraceSet(request.reference, openOptions());
    opened(reference.diagnostics);
    std::optional<TraceSet> perturbed;
    if (!request.perturbed.isEmpty()) {
        perturbed = openTraceSet(request.perturbed, openOptions());
        opened(perturbed->diagnostics);
    }
    report.distributed = runInfo(distributed);
    report.reference = runInfo(reference);
    if (perturbed) {
        report.perturbed = runInfo(*perturbed);
    }
    if (distributed.cancelled() || reference.cancelled || (perturbed && perturbed->cancelled)) {
        outcome.cancelled = true;
        report.seconds = timer.elapsed() / 1000.0;
        return outcome;
    }

    checkRole(distributed.manifest(), distributed.usable(), RunRole::Distributed,
              report.diagnostics);
    checkRole(reference.manifest, reference.usable(), RunRole::Reference, report.diagnostics);
    if (perturbed) {
        checkRole(perturbed->manifest, perturbed->usable(), RunRole::PerturbedReference,
                  report.diagnostics);
    }
    // Only fatal problems stop here: a bad tensor or rank file is a diagnostic and the rest is
    // still compared, so one corrupt file never hides a bug elsewhere.
    bool fatal =
        !distributed.usable() || !reference.usable() || (perturbed && !perturbed->usable());
    // Errors in a manifest (wrong role, inconsistent mesh) or in the config make every result
    // meaningless; errors in single rank files or tensors do not stop the rest.
    QStringList runFiles{distributed.manifest().path, reference.manifest.path};
    if (perturbed) {
        runFiles << perturbed->manifest.path;
    }
    if (!request.configPath.isEmpty()) {
        runFiles << request.configPath;
    }
    for (const auto& d : report.diagnostics) {
        if (d.severity == Severity::Error && !d.file.isEmpty() && runFiles.contains(d.file)) {
            fatal = true;
        }
    }
    if (fatal) {
        report.seconds = timer.elapsed() / 1000.0;
        return outcome;
    }

    const TraceSet* perturbedSet = perturbed ? &*perturbed : nullptr;
    const QString fingerprint = runFingerprint(distributed.head(), reference, perturbedSet,
                                               report.thresholds, request.chunkElements);
    opening.distributedDatasets = distributed.datasetCount();
    opening.referenceDatasets = static_cast<std::int64_t>(reference.records.size());
    if (perturbed) {
        opening.perturbedDatasets = static_cast<std::int64_t>(perturbed->records.size());
    }
    const DetailLoading loading =
        request.detailsOnDemand ? DetailLoading::OnDemand : DetailLoading::WithResults;
    if (resultsStore) {
        // One check of these traces at a time in this cache: another one computing them now
        // is waited for, and its stored results are then used (RunLock).
        QString error;
        QElapsedTimer waited;
        QString holder;
        outcome.runLock = RunLock::acquire(
            cacheDir, fingerprint, request.cancel,
            [&](const QString& who) {
                holder = who;
                waited.start();
                if (request.progress) {
                    request.progress(CheckStage::Waiting, 0.0);
                }
            },
            &error);
        // Test hook: a check that holds the lock long enough for another to meet it.
        if (const int hold = qEnvironmentVariableIntValue("TTRACE_TEST_HOLD_RUN_LOCK_MS");
            outcome.runLock && hold > 0) {
            QThread::msleep(static_cast<unsigned long>(hold));
        }
        if (!outcome.runLock && error.isEmpty()) {
            outcome.cancelled = true;
            report.seconds = timer.elapsed() / 1000.0;
            return outcome;
        }
        if (!outcome.runLock) {
            cacheFailures.add(error);
            resultsStore.reset();
        } else if (!holder.isEmpty()) {
            report.diagnostics.push_back(fileDiagnostic(
                Severity::Warning, cacheDir,
                QStringLiteral("waited %1 s for another check of the same traces (%2) sharing "
                               "this cache to finish")
                    .arg(QString::number(waited.elapsed() / 1000.0, 'f', 1), holder)));
        }
    }
    std::optional<ComparisonOutput> stored;
    if (resultsStore) {
        stored = resultsStore->load(fingerprint, loading);
    }
    if (stored) {
        // Stored by a ttrace that did not keep the opening: kept now, so that the next time
        // the run is shown from the store alone.
        QString error;
        if (!resultsStore->saveOpening(fingerprint, opening, &error)) {
            cacheFailures.add(error);
        }
        forgetUnfinished(cacheDir, fingerprint);
        cacheFailures.resultsKept = true;
        report.comparison = std::move(*stored);
        if (request.detailsOnDemand) {
            report.details = resultsStore->details(fingerprint);
        }
        report.fromCache = true;
        return finish(request, timer, std::move(outcome));
    }

    ComparisonOptions options;
    options.thresholds = report.thresholds;
    options.threads = threadsPerProcess(request, group);
    options.chunkElements = request.chunkElements;
    options.backend = request.backend.get();
    options.cancel = request.cancel;
    if (request.progress) {
        options.progress = [&request](double fraction) {
            request.progress(CheckStage::Comparing, fraction);
        };
    }
    // Finished tensors are persisted as they finish, so that a killed check resumes.
    OutcomePersistence persistence;
    if (resultsStore) {
        persistence.folder = outcomeJournalFolder(cacheDir, fingerprint);
        persistence.fingerprint = fingerprint;
        persistence.resuming = request.resuming;
    }
    const ComparisonPlan plan = planComparison(distributed, reference, perturbedSet);
    if (!tellHelpers(true)) {
        report.diagnostics.push_back(
            fileDiagnostic(Severity::Error, QString(),
                           QStringLiteral("cannot reach the other processes of the MPI job")));
        report.seconds = timer.elapsed() / 1000.0;
        return outcome;
    }
    ResultsDestination destination;
    destination.store = resultsStore.get();
    destination.fingerprint = fingerprint;
    destination.description = distributed.folder() + QStringLiteral(" vs ") + reference.folder;
    destination.opening = opening;
    destination.loading = loading;
    SingleProcessGroup alone;
    ComparedRun compared =
        compareIntoStore(plan, options, persistence, group ? *group : alone, destination);
    if (compared.cancelled) {
        outcome.cancelled = true;
        report.seconds = timer.elapsed() / 1000.0;
        return outcome;
    }
    for (const auto& warning : compared.warnings) {
        cacheFailures.add(warning.message);
    }
    cacheFailures.resultsKept = compared.stored;
    report.comparison = std::move(compared.output);
    report.details = std::move(compared.details);
    if (compared.stored && report.comparison.complete()) {
        // Stored for good: nothing left to resume. An incomplete run keeps its journal, so
        // that the next one compares only the tensors left unchecked.
        forgetUnfinished(cacheDir, fingerprint);
    }
    return finish(request, timer, std::move(outcome));
}

}  // namespace

QString checkStageName(CheckStage stage) {
    switch (stage) {
        case CheckStage::Indexing:
            return QStringLiteral("indexing");
        case CheckStage::Waiting:
            return QStringLiteral("waiting");
        case CheckStage::Comparing:
            return QStringLiteral("comparing");
        case CheckStage::Localizing:
            return QStringLiteral("localizing");
    }
    return {};
}

CheckOutcome runCheck(const CheckRequest& request) {
    // Where this check's index and results go, decided here once for every step and process.
    const CacheLocation cache =
        resolveCacheLocation(request.cacheDir, request.useCache,
                             {request.distributed, request.reference, request.perturbed});
    ProcessGroup* group =
        request.processes && request.processes->size() > 1 ? request.processes : nullptr;
    if (group) {
        // A stored run needs no index: rank 0 says whether there is one before anybody
        // indexes (after a changed file, the whole job indexes it together).
        QString error;
        const auto stored =
            group->broadcast(group->rank() == 0 && runIsStored(request, cache), &error);
        if (!stored || *stored == 0) {
            indexTogether(request, cache, *group);
        }
    }
    if (group && group->rank() != 0) {
        return runAsHelper(request, cache, *group);
    }
    // The others wait to hear whether there is anything to compare: every way out of rank 0's
    // path tells them, once.
    bool helpersTold = false;
    const auto tellHelpers = [&](bool compare) {
        if (!group || helpersTold) {
            return true;
        }
        helpersTold = true;
        QString error;
        return group->broadcast(compare ? 1 : 0, &error).has_value();
    };
    CacheFailures cacheFailures;
    CheckOutcome outcome = runAsRoot(request, cache, group, tellHelpers, cacheFailures);
    static_cast<void>(tellHelpers(false));  // a failed call has nobody left to tell
    if (auto warning = cacheFailures.warning(cache)) {
        outcome.report.diagnostics.push_back(std::move(*warning));
    }
    return outcome;
}

}  // namespace ttrace

#include "session/RootCheck.h"

#include <QDir>
#include <QElapsedTimer>
#include <QThread>
#include <algorithm>
#include <memory>

#include "compare/FaultyShard.h"
#include "compare/Localization.h"
#include "compare/RoutingChoiceCheck.h"
#include "compare/UntrustedThresholds.h"
#include "session/CheckOptions.h"
#include "session/SingleProcessGroup.h"
#include "session/StoredComparison.h"
#include "session/StoredRun.h"
#include "store/IndexCache.h"
#include "store/OutcomeJournal.h"
#include "store/ResultsStore.h"

namespace ttrace {

namespace {

void append(Diagnostics& into, const Diagnostics& from) {
    into.insert(into.end(), from.begin(), from.end());
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

// The three trace sets of a check, opened. Not moved once planned on: the plan points into
// it.
struct OpenedTraces {
    // Every run's index stays in the index cache where there is one (else each catalog holds
    // its records): a tensor's records are read when the comparison is planned (the trusted
    // runs') and when the tensor is compared.
    TraceCatalog distributed;
    TraceCatalog reference;
    std::optional<TraceCatalog> perturbed;
    TraceOpening opening;  // what opening them found, stored with the results

    const TraceCatalog* perturbedCatalog() const { return perturbed ? &*perturbed : nullptr; }
    bool cancelled() const {
        return distributed.cancelled() || reference.cancelled() ||
               (perturbed && perturbed->cancelled());
    }
};

class RootCheck {
public:
    RootCheck(const CheckRequest& request, const CacheLocation& cache, ProcessGroup* group,
              const std::function<bool(bool compare)>& tellHelpers, CacheFailures& cacheFailures)
        : request_(request),
          cache_(cache),
          group_(group),
          tellHelpers_(tellHelpers),
          cacheFailures_(cacheFailures) {
        timer_.start();
    }

    // The stages, in order; each returns whether the check goes on.
    CheckOutcome run() {
        startReport();
        if (!cacheOutsideTraces()) {
            return stopped();
        }
        openResultsStore();
        if (showStored()) {
            return conclude();
        }
        openIndexCache();
        OpenedTraces traces;
        openTraces(traces);
        if (traces.cancelled()) {
            return cancelled();
        }
        if (!comparable(traces)) {
            return stopped();
        }
        const QString fingerprint =
            runFingerprint(traces.distributed.head(), traces.reference.head(),
                           traces.perturbed ? &traces.perturbed->head() : nullptr,
                           report().thresholds, request_.chunkElements);
        if (!holdRun(fingerprint)) {
            return cancelled();
        }
        if (reuseStored(fingerprint, traces.opening)) {
            return conclude();
        }
        return compare(traces, fingerprint);
    }

private:
    CheckReport& report() { return outcome_.report; }
    DetailLoading loading() const {
        return request_.detailsOnDemand ? DetailLoading::OnDemand : DetailLoading::WithResults;
    }

    // What the report says about the check itself, and its config.
    void startReport() {
        report().toolVersion = QStringLiteral(TTRACE_VERSION);
        report().created = QDateTime::currentDateTimeUtc();
        report().configPath = request_.configPath;
        if (!request_.configPath.isEmpty()) {
            auto config = readThresholdConfig(request_.configPath);
            report().thresholds = config.config;
            append(report().diagnostics, config.diagnostics);
        }
    }

    // Trace folders are only ever read: a cache that would land inside one is refused before
    // anything is created.
    bool cacheOutsideTraces() {
        if (cache_.insideTraceFolder.isEmpty()) {
            return true;
        }
        report().diagnostics.push_back(fileDiagnostic(
            Severity::Error, cache_.path,
            QStringLiteral("the cache directory (from %1) is inside the trace folder %2; trace "
                           "folders are never written to: choose another cache "
                           "directory (--cache-dir or TTRACE_CACHE_DIR)")
                .arg(cache_.why(), cache_.insideTraceFolder)));
        return false;
    }

    void openResultsStore() {
        if (!cache_.wanted) {
            return;
        }
        if (!cache_.usable()) {
            cacheFailures_.add(
                QStringLiteral("the cache folder (from %1) cannot be created").arg(cache_.why()));
            return;
        }
        QString error, setAside;
        store_ = ResultsStore::open(QDir(cache_.dir).filePath(QStringLiteral("results.sqlite")),
                                    &error, &setAside);
        if (!store_) {
            cacheFailures_.add(error);
        }
        if (!setAside.isEmpty()) {
            report().diagnostics.push_back(fileDiagnostic(Severity::Warning, cache_.dir, setAside));
        }
    }

    // Unchanged traces whose results are stored: shown from the store, nothing indexed.
    bool showStored() {
        const bool configUsable = !hasErrors(report().diagnostics);
        if (store_ && configUsable && showStoredRun(request_, cache_.dir, *store_, report())) {
            cacheFailures_.resultsKept = true;
            return true;
        }
        return false;
    }

    void openIndexCache() {
        if (cache_.dir.isEmpty()) {
            return;
        }
        QString error, setAside;
        index_ = IndexCache::open(QDir(cache_.dir).filePath(QStringLiteral("index.sqlite")), &error,
                                  &setAside);
        if (!index_) {
            cacheFailures_.add(error);
        }
        if (!setAside.isEmpty()) {
            report().diagnostics.push_back(fileDiagnostic(Severity::Warning, cache_.dir, setAside));
        }
    }

    // Reads the manifests and indexes the rank files of the three sets (the index cache's
    // records where a file did not change), each set a third of the indexing progress.
    void openTraces(OpenedTraces& traces) {
        const int setCount = request_.perturbed.isEmpty() ? 2 : 3;
        int setsOpened = 0;
        const auto options = [&] {
            OpenOptions open;
            open.cache = index_.get();
            open.cancel = request_.cancel;
            open.threads = threadsPerProcess(request_, group_);
            if (request_.progress) {
                open.progress = [this, setsOpened, setCount](double fraction) {
                    request_.progress(CheckStage::Indexing, (setsOpened + fraction) / setCount);
                    return true;
                };
            }
            ++setsOpened;
            return open;
        };
        const auto opened = [&](const Diagnostics& diagnostics) {
            append(report().diagnostics, diagnostics);
            append(traces.opening.diagnostics, diagnostics);
        };
        traces.distributed = TraceCatalog::open(request_.distributed, options());
        opened(traces.distributed.diagnostics());
        traces.reference = TraceCatalog::open(request_.reference, options());
        opened(traces.reference.diagnostics());
        if (!request_.perturbed.isEmpty()) {
            traces.perturbed = TraceCatalog::open(request_.perturbed, options());
            opened(traces.perturbed->diagnostics());
        }
        report().distributed = runInfo(traces.distributed);
        report().reference = runInfo(traces.reference);
        if (traces.perturbed) {
            report().perturbed = runInfo(*traces.perturbed);
        }
        traces.opening.distributedDatasets = traces.distributed.datasetCount();
        traces.opening.referenceDatasets = traces.reference.datasetCount();
        if (traces.perturbed) {
            traces.opening.perturbedDatasets = traces.perturbed->datasetCount();
        }
    }

    // Only fatal problems stop here: a bad tensor or rank file is a diagnostic and the rest is
    // still compared, so one corrupt file never hides a bug elsewhere. Errors in a manifest
    // (wrong role, inconsistent mesh) or in the config make every result meaningless.
    bool comparable(const OpenedTraces& traces) {
        const TraceCatalog& distributed = traces.distributed;
        const TraceCatalog& reference = traces.reference;
        const auto& perturbed = traces.perturbed;
        checkRole(distributed.manifest(), distributed.usable(), RunRole::Distributed,
                  report().diagnostics);
        checkRole(reference.manifest(), reference.usable(), RunRole::Reference,
                  report().diagnostics);
        if (perturbed) {
            checkRole(perturbed->manifest(), perturbed->usable(), RunRole::PerturbedReference,
                      report().diagnostics);
        }
        if (!distributed.usable() || !reference.usable() || (perturbed && !perturbed->usable())) {
            return false;
        }
        QStringList runFiles{distributed.manifest().path, reference.manifest().path};
        if (perturbed) {
            runFiles << perturbed->manifest().path;
        }
        if (!request_.configPath.isEmpty()) {
            runFiles << request_.configPath;
        }
        return std::none_of(report().diagnostics.begin(), report().diagnostics.end(),
                            [&](const Diagnostic& d) {
                                return d.severity == Severity::Error && !d.file.isEmpty() &&
                                       runFiles.contains(d.file);
                            });
    }

    // One check of these traces at a time in this cache: another one computing them now is
    // waited for, and its stored results are then used (RunLock). False when cancelled while
    // waiting; a lock that cannot be taken costs the cache only.
    bool holdRun(const QString& fingerprint) {
        if (!store_) {
            return true;
        }
        QString error;
        QElapsedTimer waited;
        QString holder;
        outcome_.runLock = RunLock::acquire(
            cache_.dir, fingerprint, request_.cancel,
            [&](const QString& who) {
                holder = who;
                waited.start();
                if (request_.progress) {
                    request_.progress(CheckStage::Waiting, 0.0);
                }
            },
            &error);
        // Test hook: a check that holds the lock long enough for another to meet it.
        if (const int hold = qEnvironmentVariableIntValue("TTRACE_TEST_HOLD_RUN_LOCK_MS");
            outcome_.runLock && hold > 0) {
            QThread::msleep(static_cast<unsigned long>(hold));
        }
        if (!outcome_.runLock && error.isEmpty()) {
            return false;
        }
        if (!outcome_.runLock) {
            cacheFailures_.add(error);
            store_.reset();
        } else if (!holder.isEmpty()) {
            report().diagnostics.push_back(fileDiagnostic(
                Severity::Warning, cache_.dir,
                QStringLiteral("waited %1 s for another check of the same traces (%2) sharing "
                               "this cache to finish")
                    .arg(QString::number(waited.elapsed() / 1000.0, 'f', 1), holder)));
        }
        return true;
    }

    // Results stored by a check that ran meanwhile, or one whose opening was not kept.
    bool reuseStored(const QString& fingerprint, const TraceOpening& opening) {
        std::optional<ComparisonOutput> stored;
        if (store_) {
            stored = store_->load(fingerprint, loading());
        }
        if (!stored) {
            return false;
        }
        // Stored by a ttrace that did not keep the opening: kept now, so that the next time
        // the run is shown from the store alone.
        QString error;
        if (!store_->saveOpening(fingerprint, opening, &error)) {
            cacheFailures_.add(error);
        }
        forgetUnfinished(cache_.dir, fingerprint);
        cacheFailures_.resultsKept = true;
        report().comparison = std::move(*stored);
        if (request_.detailsOnDemand) {
            report().details = store_->details(fingerprint);
        }
        report().fromCache = true;
        return true;
    }

    // Every process compares its share; rank 0 stores every result as it comes and keeps
    // each finished tensor in its journal, so that a killed check resumes.
    CheckOutcome compare(const OpenedTraces& traces, const QString& fingerprint) {
        ComparisonOptions options = comparisonOptions(request_, report().thresholds, group_);
        if (request_.progress) {
            options.progress = [this](double fraction) {
                request_.progress(CheckStage::Comparing, fraction);
            };
        }
        OutcomePersistence persistence;
        if (store_) {
            persistence.folder = outcomeJournalFolder(cache_.dir, fingerprint);
            persistence.fingerprint = fingerprint;
            persistence.resuming = request_.resuming;
        }
        const ComparisonPlan plan =
            planComparison(traces.distributed, traces.reference, traces.perturbedCatalog());
        if (!tellHelpers_(true)) {
            report().diagnostics.push_back(
                fileDiagnostic(Severity::Error, QString(),
                               QStringLiteral("cannot reach the other processes of the MPI job")));
            return stopped();
        }
        ResultsDestination destination;
        destination.store = store_.get();
        destination.fingerprint = fingerprint;
        destination.description =
            traces.distributed.folder() + QStringLiteral(" vs ") + traces.reference.folder();
        destination.opening = traces.opening;
        destination.loading = loading();
        SingleProcessGroup alone;
        ComparedRun compared =
            compareIntoStore(plan, options, persistence, group_ ? *group_ : alone, destination);
        if (compared.cancelled) {
            return cancelled();
        }
        for (const auto& warning : compared.warnings) {
            cacheFailures_.add(warning.message);
        }
        cacheFailures_.resultsKept = compared.stored;
        report().comparison = std::move(compared.output);
        report().details = std::move(compared.details);
        if (compared.stored && report().comparison.complete()) {
            // Stored for good: nothing left to resume. An incomplete run keeps its journal, so
            // that the next one compares only the tensors left unchecked.
            forgetUnfinished(cache_.dir, fingerprint);
        }
        return conclude();
    }

    // The last stage of a check that compared or found its results: every diagnostic of the
    // results into the report, the warnings derived from them, then the localization.
    CheckOutcome conclude() {
        CheckReport& report = outcome_.report;
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
        if (report.perturbed) {
            warnRoutingChoices(
                routingChoicesBeyondRoundOff(report.distributed.manifest.routingChoices,
                                             report.perturbed->manifest.routingChoices,
                                             report.comparison.results),
                report.distributed.folder, report.diagnostics);
        }
        report.gradientFactors = removeCommonGradientFactors(report.comparison.results);
        append(report.diagnostics,
               describeRemovedFactors(report.gradientFactors, report.distributed.folder));
        if (request_.progress) {
            request_.progress(CheckStage::Localizing, 0.0);
        }
        report.localization = localize(report.comparison.results, report.details.get());
        // Loaded without shards: those of the tensor the faulty shard is looked for in are read.
        if (report.details) {
            if (const auto target = report.localization.shardTensor()) {
                report.comparison.results[*target].shards = *report.shardsOf(*target);
                report.localization.faultyShard =
                    findFaultyShard(report.comparison.results, *target);
            }
        }
        outcome_.compared = true;
        return stopped();
    }

    // The check ends here, with what the report holds.
    CheckOutcome stopped() {
        report().seconds = timer_.elapsed() / 1000.0;
        return std::move(outcome_);
    }

    CheckOutcome cancelled() {
        outcome_.cancelled = true;
        return stopped();
    }

    const CheckRequest& request_;
    const CacheLocation& cache_;
    ProcessGroup* group_;
    const std::function<bool(bool compare)>& tellHelpers_;
    CacheFailures& cacheFailures_;
    QElapsedTimer timer_;
    CheckOutcome outcome_;
    std::unique_ptr<ResultsStore> store_;
    std::unique_ptr<IndexCache> index_;
};

}  // namespace

CheckOutcome runAsRoot(const CheckRequest& request, const CacheLocation& cache, ProcessGroup* group,
                       const std::function<bool(bool compare)>& tellHelpers,
                       CacheFailures& cacheFailures) {
    return RootCheck(request, cache, group, tellHelpers, cacheFailures).run();
}

}  // namespace ttrace

#include "session/StoredRun.h"

#include <QDir>
#include <QFileInfo>
#include <algorithm>

#include "store/OutcomeJournal.h"

namespace ttrace {

namespace {

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

}  // namespace

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
    report.diagnostics.insert(report.diagnostics.end(), opening->diagnostics.begin(),
                              opening->diagnostics.end());
    report.comparison = std::move(*stored);
    report.fromCache = true;
    forgetUnfinished(cacheDir, fingerprint);
    return true;
}

void forgetUnfinished(const QString& cacheDir, const QString& fingerprint) {
    QDir(outcomeJournalFolder(cacheDir, fingerprint)).removeRecursively();
}

}  // namespace ttrace

#include "ElementProfileController.h"

#include <QDir>
#include <QFutureWatcher>
#include <QtConcurrent/QtConcurrentRun>

#include "store/CacheLocation.h"
#include "store/IndexCache.h"
#include "trace/TraceSet.h"

namespace ttrace {

struct ElementProfileController::Runs {
    TensorKey key;
    TraceSet distributed;  // only the records of `key`
    TraceSet reference;
    bool cancelled() const { return distributed.cancelled || reference.cancelled; }
};

struct ElementProfileController::Result {
    std::shared_ptr<const Runs> runs;
    ProfileOutcome outcome;
};

ElementProfileController::ElementProfileController(QObject* parent) : QObject(parent) {
    qRegisterMetaType<std::shared_ptr<const ElementErrorProfile>>();
    pool_.setMaxThreadCount(2);  // a cancelled job may still be winding down
}

ElementProfileController::~ElementProfileController() {
    cancel();
    pool_.waitForDone();
}

void ElementProfileController::cancel() {
    if (cancel_) {
        cancel_->store(true);
    }
    ++generation_;
    running_ = false;
}

void ElementProfileController::request(const QString& distributed, const QString& reference,
                                       const TensorKey& key, std::vector<int> preferredRanks) {
    cancel();
    cancel_ = std::make_shared<std::atomic<bool>>(false);
    running_ = true;
    const quint64 generation = generation_;
    // The last tensor's records are reused only for the same tensor of the same folders.
    std::shared_ptr<const Runs> runs = runs_;
    if (runs && (runs->key != key || runs->distributed.folder != QDir(distributed).absolutePath() ||
                 runs->reference.folder != QDir(reference).absolutePath())) {
        runs.reset();
    }
    auto* watcher = new QFutureWatcher<std::shared_ptr<const Result>>(this);
    connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, generation] {
        watcher->deleteLater();
        onDone(generation, watcher->result());
    });
    // The worker owns copies of everything it reads.
    watcher->setFuture(QtConcurrent::run(&pool_, [runs, distributed, reference, key,
                                                  cancel = cancel_, backend = backend_,
                                                  preferredRanks = std::move(preferredRanks)] {
        auto result = std::make_shared<Result>();
        result->runs = runs ? runs : openRuns(distributed, reference, key, cancel.get());
        if (result->runs->cancelled()) {
            result->outcome.cancelled = true;
            return std::shared_ptr<const Result>(std::move(result));
        }
        ProfileOptions options;
        options.cancel = cancel.get();
        options.preferredRanks = preferredRanks;
        options.backend = backend.get();
        result->outcome =
            profileElementErrors(result->runs->distributed, result->runs->reference, key, options);
        return std::shared_ptr<const Result>(std::move(result));
    }));
}

void ElementProfileController::onDone(quint64 generation,
                                      const std::shared_ptr<const Result>& result) {
    if (result && !result->outcome.cancelled) {
        runs_ = result->runs;  // worth keeping even when superseded
    }
    if (generation != generation_ || !result) {
        return;
    }
    running_ = false;
    if (result->outcome.profile) {
        // Aliasing constructor: the profile lives inside the result.
        Q_EMIT finished(
            std::shared_ptr<const ElementErrorProfile>(result, &*result->outcome.profile));
        return;
    }
    // The trace sets' errors first: a missing or unreadable rank file explains the rest.
    QStringList messages;
    for (const TraceSet* set : {&result->runs->distributed, &result->runs->reference}) {
        for (const Diagnostic& d : set->diagnostics) {
            if (d.severity == Severity::Error) {
                messages << d.toString();
            }
        }
    }
    for (const Diagnostic& d : result->outcome.diagnostics) {
        messages << d.toString();
    }
    Q_EMIT failed(messages.isEmpty() ? QStringLiteral("the profile could not be computed")
                                     : messages.join(QLatin1Char('\n')));
}

std::shared_ptr<const ElementProfileController::Runs> ElementProfileController::openRuns(
    const QString& distributed, const QString& reference, const TensorKey& key,
    const std::atomic<bool>* cancel) {
    auto runs = std::make_shared<Runs>();
    runs->key = key;
    std::unique_ptr<IndexCache> cache;
    // The check's rule (resolveCacheLocation): never a cache inside a trace folder.
    const CacheLocation location = resolveCacheLocation({}, true, {distributed, reference});
    if (location.usable()) {
        QString error;  // without a cache the folders are indexed again: slower, still right
        cache =
            IndexCache::open(QDir(location.dir).filePath(QStringLiteral("index.sqlite")), &error);
    }
    OpenOptions options;
    options.cache = cache.get();
    options.cancel = cancel;
    runs->distributed = openTraceSetTensor(distributed, key, options);
    runs->reference = openTraceSetTensor(reference, key, options);
    return runs;
}

}  // namespace ttrace

#include "ElementProfileController.h"

#include <QDir>
#include <QFutureWatcher>
#include <QtConcurrent/QtConcurrentRun>

#include "store/CacheLocation.h"
#include "store/IndexCache.h"
#include "trace/TraceSet.h"

namespace ttrace {

struct ElementProfileController::Runs {
    TraceSet distributed;
    TraceSet reference;
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
    // Opened runs are reused only for the same folders.
    std::shared_ptr<const Runs> runs = runs_;
    if (runs && (runs->distributed.folder != QDir(distributed).absolutePath() ||
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
                                                  cancel = cancel_,
                                                  preferredRanks = std::move(preferredRanks)] {
        auto result = std::make_shared<Result>();
        result->runs = runs ? runs : openRuns(distributed, reference);
        ProfileOptions options;
        options.cancel = cancel.get();
        options.preferredRanks = preferredRanks;
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
    QStringList messages;
    for (const Diagnostic& d : result->outcome.diagnostics) {
        messages << d.toString();
    }
    Q_EMIT failed(messages.isEmpty() ? QStringLiteral("the profile could not be computed")
                                     : messages.join(QLatin1Char('\n')));
}

std::shared_ptr<const ElementProfileController::Runs> ElementProfileController::openRuns(
    const QString& distributed, const QString& reference) {
    auto runs = std::make_shared<Runs>();
    std::unique_ptr<IndexCache> cache;
    const QString cacheDir = cacheDirectory();
    if (!cacheDir.isEmpty()) {
        QString error;  // without a cache the folders are indexed again: slower, still right
        cache = IndexCache::open(QDir(cacheDir).filePath(QStringLiteral("index.sqlite")), &error);
    }
    OpenOptions options;
    options.cache = cache.get();
    runs->distributed = openTraceSet(distributed, options);
    runs->reference = openTraceSet(reference, options);
    return runs;
}

}  // namespace ttrace

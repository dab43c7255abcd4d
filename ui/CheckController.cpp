#include "CheckController.h"

#include <QFutureWatcher>
#include <QMetaObject>
#include <QtConcurrent/QtConcurrentRun>
#include <algorithm>

namespace ttrace {

namespace {

constexpr auto kProgressInterval = std::chrono::milliseconds(100);

// Share of the whole check each stage takes, for one progress bar over all stages.
double overallFraction(CheckStage stage, double fraction) {
    fraction = std::clamp(fraction, 0.0, 1.0);
    switch (stage) {
        case CheckStage::Indexing:
            return 0.15 * fraction;
        case CheckStage::Waiting:
            return 0.15;
        case CheckStage::Comparing:
            return 0.15 + 0.8 * fraction;
        case CheckStage::Localizing:
            return 0.95 + 0.05 * fraction;
    }
    return fraction;
}

}  // namespace

CheckController::CheckController(QObject* parent) : QObject(parent) {
    qRegisterMetaType<std::shared_ptr<const CheckReport>>();
    // A cancelled job may still be winding down when the next one starts.
    pool_.setMaxThreadCount(2);
}

CheckController::~CheckController() {
    if (current_) {
        current_->cancel.store(true);
    }
    pool_.waitForDone();
}

void CheckController::start(CheckRequest request) {
    if (current_) {
        current_->cancel.store(true);  // superseded: its result will be dropped
    }
    auto job = std::make_shared<Job>();
    job->generation = ++generation_;
    job->start = std::chrono::steady_clock::now();
    current_ = job;
    running_ = true;

    request.cancel = &job->cancel;
    request.progress = [this, job](CheckStage stage, double fraction) {
        reportProgress(job, stage, fraction);
    };
    request.resuming = [this, generation = job->generation](std::size_t reused, std::size_t total) {
        QMetaObject::invokeMethod(
            this,
            [this, generation, reused, total] {
                if (generation == generation_ && running_) {
                    Q_EMIT resuming(static_cast<qint64>(reused), static_cast<qint64>(total));
                }
            },
            Qt::QueuedConnection);
    };
    auto* watcher = new QFutureWatcher<std::shared_ptr<const Done>>(this);
    const quint64 generation = job->generation;
    connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, generation] {
        watcher->deleteLater();
        onJobDone(generation, watcher->result());
    });
    // The lambda owns its copy of the request (and through it the job); `this` is only used
    // by the progress callback to post events, and the destructor waits for the pool.
    watcher->setFuture(QtConcurrent::run(&pool_, [request = std::move(request), job] {
        auto done = std::make_shared<Done>();
        done->outcome = runCheck(request);
        // Nothing more is read from the store under this check's lock: a CLI check of the same
        // traces may go on (it finds these results stored).
        done->outcome.runLock.reset();
        if (!done->outcome.cancelled) {
            done->layout = buildHeatmapGrid(done->outcome.report.comparison.results);
        }
        return std::shared_ptr<const Done>(std::move(done));
    }));
    Q_EMIT started();
}

void CheckController::cancel() {
    if (!running_ || !current_) {
        return;
    }
    current_->cancel.store(true);
    // The window is free at once; the worker stops at its next block and is dropped.
    ++generation_;
    running_ = false;
    Q_EMIT cancelled();
}

void CheckController::reportProgress(const std::shared_ptr<Job>& job, CheckStage stage,
                                     double fraction) {
    const auto now = std::chrono::steady_clock::now();
    {
        const std::lock_guard lock(job->mutex);
        const int stageIndex = static_cast<int>(stage);
        if (stageIndex == job->lastStage && now - job->lastReport < kProgressInterval) {
            return;
        }
        job->lastStage = stageIndex;
        job->lastReport = now;
    }
    const double overall = overallFraction(stage, fraction);
    const double elapsed = std::chrono::duration<double>(now - job->start).count();
    // Too early an estimate swings wildly: say nothing until a few percent are done.
    const double secondsLeft = overall > 0.05 ? elapsed * (1 - overall) / overall : -1;
    const QString stageName = checkStageName(stage);
    const quint64 generation = job->generation;
    QMetaObject::invokeMethod(
        this,
        [this, generation, stageName, overall, secondsLeft] {
            if (generation == generation_ && running_) {
                Q_EMIT progressChanged(stageName, overall, secondsLeft);
            }
        },
        Qt::QueuedConnection);
}

void CheckController::onJobDone(quint64 generation, std::shared_ptr<const Done> done) {
    if (generation != generation_) {
        return;  // superseded by a newer start() or by cancel()
    }
    running_ = false;
    current_.reset();
    if (!done || done->outcome.cancelled) {
        Q_EMIT cancelled();
        return;
    }
    // Aliasing constructors: report and layout live inside `done`, no copies.
    Q_EMIT finished(std::shared_ptr<const CheckReport>(done, &done->outcome.report),
                    std::shared_ptr<const HeatmapGrid>(done, &done->layout));
}

}  // namespace ttrace

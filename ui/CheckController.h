#pragma once

#include <QObject>
#include <QString>
#include <QThreadPool>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>

#include "report/CheckReport.h"
#include "report/HeatmapGrid.h"
#include "session/CheckSession.h"

Q_DECLARE_METATYPE(std::shared_ptr<const ttrace::CheckReport>)

namespace ttrace {

// Runs runCheck on a worker thread and hands the report to the GUI thread. Each start() is a
// new generation: a newer start() or cancel() supersedes the running job, whose late results
// are dropped. The worker gets a copy of the request and never touches a QObject's members.
class CheckController : public QObject {
    Q_OBJECT

public:
    explicit CheckController(QObject* parent = nullptr);
    ~CheckController() override;  // cancels and waits for workers: none outlives us

    // `request.cancel` and `request.progress` are set here.
    void start(CheckRequest request);
    bool isRunning() const { return running_; }
    quint64 generation() const { return generation_; }

public Q_SLOTS:
    void cancel();

Q_SIGNALS:
    void started();
    // Throttled to about 10 per second. `fraction` is overall, in [0, 1]; `secondsLeft` < 0
    // while unknown.
    void progressChanged(const QString& stage, double fraction, double secondsLeft);
    // An earlier check of the same traces, killed or stopped, had finished `reused` of the
    // `total` tensors: they are not compared again (docs/checker.md).
    void resuming(qint64 reused, qint64 total);
    // `layout`: the layer heatmap of the report's results, built on the worker too (a large
    // run's takes longer than the GUI thread may block).
    void finished(std::shared_ptr<const ttrace::CheckReport> report,
                  std::shared_ptr<const ttrace::HeatmapGrid> layout);
    void cancelled();

private:
    // State shared between the GUI thread and one job's workers.
    struct Job {
        quint64 generation = 0;
        std::atomic<bool> cancel{false};
        std::chrono::steady_clock::time_point start;
        std::mutex mutex;  // guards the throttle below (progress comes from many threads)
        std::chrono::steady_clock::time_point lastReport{};
        int lastStage = -1;
    };
    void reportProgress(const std::shared_ptr<Job>& job, CheckStage stage, double fraction);
    struct Done {
        CheckOutcome outcome;
        HeatmapGrid layout;
    };
    void onJobDone(quint64 generation, std::shared_ptr<const Done> done);

    QThreadPool pool_;  // our own: a check never waits behind other users of the global pool
    std::shared_ptr<Job> current_;
    quint64 generation_ = 0;
    bool running_ = false;
};

}  // namespace ttrace

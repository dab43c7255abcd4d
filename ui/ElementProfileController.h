#pragma once

#include <QObject>
#include <QString>
#include <QThreadPool>
#include <atomic>
#include <memory>

#include "compare/ElementErrorProfile.h"

Q_DECLARE_METATYPE(std::shared_ptr<const ttrace::ElementErrorProfile>)

namespace ttrace {

// Computes the element-level profile of one tensor on a worker thread when the user opens it.
// Each request() is a new generation: an older request still running is cancelled and its
// result dropped. Each request reads only its tensor's records of the two trace sets (from the
// index cache; openTraceSetTensor), so its time and memory do not grow with the number of
// tensors in the trace; the last tensor's records are kept for the next request of the same
// tensor (another rank's copy).
class ElementProfileController : public QObject {
    Q_OBJECT

public:
    explicit ElementProfileController(QObject* parent = nullptr);
    ~ElementProfileController() override;  // cancels and waits: no worker outlives us

    // `preferredRanks`: whose copy of each shard to profile (ProfileOptions::preferredRanks).
    void request(const QString& distributed, const QString& reference, const TensorKey& key,
                 std::vector<int> preferredRanks);
    void cancel();
    bool isRunning() const { return running_; }
    // Where later requests bin their element errors (the window's check's backend); the CPU
    // backend until set.
    void setBackend(std::shared_ptr<const MetricsBackend> backend) {
        backend_ = std::move(backend);
    }

Q_SIGNALS:
    void finished(std::shared_ptr<const ttrace::ElementErrorProfile> profile);
    // The profile could not be computed: what went wrong, naming file and dataset.
    void failed(const QString& message);

private:
    struct Runs;  // one tensor's records of both trace sets
    struct Result;
    // Runs on the worker: reads the records of `key` in both folders, read-only, from the
    // index cache where it has them.
    static std::shared_ptr<const Runs> openRuns(const QString& distributed,
                                                const QString& reference, const TensorKey& key,
                                                const std::atomic<bool>* cancel);
    void onDone(quint64 generation, const std::shared_ptr<const Result>& result);

    QThreadPool pool_;
    std::shared_ptr<std::atomic<bool>> cancel_;
    std::shared_ptr<const Runs> runs_;
    std::shared_ptr<const MetricsBackend> backend_;
    quint64 generation_ = 0;
    bool running_ = false;
};

}  // namespace ttrace

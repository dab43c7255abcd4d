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
// result dropped. The trace sets are opened (index from the cache) by the first request and
// kept, read-only, for the next ones on the same folders.
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

Q_SIGNALS:
    void finished(std::shared_ptr<const ttrace::ElementErrorProfile> profile);
    // The profile could not be computed: what went wrong, naming file and dataset.
    void failed(const QString& message);

private:
    struct Runs;  // the opened trace sets
    struct Result;
    // Runs on the worker: opens both folders read-only, their index from the cache.
    static std::shared_ptr<const Runs> openRuns(const QString& distributed,
                                                const QString& reference);
    void onDone(quint64 generation, const std::shared_ptr<const Result>& result);

    QThreadPool pool_;
    std::shared_ptr<std::atomic<bool>> cancel_;
    std::shared_ptr<const Runs> runs_;
    quint64 generation_ = 0;
    bool running_ = false;
};

}  // namespace ttrace

#pragma once

#include <QElapsedTimer>
#include <QString>
#include <QTextStream>
#include <mutex>

#include "session/CheckSession.h"

namespace ttrace {

// A one-line progress bar with the stage and the time left, redrawn at most ten times a
// second; only used when stderr is a terminal. Called from worker threads.
class TerminalProgress {
public:
    explicit TerminalProgress(QTextStream& err);
    void update(CheckStage stage, double fraction);
    // Clears the line so that the summary starts on a clean one.
    void finish();

private:
    QTextStream& err_;
    std::mutex mutex_;
    QElapsedTimer sinceDraw_;
    QElapsedTimer sinceStageStart_;
    CheckStage stage_ = CheckStage::Indexing;
    bool drawn_ = false;
};

}  // namespace ttrace

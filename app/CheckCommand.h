#pragma once

#include <QString>
#include <QStringList>
#include <QTextStream>
#include <atomic>

#include "compare/BackendChoice.h"
#include "mapping/BlockPlan.h"

namespace ttrace {

class ProcessGroup;

// Exit codes of ttrace-check, relied on by CI scripts (docs/checker.md).
enum ExitCode {
    kExitNoBug = 0,
    kExitBugFound = 1,
    kExitBadInput = 2,
    kExitIncomplete = 3,  // a process of a distributed check failed; tensors left unchecked
    // No bug in the tensors compared, but the runs do not hold the same tensors: reference
    // tensors not captured, or distributed ones the reference lacks (docs/checker.md).
    kExitPartialCoverage = 4,
    kExitInterrupted = 130
};

struct CheckCommandOptions {
    QString distributed;
    QString reference;
    QString perturbed;
    QString config;
    QString jsonPath;
    QString markdownPath;
    QString htmlPath;
    QString cacheDir;
    bool useCache = true;
    bool quiet = false;
    int threads = 0;
    qint64 chunkElements = kDefaultChunkElements;
    BackendKind backend = BackendKind::Auto;
};

struct ParsedCommand {
    enum class Action { Run, PrintAndExit, UsageError };
    Action action = Action::Run;
    CheckCommandOptions options;
    QString text;  // help or version text, or the usage error
};

// Parses ttrace-check's arguments (argv[0] first).
ParsedCommand parseCheckCommand(const QStringList& args);

// Runs the check, writes the requested reports, prints a summary to `out` and problems and
// progress to `err`; returns the exit code. With a group of several processes (an MPI job),
// every process calls it; rank 0 alone prints and writes, and every process returns rank 0's
// exit code, so that mpirun's own exit code is the check's.
int runCheckCommand(const CheckCommandOptions& options, QTextStream& out, QTextStream& err,
                    bool showProgress, const std::atomic<bool>* cancel,
                    ProcessGroup* processes = nullptr);

}  // namespace ttrace

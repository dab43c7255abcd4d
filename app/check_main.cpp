// ttrace-check: the headless twin of the ttrace GUI, for CI and batch jobs.
#include <unistd.h>

#include <QCoreApplication>
#include <QTextStream>
#include <atomic>
#include <csignal>
#include <cstdio>

#include "CheckCommand.h"
#include "MpiJob.h"
#include "trace/IsolatedHdf5.h"

namespace {
std::atomic<bool> gCancel{false};
// The first Ctrl-C cancels cooperatively; a second one (say, during a read that hangs on a
// dead file system) ends the process the default way.
extern "C" void onInterrupt(int signal) {
    gCancel.store(true);
    std::signal(signal, SIG_DFL);
}
}  // namespace

int main(int argc, char** argv) {
    // Under mpirun or srun every process runs this same command line (docs/checker.md).
    const ttrace::MpiJob job(argc, argv);
    QCoreApplication app(argc, argv);
    QCoreApplication::setApplicationName(QStringLiteral("ttrace-check"));
    QCoreApplication::setApplicationVersion(QStringLiteral(TTRACE_VERSION));
    QTextStream out(stdout);
    QTextStream err(stderr);

    const auto parsed = ttrace::parseCheckCommand(QCoreApplication::arguments());
    switch (parsed.action) {
        case ttrace::ParsedCommand::Action::PrintAndExit:
            out << parsed.text;
            return ttrace::kExitNoBug;
        case ttrace::ParsedCommand::Action::UsageError:
            err << QStringLiteral("ttrace-check: ") << parsed.text;
            return ttrace::kExitBadInput;
        case ttrace::ParsedCommand::Action::Run:
            break;
    }
    // Every libhdf5 call on a rank file runs in a worker process, where a corrupt file can
    // only take the worker down.
    if (const auto warning = ttrace::isolateHdf5ForThisProgram()) {
        err << QStringLiteral("ttrace-check: warning: ") << *warning << QLatin1Char('\n');
        err.flush();
    }
    if (!job.problem().isEmpty()) {
        err << QStringLiteral("ttrace-check: ") << job.problem() << QLatin1Char('\n');
        return ttrace::kExitBadInput;
    }
    // Ctrl-C cancels cooperatively: workers stop at the next block and nothing half-done is
    // stored.
    std::signal(SIGINT, onInterrupt);
    std::signal(SIGTERM, onInterrupt);
    // Open MPI gives its processes a terminal as stdout when it has one, but a pipe as stderr,
    // which it passes on to its own: the bar then goes there all the same.
    const bool terminal =
        isatty(fileno(stderr)) != 0 || (job.processes() != nullptr && isatty(fileno(stdout)) != 0);
    return ttrace::runCheckCommand(parsed.options, out, err, terminal, &gCancel, job.processes());
}

#include "session/DistributedComparison.h"

#include <QDataStream>
#include <QDateTime>
#include <QDir>
#include <QIODevice>
#include <QtGlobal>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <future>
#include <stdexcept>

#include "compare/TaskOutcomesCodec.h"
#include "compare/TaskPartition.h"
#include "store/OutcomeJournal.h"

namespace ttrace {

namespace {

// How often a process passes its progress on to rank 0.
constexpr auto kProgressInterval = std::chrono::milliseconds(200);

// What rank 0 tells every process before they compare: where to persist what they finish,
// and which tensors an earlier run of the check already finished.
struct StartMessage {
    QString folder;
    QString fingerprint;
    qint64 attempt = 0;  // names this run's journal files apart from an earlier run's
    std::vector<std::size_t> done;
};

QByteArray encodeStart(const StartMessage& start) {
    QByteArray bytes;
    QDataStream out(&bytes, QIODevice::WriteOnly);
    out.setVersion(QDataStream::Qt_6_4);
    out << start.folder << start.fingerprint << start.attempt
        << static_cast<quint64>(start.done.size());
    for (const std::size_t task : start.done) {
        out << static_cast<quint64>(task);
    }
    return bytes;
}

std::optional<StartMessage> decodeStart(const QByteArray& bytes) {
    QDataStream in(bytes);
    in.setVersion(QDataStream::Qt_6_4);
    StartMessage start;
    quint64 count = 0;
    in >> start.folder >> start.fingerprint >> start.attempt >> count;
    if (in.status() != QDataStream::Ok ||
        count > static_cast<quint64>(bytes.size()) / sizeof(quint64)) {
        return std::nullopt;
    }
    start.done.resize(count);
    for (auto& task : start.done) {
        quint64 value = 0;
        in >> value;
        task = static_cast<std::size_t>(value);
    }
    if (in.status() != QDataStream::Ok || !in.atEnd()) {
        return std::nullopt;
    }
    return start;
}

// Whether `outcome` is about task `outcome.task` of this plan.
bool sameTensor(const ComparisonPlan& plan, const TaskOutcome& outcome) {
    return outcome.result ? outcome.result->key == plan.tasks[outcome.task].distributed->key
                          : outcome.failure.has_value();
}

// Outcomes read back from a journal that fit the plan, one per task (the fingerprint already
// says they are of the same traces and config).
std::vector<TaskOutcome> reusableOutcomes(const ComparisonPlan& plan,
                                          std::vector<TaskOutcome> read) {
    std::vector<bool> seen(plan.tasks.size(), false);
    std::vector<TaskOutcome> kept;
    for (auto& outcome : read) {
        if (outcome.task < plan.tasks.size() && !seen[outcome.task] && sameTensor(plan, outcome)) {
            seen[outcome.task] = true;
            kept.push_back(std::move(outcome));
        }
    }
    std::sort(kept.begin(), kept.end(),
              [](const TaskOutcome& a, const TaskOutcome& b) { return a.task < b.task; });
    return kept;
}

// The tasks not done yet, split: per process, indices into plan.tasks in ascending order.
std::vector<std::vector<std::size_t>> partition(const ComparisonPlan& plan,
                                                const std::vector<std::size_t>& done,
                                                int processes) {
    std::vector<bool> isDone(plan.tasks.size(), false);
    for (const std::size_t task : done) {
        if (task < isDone.size()) {
            isDone[task] = true;
        }
    }
    std::vector<std::size_t> remaining;
    std::vector<std::int64_t> bytes;
    for (std::size_t task = 0; task < plan.tasks.size(); ++task) {
        if (!isDone[task]) {
            remaining.push_back(task);
            bytes.push_back(plannedBytes(plan.tasks[task]));
        }
    }
    auto shares = partitionTasks(bytes, processes);
    for (auto& share : shares) {
        for (auto& task : share) {
            task = remaining[task];
        }
    }
    return shares;
}

// The rank a test hook variable names, if it names this one.
bool hookNames(const char* variable, int rank) {
    bool ok = false;
    const int named = qEnvironmentVariableIntValue(variable, &ok);
    return ok && named == rank;
}

// This process's share, compared, each finished tensor appended to `journal` (when there is
// one); never throws (a failure is in the outcomes).
TaskOutcomes compareShare(const ComparisonPlan& plan, const TraceSet& distributed,
                          const std::vector<std::size_t>& share, ComparisonOptions options,
                          OutcomeJournal* journal, int rank) {
    const bool fail = hookNames(kFailProcessVariable, rank);
    const bool kill = hookNames(kKillProcessVariable, rank);
    std::atomic<int> finished{0};
    options.tensorFinished = [&](const TaskOutcome& outcome) {
        if (journal) {
            journal->append(outcome);
        }
        if (kill && ++finished == 2) {
            std::raise(SIGKILL);
        }
        if (fail) {
            throw std::runtime_error("test hook " + std::string(kFailProcessVariable) + "=" +
                                     std::to_string(rank) + " stopped this process");
        }
    };
    try {
        return compareTasks(plan, share, distributed, options);
    } catch (const std::exception& e) {
        // Outside the workers (say, memory for the plan of blocks): nothing finished.
        TaskOutcomes outcomes;
        outcomes.failure = QString::fromLocal8Bit(e.what());
        return outcomes;
    }
}

std::int64_t plannedBytes(const ComparisonPlan& plan, const std::vector<std::size_t>& tasks) {
    std::int64_t bytes = 0;
    for (const std::size_t task : tasks) {
        bytes += plannedBytes(plan.tasks[task]);
    }
    return bytes;
}

// compareShare, with the progress of the whole job: the share is compared on a worker thread
// while this thread, the one that talks to the other processes, passes the bytes compared on
// to rank 0 a few times a second. On rank 0, `show` gets the bytes the job has compared.
TaskOutcomes compareShareShowingJob(const ComparisonPlan& plan, const TraceSet& distributed,
                                    const std::vector<std::size_t>& share,
                                    ComparisonOptions options, OutcomeJournal* journal,
                                    ProcessGroup& group,
                                    const std::function<void(std::int64_t jobBytes)>& show) {
    const auto shareBytes = static_cast<double>(plannedBytes(plan, share));
    std::atomic<std::int64_t> bytesHere{0};
    options.progress = [&](double fraction) {
        bytesHere.store(std::llround(fraction * shareBytes));
        if (group.size() == 1) {
            show(bytesHere.load());
        }
    };
    if (group.size() == 1) {
        return compareShare(plan, distributed, share, std::move(options), journal, 0);
    }
    auto running = std::async(std::launch::async, [&] {
        return compareShare(plan, distributed, share, options, journal, group.rank());
    });
    while (running.wait_for(kProgressInterval) != std::future_status::ready) {
        show(group.shareProgress(bytesHere.load()));
    }
    show(group.shareProgress(bytesHere.load()));
    return running.get();
}

// Whether every outcome a process sent is for a task of its share, about the same tensor as
// in rank 0's plan: a process whose traces changed under it would otherwise mix tensors up.
bool sameTensors(const ComparisonPlan& plan, const std::vector<std::size_t>& share,
                 const std::vector<TaskOutcome>& outcomes) {
    return std::all_of(outcomes.begin(), outcomes.end(), [&](const TaskOutcome& outcome) {
        return std::binary_search(share.begin(), share.end(), outcome.task) &&
               sameTensor(plan, outcome);
    });
}

// Why the tensors of `process` that it did not finish are unchecked.
QString processFailure(ProcessGroup& group, int process, const QString& what) {
    if (group.size() == 1) {
        return QStringLiteral("the comparison stopped: ") + what;
    }
    return QStringLiteral("process %1 of %2 failed: %3").arg(process).arg(group.size()).arg(what);
}

}  // namespace

ComparisonOutput compareAcrossProcesses(const ComparisonPlan* plan, const TraceSet* distributed,
                                        const ComparisonOptions& options,
                                        const QString& planProblem,
                                        const OutcomePersistence& persistence,
                                        ProcessGroup& group) {
    const int rank = group.rank();
    // Rank 0 alone reads what an earlier run left, then tells everyone.
    std::vector<TaskOutcome> previous;
    StartMessage start;
    if (rank == 0 && plan && !persistence.folder.isEmpty()) {
        previous = reusableOutcomes(
            *plan, readOutcomeJournals(persistence.folder, persistence.fingerprint).outcomes);
        start.folder = persistence.folder;
        start.fingerprint = persistence.fingerprint;
        start.attempt = QDateTime::currentMSecsSinceEpoch();
        for (const auto& outcome : previous) {
            start.done.push_back(outcome.task);
        }
        if (!previous.empty() && persistence.resuming) {
            persistence.resuming(previous.size(), plan->tasks.size());
        }
    }
    QString problem = planProblem;
    const auto shared =
        group.broadcastBytes(rank == 0 ? encodeStart(start) : QByteArray(), &problem);
    const auto started = shared ? decodeStart(*shared) : std::nullopt;
    if (shared && !started && problem.isEmpty()) {
        problem = QStringLiteral("what rank 0 sent could not be decoded");
    }

    // Every process computes the same split; rank 0 also judges the others by it.
    const auto shares = plan && started ? partition(*plan, started->done, group.size())
                                        : std::vector<std::vector<std::size_t>>();
    // Rank 0 shows the whole job's progress, the tensors an earlier run finished included.
    const std::int64_t bytesBefore = plan ? plannedBytes(*plan, start.done) : 0;  // rank 0's
    std::int64_t total = 0;
    for (std::size_t task = 0; plan && task < plan->tasks.size(); ++task) {
        total += plannedBytes(plan->tasks[task]);
    }
    const std::function<void(std::int64_t)> showJob = [&](std::int64_t jobBytes) {
        if (options.progress && total > 0) {
            options.progress(std::min(
                1.0, static_cast<double>(bytesBefore + jobBytes) / static_cast<double>(total)));
        }
    };
    TaskOutcomes mine;
    QString journalProblem;
    if (plan && distributed && started) {
        std::unique_ptr<OutcomeJournal> journal;
        if (!started->folder.isEmpty()) {
            const QString name = QStringLiteral("%1-%2.outcomes").arg(started->attempt).arg(rank);
            journal = OutcomeJournal::create(QDir(started->folder).filePath(name),
                                             started->fingerprint, &journalProblem);
        }
        mine = compareShareShowingJob(*plan, *distributed, shares[static_cast<std::size_t>(rank)],
                                      options, journal.get(), group, showJob);
        if (journal) {
            journalProblem = journal->error();
        }
    } else {
        mine.failure = problem;
    }
    if (!mine.failure.isEmpty() && group.size() > 1) {
        mine.failure += QStringLiteral(" (on ") + group.processName() + QLatin1Char(')');
    }
    const QString backendName = mine.backendName;
    const auto received = group.gatherToRoot(
        encodeTaskOutcomes(mine), options.progress ? showJob : std::function<void(std::int64_t)>());
    if (rank == 0 && options.progress) {
        options.progress(1.0);  // every process has finished
    }
    if (rank != 0 || !plan || !started) {
        ComparisonOutput none;
        none.cancelled = mine.cancelled;
        return none;
    }

    // Whatever a process sent, or failed to send, what it was given and did not finish is
    // unchecked.
    std::vector<TaskOutcome> outcomes = std::move(previous);
    std::vector<std::pair<std::size_t, QString>> unchecked;
    bool cancelled = false;
    for (int process = 0; process < group.size(); ++process) {
        const auto& share = shares[static_cast<std::size_t>(process)];
        const auto& from = received[static_cast<std::size_t>(process)];
        std::optional<TaskOutcomes> theirs;
        QString failure;
        if (process == 0) {
            theirs = std::move(mine);
        } else if (!from.bytes) {
            failure = QStringLiteral("its results could not be received: ") + from.error;
        } else if (!(theirs = decodeTaskOutcomes(*from.bytes))) {
            failure = QStringLiteral("its results could not be decoded");
        }
        std::vector<bool> finished(share.size(), false);
        if (theirs) {
            cancelled = cancelled || theirs->cancelled;
            failure = theirs->failure;
            if (!sameTensors(*plan, share, theirs->finished)) {
                failure = QStringLiteral(
                    "it compared other tensors than rank 0 gave it (did the traces change "
                    "during the check?)");
                theirs->finished.clear();
            }
            for (auto& outcome : theirs->finished) {
                const auto at = std::lower_bound(share.begin(), share.end(), outcome.task);
                finished[static_cast<std::size_t>(at - share.begin())] = true;
                outcomes.push_back(std::move(outcome));
            }
        }
        if (failure.isEmpty()) {
            failure = QStringLiteral("it stopped before finishing them");
        }
        for (std::size_t i = 0; i < share.size(); ++i) {
            if (!finished[i]) {
                unchecked.emplace_back(share[i], processFailure(group, process, failure));
            }
        }
    }
    if (cancelled) {
        ComparisonOutput output;
        output.backendName = backendName;
        output.cancelled = true;
        return output;
    }
    std::sort(unchecked.begin(), unchecked.end());
    ComparisonOutput output =
        assembleComparison(*plan, std::move(outcomes), unchecked, backendName);
    if (!journalProblem.isEmpty()) {
        Diagnostic warning;
        warning.severity = Severity::Warning;
        warning.file = start.folder;
        warning.message =
            journalProblem + QStringLiteral(
                                 " (finished tensors are not persisted: a check killed "
                                 "outright would have to compare them again)");
        output.diagnostics.push_back(std::move(warning));
    }
    return output;
}

}  // namespace ttrace

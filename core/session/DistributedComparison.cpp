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
#include <mutex>
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
            bytes.push_back(plan.tasks[task].bytes);
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

// The journal file of process `rank` in this run of the check.
QString journalPath(const StartMessage& start, int rank) {
    return QDir(start.folder)
        .filePath(QStringLiteral("%1-%2.outcomes").arg(start.attempt).arg(rank));
}

// This process's share, compared, each finished tensor appended to `journal` (when there is
// one) and handed to `finished`; never throws (a failure is in the outcomes).
TaskOutcomes compareShare(const ComparisonPlan& plan, const std::vector<std::size_t>& share,
                          ComparisonOptions options, OutcomeJournal* journal, int rank,
                          const std::function<void(TaskOutcome&&, bool journaled)>& finished) {
    const bool fail = hookNames(kFailProcessVariable, rank);
    const bool kill = hookNames(kKillProcessVariable, rank);
    std::atomic<int> count{0};
    options.tensorFinished = [&](TaskOutcome&& outcome) {
        const bool journaled = journal && journal->append(outcome);
        finished(std::move(outcome), journaled);
        if (kill && ++count == 2) {
            std::raise(SIGKILL);
        }
        if (fail) {
            throw std::runtime_error("test hook " + std::string(kFailProcessVariable) + "=" +
                                     std::to_string(rank) + " stopped this process");
        }
    };
    try {
        return compareTasks(plan, share, options);
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
        bytes += plan.tasks[task].bytes;
    }
    return bytes;
}

// compareShare, with the progress of the whole job: the share is compared on a worker thread
// while this thread, the one that talks to the other processes, passes the bytes compared on
// to rank 0 a few times a second. On rank 0, `show` gets the bytes the job has compared.
TaskOutcomes compareShareShowingJob(
    const ComparisonPlan& plan, const std::vector<std::size_t>& share, ComparisonOptions options,
    OutcomeJournal* journal, ProcessGroup& group,
    const std::function<void(std::int64_t jobBytes)>& show,
    const std::function<void(TaskOutcome&&, bool journaled)>& finished) {
    const auto shareBytes = static_cast<double>(plannedBytes(plan, share));
    std::atomic<std::int64_t> bytesHere{0};
    options.progress = [&](double fraction) {
        bytesHere.store(std::llround(fraction * shareBytes));
        if (group.size() == 1) {
            show(bytesHere.load());
        }
    };
    if (group.size() == 1) {
        return compareShare(plan, share, std::move(options), journal, 0, finished);
    }
    auto running = std::async(std::launch::async, [&] {
        return compareShare(plan, share, options, journal, group.rank(), finished);
    });
    while (running.wait_for(kProgressInterval) != std::future_status::ready) {
        show(group.shareProgress(bytesHere.load()));
    }
    show(group.shareProgress(bytesHere.load()));
    return running.get();
}

// Why the tensors of `process` that it did not finish are unchecked.
QString processFailure(ProcessGroup& group, int process, const QString& what) {
    if (group.size() == 1) {
        return QStringLiteral("the comparison stopped: ") + what;
    }
    return QStringLiteral("process %1 of %2 failed: %3").arg(process).arg(group.size()).arg(what);
}

// Rank 0's request for outcomes it could not read in the other processes' journals: per
// process, the tasks it wants sent.
using Request = std::vector<std::vector<std::size_t>>;

QByteArray encodeRequest(const Request& request) {
    QByteArray bytes;
    QDataStream out(&bytes, QIODevice::WriteOnly);
    out.setVersion(QDataStream::Qt_6_4);
    out << static_cast<quint64>(request.size());
    for (const auto& tasks : request) {
        out << static_cast<quint64>(tasks.size());
        for (const std::size_t task : tasks) {
            out << static_cast<quint64>(task);
        }
    }
    return bytes;
}

std::optional<Request> decodeRequest(const QByteArray& bytes) {
    QDataStream in(bytes);
    in.setVersion(QDataStream::Qt_6_4);
    const auto count = [&]() -> std::optional<std::size_t> {
        quint64 n = 0;
        in >> n;
        if (in.status() != QDataStream::Ok || n > static_cast<quint64>(bytes.size())) {
            return std::nullopt;
        }
        return static_cast<std::size_t>(n);
    };
    const auto processes = count();
    if (!processes) {
        return std::nullopt;
    }
    Request request(*processes);
    for (auto& tasks : request) {
        const auto n = count();
        if (!n) {
            return std::nullopt;
        }
        tasks.resize(*n);
        for (auto& task : tasks) {
            quint64 value = 0;
            in >> value;
            task = static_cast<std::size_t>(value);
        }
    }
    if (in.status() != QDataStream::Ok || !in.atEnd()) {
        return std::nullopt;
    }
    return request;
}

// What rank 0 knows of the outcomes of one process.
struct ProcessOutcomes {
    std::vector<std::size_t> share;
    bool heard = false;             // its report arrived and could be decoded
    QString failure;                // why it stopped, as it said or as rank 0 found
    std::vector<std::size_t> owed;  // finished tasks whose outcomes have not reached rank 0
};

}  // namespace

ComparisonEnd compareAcrossProcesses(const ComparisonPlan* plan, const ComparisonOptions& options,
                                     const QString& planProblem,
                                     const OutcomePersistence& persistence, ProcessGroup& group,
                                     const OutcomeSink& sink) {
    const int rank = group.rank();
    const std::size_t taskCount = plan ? plan->tasks.size() : 0;
    // Rank 0: the tasks whose outcome the sink has had, so that each goes there once.
    std::vector<bool> delivered(rank == 0 ? taskCount : 0, false);
    std::mutex deliveredMutex;
    const auto deliver = [&](TaskOutcome&& outcome) {
        {
            const std::lock_guard lock(deliveredMutex);
            if (!outcomeFits(*plan, outcome) || delivered[outcome.task]) {
                return;
            }
            delivered[outcome.task] = true;
        }
        sink(std::move(outcome));
    };

    // Rank 0 alone reads what an earlier run left, then tells everyone.
    StartMessage start;
    if (rank == 0 && plan && !persistence.folder.isEmpty()) {
        forEachJournaledOutcome(persistence.folder, persistence.fingerprint, deliver);
        for (std::size_t task = 0; task < taskCount; ++task) {
            if (delivered[task]) {
                start.done.push_back(task);
            }
        }
        start.folder = persistence.folder;
        start.fingerprint = persistence.fingerprint;
        start.attempt = QDateTime::currentMSecsSinceEpoch();
        if (!start.done.empty() && persistence.resuming) {
            persistence.resuming(start.done.size(), taskCount);
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
    for (std::size_t task = 0; task < taskCount; ++task) {
        total += plan->tasks[task].bytes;
    }
    const std::function<void(std::int64_t)> showJob = [&](std::int64_t jobBytes) {
        if (options.progress && total > 0) {
            options.progress(std::min(
                1.0, static_cast<double>(bytesBefore + jobBytes) / static_cast<double>(total)));
        }
    };
    TaskOutcomes mine;
    QString journalProblem;
    if (plan && started) {
        std::unique_ptr<OutcomeJournal> journal;
        if (!started->folder.isEmpty()) {
            journal = OutcomeJournal::create(journalPath(*started, rank), started->fingerprint,
                                             &journalProblem);
        }
        // Rank 0 hands its own outcomes on at once; the others report where theirs are.
        std::mutex mineMutex;
        std::vector<TaskOutcome> unjournaled;
        std::vector<std::size_t> journaled;
        const auto finished = [&](TaskOutcome&& outcome, bool inJournal) {
            if (rank == 0) {
                deliver(std::move(outcome));
                return;
            }
            const std::lock_guard lock(mineMutex);
            if (inJournal) {
                journaled.push_back(outcome.task);
            } else {
                unjournaled.push_back(std::move(outcome));
            }
        };
        mine = compareShareShowingJob(*plan, shares[static_cast<std::size_t>(rank)], options,
                                      journal.get(), group, showJob, finished);
        if (journal) {
            journalProblem = journal->error();
        }
        std::sort(journaled.begin(), journaled.end());
        mine.journaled = std::move(journaled);
        mine.finished = std::move(unjournaled);
    } else {
        mine.failure = problem;
    }
    if (!mine.failure.isEmpty() && group.size() > 1) {
        mine.failure += QStringLiteral(" (on ") + group.processName() + QLatin1Char(')');
    }
    const auto received = group.gatherToRoot(
        encodeTaskOutcomes(mine), options.progress ? showJob : std::function<void(std::int64_t)>());
    mine.finished.clear();  // sent

    // Rank 0 takes each process's outcomes from its message, then from its journal, and asks
    // for those it could not read there.
    std::vector<ProcessOutcomes> processes;
    Request request(static_cast<std::size_t>(group.size()));
    const bool readJournals = qEnvironmentVariableIsEmpty(kUnreadJournalsVariable);
    bool cancelled = mine.cancelled;
    if (rank == 0 && plan && started) {
        processes.resize(static_cast<std::size_t>(group.size()));
        for (int process = 0; process < group.size(); ++process) {
            auto& p = processes[static_cast<std::size_t>(process)];
            p.share = shares[static_cast<std::size_t>(process)];
            const auto& from = received[static_cast<std::size_t>(process)];
            std::optional<TaskOutcomes> theirs;
            if (process == 0) {
                p.heard = true;
                p.failure = mine.failure;
                continue;  // its outcomes went to the sink as they finished
            }
            if (!from.bytes) {
                p.failure = QStringLiteral("its results could not be received: ") + from.error;
            } else if (!(theirs = decodeTaskOutcomes(*from.bytes))) {
                p.failure = QStringLiteral("its results could not be decoded");
            }
            if (theirs) {
                p.heard = true;
                p.failure = theirs->failure;
                cancelled = cancelled || theirs->cancelled;
                const auto inShare = [&p](std::size_t task) {
                    return std::binary_search(p.share.begin(), p.share.end(), task);
                };
                const bool sameTasks =
                    std::all_of(theirs->finished.begin(), theirs->finished.end(),
                                [&](const TaskOutcome& o) {
                                    return inShare(o.task) && outcomeFits(*plan, o);
                                }) &&
                    std::all_of(theirs->journaled.begin(), theirs->journaled.end(), inShare);
                if (!sameTasks) {
                    p.failure = QStringLiteral(
                        "it compared other tensors than rank 0 gave it (did the traces change "
                        "during the check?)");
                    continue;
                }
                for (auto& outcome : theirs->finished) {
                    deliver(std::move(outcome));
                }
                p.owed = std::move(theirs->journaled);
            }
            // Not heard from: whatever its journal holds is still saved.
            const auto& wanted = p.heard ? p.owed : p.share;
            if (!start.folder.isEmpty() && !wanted.empty() && readJournals) {
                forEachOutcomeIn(
                    journalPath(start, process), start.fingerprint, [&](TaskOutcome&& outcome) {
                        if (std::binary_search(wanted.begin(), wanted.end(), outcome.task)) {
                            deliver(std::move(outcome));
                        }
                    });
            }
            std::erase_if(p.owed, [&](std::size_t task) { return delivered[task]; });
            request[static_cast<std::size_t>(process)] = p.owed;
        }
    }
    // Everyone hears whether anything is asked of them (usually nothing is), and what: the
    // first as a number, which every process receives alike, so that all or none of them
    // take part in the next step even where the request could not be decoded.
    QString requestProblem;
    const bool anyAsked =
        std::any_of(request.begin(), request.end(),
                    [](const std::vector<std::size_t>& tasks) { return !tasks.empty(); });
    const auto asking = group.size() > 1
                            ? group.broadcast(rank == 0 && anyAsked ? 1 : 0, &requestProblem)
                            : std::optional<std::int64_t>();
    const bool anyWanted = asking && *asking != 0;
    if (anyWanted) {
        const auto asked = group.broadcastBytes(rank == 0 ? encodeRequest(request) : QByteArray(),
                                                &requestProblem);
        const auto wanted = asked ? decodeRequest(*asked) : std::nullopt;
        // What rank 0 asks of this process, read back from its own journal.
        TaskOutcomes owed;
        const auto tasks = wanted && rank < static_cast<int>(wanted->size())
                               ? (*wanted)[static_cast<std::size_t>(rank)]
                               : std::vector<std::size_t>();
        if (rank != 0 && !tasks.empty() && started) {
            forEachOutcomeIn(journalPath(*started, rank), started->fingerprint,
                             [&](TaskOutcome&& outcome) {
                                 if (std::binary_search(tasks.begin(), tasks.end(), outcome.task)) {
                                     owed.finished.push_back(std::move(outcome));
                                 }
                             });
        }
        const auto sent = group.gatherToRoot(encodeTaskOutcomes(owed), {});
        for (int process = 1; rank == 0 && process < static_cast<int>(sent.size()); ++process) {
            const auto& from = sent[static_cast<std::size_t>(process)];
            auto theirs = from.bytes ? decodeTaskOutcomes(*from.bytes) : std::nullopt;
            auto& p = processes[static_cast<std::size_t>(process)];
            for (auto& outcome : theirs ? theirs->finished : std::vector<TaskOutcome>()) {
                if (std::binary_search(p.owed.begin(), p.owed.end(), outcome.task)) {
                    deliver(std::move(outcome));
                }
            }
        }
    }
    if (rank == 0 && options.progress) {
        options.progress(1.0);  // every process has finished
    }
    ComparisonEnd end;
    end.backendName = mine.backendName;
    if (rank != 0 || !plan || !started) {
        end.cancelled = mine.cancelled;
        return end;
    }
    if (cancelled) {
        end.cancelled = true;
        return end;
    }
    // Whatever a process sent, or failed to send, what it was given and did not reach rank 0
    // is unchecked.
    for (int process = 0; process < group.size(); ++process) {
        const auto& p = processes[static_cast<std::size_t>(process)];
        const QString stopped = processFailure(
            group, process,
            p.failure.isEmpty() ? QStringLiteral("it stopped before finishing them") : p.failure);
        const QString lost = processFailure(
            group, process,
            QStringLiteral("it finished them, but their results could neither be read from its "
                           "journal %1 nor received")
                .arg(journalPath(start, process)));
        for (const std::size_t task : p.share) {
            if (!delivered[task]) {
                const bool finished = std::binary_search(p.owed.begin(), p.owed.end(), task);
                end.unchecked.emplace_back(task, finished ? lost : stopped);
            }
        }
    }
    std::sort(end.unchecked.begin(), end.unchecked.end());
    if (!journalProblem.isEmpty()) {
        Diagnostic warning;
        warning.severity = Severity::Warning;
        warning.file = start.folder;
        warning.message =
            journalProblem + QStringLiteral(
                                 " (finished tensors are not persisted: a check killed "
                                 "outright would have to compare them again)");
        end.diagnostics.push_back(std::move(warning));
    }
    return end;
}

}  // namespace ttrace

#include "session/DistributedComparison.h"

#include <QtGlobal>
#include <algorithm>
#include <atomic>
#include <stdexcept>

#include "compare/TaskOutcomesCodec.h"
#include "compare/TaskPartition.h"

namespace ttrace {

namespace {

std::vector<std::vector<std::size_t>> partition(const ComparisonPlan& plan, int processes) {
    std::vector<std::int64_t> bytes;
    bytes.reserve(plan.tasks.size());
    for (const auto& task : plan.tasks) {
        bytes.push_back(plannedBytes(task));
    }
    return partitionTasks(bytes, processes);
}

// This process's share, compared; never throws (a failure is in the outcomes).
TaskOutcomes compareShare(const ComparisonPlan& plan, const TraceSet& distributed,
                          const std::vector<std::size_t>& share, ComparisonOptions options,
                          int rank) {
    bool ok = false;
    const int failing = qEnvironmentVariableIntValue(kFailProcessVariable, &ok);
    if (ok && failing == rank) {
        options.tensorFinished = [rank](std::size_t) {
            throw std::runtime_error("test hook " + std::string(kFailProcessVariable) + "=" +
                                     std::to_string(rank) + " stopped this process");
        };
    }
    try {
        return compareTasks(plan, share, distributed, options);
    } catch (const std::exception& e) {
        // Outside the workers (say, memory for the plan of blocks): nothing finished.
        TaskOutcomes outcomes;
        outcomes.failure = QString::fromLocal8Bit(e.what());
        return outcomes;
    }
}

// Whether every outcome a process sent is for a task of its share, about the same tensor as
// in rank 0's plan: a process whose traces changed under it would otherwise mix tensors up.
bool sameTensors(const ComparisonPlan& plan, const std::vector<std::size_t>& share,
                 const std::vector<TaskOutcome>& outcomes) {
    return std::all_of(outcomes.begin(), outcomes.end(), [&](const TaskOutcome& outcome) {
        if (!std::binary_search(share.begin(), share.end(), outcome.task)) {
            return false;
        }
        return outcome.result ? outcome.result->key == plan.tasks[outcome.task].distributed->key
                              : outcome.failure.has_value();
    });
}

// Why the tensors of `process` that it did not finish are unchecked.
QString processFailure(ProcessGroup& group, int process, const QString& what) {
    return QStringLiteral("process %1 of %2 failed: %3").arg(process).arg(group.size()).arg(what);
}

}  // namespace

ComparisonOutput compareAcrossProcesses(const ComparisonPlan* plan, const TraceSet* distributed,
                                        const ComparisonOptions& options,
                                        const QString& planProblem, ProcessGroup& group) {
    const int rank = group.rank();
    // Every process computes the same split; rank 0 also judges the others by it.
    const auto shares =
        plan ? partition(*plan, group.size()) : std::vector<std::vector<std::size_t>>();
    TaskOutcomes mine;
    if (plan && distributed) {
        mine = compareShare(*plan, *distributed, shares[static_cast<std::size_t>(rank)], options,
                            rank);
    } else {
        mine.failure = planProblem;
    }
    if (!mine.failure.isEmpty()) {
        mine.failure += QStringLiteral(" (on ") + group.processName() + QLatin1Char(')');
    }
    const QString backendName = mine.backendName;
    const auto received = group.gatherToRoot(encodeTaskOutcomes(mine));
    if (rank != 0 || !plan) {
        ComparisonOutput none;
        none.cancelled = mine.cancelled;
        return none;
    }

    // Whatever a process sent, or failed to send, what it was given and did not finish is
    // unchecked.
    std::vector<TaskOutcome> outcomes;
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
        output.cancelled = true;
        return output;
    }
    std::sort(unchecked.begin(), unchecked.end());
    return assembleComparison(*plan, std::move(outcomes), unchecked, backendName);
}

}  // namespace ttrace

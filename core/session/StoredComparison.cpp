#include "session/StoredComparison.h"

#include <algorithm>
#include <atomic>
#include <mutex>

#include "store/OutcomeJournal.h"

namespace ttrace {

namespace {

Diagnostic storeWarning(const QString& message) {
    Diagnostic d;
    d.severity = Severity::Warning;
    d.message = message;
    return d;
}

}  // namespace

ComparedRun compareIntoStore(const ComparisonPlan& plan, const ComparisonOptions& options,
                             const OutcomePersistence& persistence, ProcessGroup& group,
                             const ResultsDestination& destination) {
    ComparedRun run;
    std::unique_ptr<RunWriter> writer;
    if (destination.store && group.rank() == 0) {
        QString error;
        writer = destination.store->beginRun(destination.fingerprint, destination.description,
                                             destination.opening, &error);
        if (!writer) {
            run.warnings.push_back(storeWarning(error));
        }
    }
    // Failures, and every result when there is no writer (or it failed).
    std::vector<TaskOutcome> kept;
    std::vector<StoredResultDtype> storedDtypes;  // of the results the writer took
    std::mutex keptMutex;
    std::atomic<bool> writerFailed{false};
    const OutcomeSink sink = [&](TaskOutcome&& outcome) {
        if (writer && outcome.result && !writerFailed.load()) {
            if (writer->add(static_cast<std::int64_t>(plan.positions[outcome.task]),
                            *outcome.result)) {
                const std::lock_guard lock(keptMutex);
                storedDtypes.push_back({outcome.task, outcome.result->dtype});
                return;
            }
            writerFailed.store(true);
        }
        const std::lock_guard lock(keptMutex);
        kept.push_back(std::move(outcome));
    };
    const ComparisonEnd end =
        compareAcrossProcesses(&plan, options, QString(), persistence, group, sink);
    run.output.backendName = end.backendName;
    if (group.rank() != 0) {
        run.cancelled = end.cancelled;
        return run;
    }
    if (end.cancelled) {
        run.cancelled = true;  // the run stays incomplete; its journals let the next resume
        return run;
    }
    const auto assemble = [&](std::vector<TaskOutcome> outcomes,
                              const std::vector<std::pair<std::size_t, QString>>& unchecked,
                              const std::vector<StoredResultDtype>& stored = {}) {
        return assembleComparison(plan, std::move(outcomes), unchecked, end.backendName, stored);
    };
    // About the cache (a journal that could not be written), not the traces: never stored.
    run.warnings = end.diagnostics;
    if (!writer) {
        run.output = assemble(std::move(kept), end.unchecked);
        return run;
    }

    // Everything but the results (`kept` holds failures only), then the results read back.
    if (!writerFailed.load()) {
        ComparisonOutput rest = assemble(kept, end.unchecked, storedDtypes);
        if (writer->finish(rest)) {
            auto loaded = destination.store->load(destination.fingerprint, destination.loading,
                                                  StoredRuns::IncompleteToo);
            auto details =
                destination.loading == DetailLoading::OnDemand
                    ? destination.store->details(destination.fingerprint, StoredRuns::IncompleteToo)
                    : nullptr;
            if (loaded && (details || destination.loading == DetailLoading::WithResults)) {
                loaded->unchecked = std::move(rest.unchecked);
                run.output = std::move(*loaded);
                run.details = std::move(details);
                run.stored = true;
                return run;
            }
        }
    }

    // The store failed partway: the results it was given are read back from what it had
    // committed and what the failure rolled back, then from the journals for anything still
    // missing, and the run is reported from memory.
    const QString why = writer->error().isEmpty()
                            ? QStringLiteral("the results store could not read back the results")
                            : writer->error();
    run.warnings.push_back(storeWarning(why));
    std::vector<bool> have(plan.tasks.size(), false);
    for (const auto& outcome : kept) {
        have[outcome.task] = true;
    }
    const auto keep = [&](TensorResult&& result) {
        const auto task = std::lower_bound(
            plan.tasks.begin(), plan.tasks.end(), result.key,
            [](const PlannedTask& planned, const TensorKey& key) { return planned.key < key; });
        const auto index = static_cast<std::size_t>(task - plan.tasks.begin());
        if (task != plan.tasks.end() && task->key == result.key && !have[index]) {
            have[index] = true;
            kept.push_back(TaskOutcome{index, std::move(result), {}});
        }
    };
    for (auto& [position, result] : writer->takeUnstored()) {
        keep(std::move(result));
    }
    writer.reset();
    if (auto committed = destination.store->load(
            destination.fingerprint, DetailLoading::WithResults, StoredRuns::IncompleteToo)) {
        for (auto& result : committed->results) {
            keep(std::move(result));
        }
    }
    if (!persistence.folder.isEmpty() && std::find(have.begin(), have.end(), false) != have.end()) {
        forEachJournaledOutcome(persistence.folder, persistence.fingerprint,
                                [&](TaskOutcome&& outcome) {
                                    if (outcomeFits(plan, outcome) && !have[outcome.task]) {
                                        have[outcome.task] = true;
                                        kept.push_back(std::move(outcome));
                                    }
                                });
    }
    auto unchecked = end.unchecked;
    for (const auto& [task, reason] : end.unchecked) {
        have[task] = true;
    }
    for (std::size_t task = 0; task < plan.tasks.size(); ++task) {
        if (!have[task]) {
            unchecked.emplace_back(task, QStringLiteral("its result could not be stored: ") + why);
        }
    }
    std::sort(unchecked.begin(), unchecked.end());
    run.output = assemble(std::move(kept), unchecked);
    return run;
}

}  // namespace ttrace

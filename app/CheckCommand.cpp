#include "CheckCommand.h"

#include <QCommandLineParser>
#include <algorithm>
#include <map>
#include <optional>

#include "BackendOffer.h"
#include "TerminalProgress.h"
#include "compare/FaultDescription.h"
#include "report/ReportText.h"
#include "report/ReportWriters.h"
#include "session/CheckSession.h"
#include "trace/TraceFolderGuard.h"

namespace ttrace {

namespace {

QString number(double value) {
    return QString::number(value, 'g', 3);
}

QString describeResult(const TensorResult& result) {
    return QStringLiteral("%1  normalized error %2 (relative error %3, threshold %4 by %5)")
        .arg(result.key.toString(), number(result.normalizedError), number(result.judgedError()),
             number(result.threshold.value), thresholdMethodName(result.threshold.method));
}

void printSummary(const CheckReport& report, QTextStream& out) {
    const auto& results = report.comparison.results;
    const auto& loc = report.localization;
    if (loc.bugFound()) {
        out << QStringLiteral("ttrace-check: BUG FOUND: %1 of %2 tensors above tolerance\n")
                   .arg(loc.faultyCount)
                   .arg(results.size());
        out << QStringLiteral("  first faulty tensor: ")
            << describeResult(results[*loc.firstFaulty]) << QLatin1Char('\n');
        if (loc.rootCause) {
            out << QStringLiteral("  root-cause module:   ") << loc.rootCause->module
                << QStringLiteral(" (") << loc.rootCause->reason << QStringLiteral(")\n");
        }
        if (loc.faultyShard && loc.faultyShard->standsOut) {
            const auto& shard = results[loc.faultyShard->result].shards[loc.faultyShard->shard];
            out << QStringLiteral("  faulty shard:        %1, global range %2 (%3)\n")
                       .arg(formatRanks(loc.faultyShard->ranks), shard.ranges.toString(),
                            loc.faultyShard->reason);
        } else if (loc.faultyShard) {
            out << QStringLiteral("  faulty shard:        ") << loc.faultyShard->reason
                << QLatin1Char('\n');
        }
        out << QStringLiteral("  coverage:            ")
            << report.comparison.coverage.describe(report.comparedCount()) << QLatin1Char('\n');
        // Ranks that first fail on the same tensor share a line: thousands of ranks do.
        std::map<std::size_t, std::vector<int>> ranksByResult;
        for (const auto& first : loc.perRank) {
            ranksByResult[first.result].push_back(first.rank);
        }
        for (const auto& [result, ranks] : ranksByResult) {
            out << QStringLiteral("  first fault on %1: %2\n")
                       .arg(formatRanks(ranks), results[result].key.toString());
        }
    } else {
        const auto worst = std::max_element(results.begin(), results.end(),
                                            [](const TensorResult& a, const TensorResult& b) {
                                                return a.normalizedError < b.normalizedError;
                                            });
        const QString coverage = report.comparison.coverage.describe(report.comparedCount());
        if (report.verdict() == Verdict::NoBug) {
            out << QStringLiteral("ttrace-check: no bug: %1, all within tolerance\n").arg(coverage);
        } else if (report.verdict() == Verdict::NothingCompared) {
            out << QStringLiteral("ttrace-check: nothing compared: %1\n").arg(coverage);
        } else {
            // Never a plain "no bug" for a check that did not look at everything.
            out << QStringLiteral("ttrace-check: no bug in what was compared: %1\n").arg(coverage);
        }
        if (worst != results.end()) {
            out << QStringLiteral("  largest normalized error: ") << describeResult(*worst)
                << QLatin1Char('\n');
        }
    }
    if (!results.empty()) {
        const auto thresholds = report_text::thresholdRow(report);
        out << QStringLiteral("  thresholds:          ") << thresholds.value;
        if (!thresholds.detail.isEmpty()) {
            out << QStringLiteral(" (") << thresholds.detail << QLatin1Char(')');
        }
        out << QLatin1Char('\n');
        if (const auto quantized = report_text::quantizedRow(report)) {
            out << QStringLiteral("  quantized tensors:   ") << quantized->value
                << QStringLiteral(" (") << quantized->detail << QStringLiteral(")\n");
        }
    }
    out << QStringLiteral("  ") << report_text::comparisonLine(report) << QLatin1Char('\n');
}

void printDiagnostics(const Diagnostics& diagnostics, QTextStream& err) {
    // Errors first: they explain a bad-input exit code. Notes last: what the check took into
    // account (a factor common to the gradients).
    for (const Severity severity : {Severity::Error, Severity::Warning, Severity::Info}) {
        for (const auto& d : diagnostics) {
            if (d.severity == severity) {
                err << d.toString() << QLatin1Char('\n');
                if (!d.details.isEmpty()) {
                    err << QStringLiteral("  libhdf5: ") << d.details << QLatin1Char('\n');
                }
            }
        }
    }
}

bool writeReports(const CheckCommandOptions& options, const CheckReport& report, QTextStream& out,
                  QTextStream& err) {
    bool ok = true;
    // A report is only laid out when asked for, the JSON one tensor at a time.
    auto write = [&](const QString& path, const std::function<bool(QIODevice&)>& layOut) {
        if (path.isEmpty()) {
            return;
        }
        QString error;
        if (writeReportFile(path, layOut, &error)) {
            if (!options.quiet) {
                out << QStringLiteral("  report written: ") << path << QLatin1Char('\n');
            }
        } else {
            err << QStringLiteral("ttrace-check: ") << error << QLatin1Char('\n');
            ok = false;
        }
    };
    const auto whole = [](const QByteArray& contents, QIODevice& file) {
        return file.write(contents) == contents.size();
    };
    write(options.jsonPath, [&](QIODevice& file) { return writeJsonReport(report, file); });
    write(options.markdownPath,
          [&](QIODevice& file) { return whole(reportToMarkdown(report).toUtf8(), file); });
    write(options.htmlPath,
          [&](QIODevice& file) { return whole(reportToHtml(report).toUtf8(), file); });
    return ok;
}

}  // namespace

ParsedCommand parseCheckCommand(const QStringList& args) {
    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral(
        "Compares a distributed training trace with a trusted reference run (on one device or "
        "on several ranks in any layout) and says "
        "whether, and where, they differ beyond floating-point round-off.\n\n"
        "Under mpirun or srun, the same command splits the tensors over the processes and "
        "rank 0 writes the reports (docs/checker.md).\n\n"
        "Exit codes: 0 no bug, 1 bug found, 2 bad input or usage, 3 incomplete (a process "
        "failed), 4 no bug in the tensors compared but not everything was checked (tensors "
        "not captured, not in the reference, or blind: a threshold of 1 or more), 130 "
        "interrupted."));
    parser.addPositionalArgument(QStringLiteral("DIST"),
                                 QStringLiteral("Trace folder of the distributed run."));
    parser.addPositionalArgument(QStringLiteral("REF"),
                                 QStringLiteral("Trace folder of the reference: the trusted run, "
                                                "on one device or on several ranks."));
    const QCommandLineOption perturbed(
        QStringLiteral("perturbed"),
        QStringLiteral("Trace folder of the perturbed reference (sets the thresholds)."),
        QStringLiteral("DIR"));
    const QCommandLineOption json(QStringLiteral("json"), QStringLiteral("Write a JSON report."),
                                  QStringLiteral("FILE"));
    const QCommandLineOption markdown(
        QStringLiteral("md"), QStringLiteral("Write a Markdown report."), QStringLiteral("FILE"));
    const QCommandLineOption html(QStringLiteral("html"),
                                  QStringLiteral("Write a self-contained HTML report."),
                                  QStringLiteral("FILE"));
    const QCommandLineOption config(QStringLiteral("config"),
                                    QStringLiteral("Threshold configuration (docs/thresholds.md)."),
                                    QStringLiteral("FILE"));
    const QCommandLineOption cacheDir(
        QStringLiteral("cache-dir"),
        QStringLiteral("Where the SQLite index and results cache live (default: "
                       "$TTRACE_CACHE_DIR or ~/.cache/ttrace; never a trace folder)."),
        QStringLiteral("DIR"));
    const QCommandLineOption noCache(QStringLiteral("no-cache"),
                                     QStringLiteral("Neither read nor write the cache."));
    const QCommandLineOption threads(QStringLiteral("threads"),
                                     QStringLiteral("Worker threads (default: one per core)."),
                                     QStringLiteral("N"));
    const QCommandLineOption chunk(
        QStringLiteral("chunk-elements"),
        QStringLiteral("Elements per streamed block; memory is bounded by threads x chunk."),
        QStringLiteral("N"));
    const QCommandLineOption backend(
        QStringLiteral("backend"),
        QStringLiteral("Where the comparison runs: auto (CUDA where a usable GPU exists, else "
                       "the CPU; the default), cpu, or cuda (exit 2 with the reason when no GPU "
                       "can be used)."),
        QStringLiteral("auto|cpu|cuda"), QStringLiteral("auto"));
    const QCommandLineOption quiet(QStringLiteral("quiet"),
                                   QStringLiteral("No progress bar and no summary."));
    parser.addOptions({perturbed, json, markdown, html, config, cacheDir, noCache, threads, chunk,
                       backend, quiet});
    const QCommandLineOption help = parser.addHelpOption();
    const QCommandLineOption version = parser.addVersionOption();

    ParsedCommand parsed;
    if (!parser.parse(args)) {
        parsed.action = ParsedCommand::Action::UsageError;
        parsed.text = parser.errorText() + QLatin1Char('\n') + parser.helpText();
        return parsed;
    }
    if (parser.isSet(help) || parser.isSet(version)) {
        parsed.action = ParsedCommand::Action::PrintAndExit;
        parsed.text = parser.isSet(help) ? parser.helpText()
                                         : QStringLiteral("ttrace-check ") +
                                               QStringLiteral(TTRACE_VERSION) + QLatin1Char('\n');
        return parsed;
    }
    const QStringList positional = parser.positionalArguments();
    if (positional.size() != 2) {
        parsed.action = ParsedCommand::Action::UsageError;
        parsed.text = QStringLiteral("expected two trace folders, DIST and REF, got %1\n")
                          .arg(positional.size()) +
                      parser.helpText();
        return parsed;
    }
    auto positiveNumber = [&](const QCommandLineOption& option, qint64 fallback,
                              qint64 minimum) -> std::optional<qint64> {
        if (!parser.isSet(option)) {
            return fallback;
        }
        bool ok = false;
        const qint64 value = parser.value(option).toLongLong(&ok);
        if (!ok || value < minimum) {
            return std::nullopt;
        }
        return value;
    };
    const auto threadCount = positiveNumber(threads, 0, 1);
    const auto chunkElements = positiveNumber(chunk, kDefaultChunkElements, 1);
    if (!threadCount || !chunkElements) {
        parsed.action = ParsedCommand::Action::UsageError;
        parsed.text = QStringLiteral("--threads and --chunk-elements take a positive integer\n");
        return parsed;
    }
    const auto backendKind = backendKindFromName(parser.value(backend));
    if (!backendKind) {
        parsed.action = ParsedCommand::Action::UsageError;
        parsed.text = QStringLiteral("--backend takes auto, cpu or cuda, not \"%1\"\n")
                          .arg(parser.value(backend));
        return parsed;
    }
    // Trace folders are only ever read: a report path inside one is refused up front.
    const QStringList traceFolders{positional[0], positional[1], parser.value(perturbed)};
    for (const QCommandLineOption* option : {&json, &markdown, &html}) {
        for (const QString& folder : traceFolders) {
            if (parser.isSet(*option) && isInsideFolder(parser.value(*option), folder)) {
                parsed.action = ParsedCommand::Action::UsageError;
                parsed.text = QStringLiteral(
                                  "--%1 %2 is inside the trace folder %3; trace "
                                  "folders are never written to\n")
                                  .arg(option->names().constFirst(), parser.value(*option), folder);
                return parsed;
            }
        }
    }
    auto& o = parsed.options;
    o.distributed = positional[0];
    o.reference = positional[1];
    o.perturbed = parser.value(perturbed);
    o.config = parser.value(config);
    o.jsonPath = parser.value(json);
    o.markdownPath = parser.value(markdown);
    o.htmlPath = parser.value(html);
    o.cacheDir = parser.value(cacheDir);
    o.useCache = !parser.isSet(noCache);
    o.quiet = parser.isSet(quiet);
    o.threads = static_cast<int>(*threadCount);
    o.chunkElements = *chunkElements;
    o.backend = *backendKind;
    return parsed;
}

namespace {

int exitCodeOf(const CheckCommandOptions& options, const CheckOutcome& outcome, QTextStream& out,
               QTextStream& err, TerminalProgress& progress) {
    progress.finish();
    if (outcome.cancelled) {
        err << QStringLiteral("ttrace-check: interrupted; nothing was written\n");
        return kExitInterrupted;
    }
    const CheckReport& report = outcome.report;
    printDiagnostics(report.diagnostics, err);
    if (!options.quiet && outcome.compared) {
        printSummary(report, out);
    }
    // Reports are written even when the inputs were unusable: the diagnostics are the result.
    const bool written = writeReports(options, report, out, err);
    if (!outcome.compared) {
        err << QStringLiteral(
            "ttrace-check: the traces could not be compared (see the errors above)\n");
        return kExitBadInput;
    }
    if (!report.comparison.unchecked.empty()) {
        err << QStringLiteral(
                   "ttrace-check: INCOMPLETE: %1 tensors were not checked (see the "
                   "errors above); the results of the others are kept\n")
                   .arg(report.comparison.unchecked.size());
        return kExitIncomplete;
    }
    switch (report.verdict()) {
        case Verdict::BugFound:
            return kExitBugFound;
        case Verdict::NoBug:
            return written ? kExitNoBug : kExitBadInput;
        case Verdict::NoBugInPart:
        case Verdict::NothingCompared:
            // Errors explain what was not compared; without any, the runs hold different
            // tensors (not captured, or not in the reference).
            return hasErrors(report.diagnostics) || !written ? kExitBadInput : kExitPartialCoverage;
    }
    return kExitBadInput;
}

}  // namespace

int runCheckCommand(const CheckCommandOptions& options, QTextStream& out, QTextStream& err,
                    bool showProgress, const std::atomic<bool>* cancel, ProcessGroup* processes) {
    const bool root = !processes || processes->rank() == 0;
    // Before anything is opened: a GPU asked for and missing is a usage problem. Each process
    // of an MPI job chooses for its own machine.
    const BackendChoice backend = chooseBackend(options.backend, cudaProbe());
    if (!backend.backend) {
        err << QStringLiteral("ttrace-check: --backend %1: %2\n")
                   .arg(backendKindName(options.backend), backend.error);
        return kExitBadInput;
    }
    TerminalProgress progress(err);
    CheckRequest request;
    request.backend = backend.backend;
    request.distributed = options.distributed;
    request.reference = options.reference;
    request.perturbed = options.perturbed;
    request.configPath = options.config;
    request.cacheDir = options.cacheDir;
    request.useCache = options.useCache;
    request.threads = options.threads;
    request.chunkElements = options.chunkElements;
    // A stored run's shards are read one tensor at a time, as the JSON report is written.
    request.detailsOnDemand = true;
    request.cancel = cancel;
    request.processes = processes;
    if (showProgress && !options.quiet && root) {
        request.progress = [&progress](CheckStage stage, double fraction) {
            progress.update(stage, fraction);
        };
    }
    // Said even with --quiet: it tells that an earlier run died, and why this one is quicker.
    request.resuming = [&progress, &err](std::size_t reused, std::size_t total) {
        progress.finish();
        err << QStringLiteral(
                   "ttrace-check: resuming: %1 of %2 tensors already compared in a previous run\n")
                   .arg(reused)
                   .arg(total);
        err.flush();
    };
    const CheckOutcome outcome = runCheck(request);
    const int code = outcome.root ? exitCodeOf(options, outcome, out, err, progress) : kExitNoBug;
    if (!processes || processes->size() == 1) {
        return code;
    }
    QString error;
    const auto rootCode = processes->broadcast(code, &error);
    if (!rootCode) {
        err << QStringLiteral("ttrace-check: process %1: %2\n").arg(processes->rank()).arg(error);
        return kExitIncomplete;
    }
    return static_cast<int>(*rootCode);
}

}  // namespace ttrace

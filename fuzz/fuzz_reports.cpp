// libFuzzer: a realistic report (tests/ReportTestData.h) whose tensor names, module names,
// paths and messages are the fuzzer's strings: hostile names must leave every report well
// formed. The JSON parses; the HTML holds exactly as many '<' as when each '<' of the names is
// replaced by '‹' (so no name adds markup); the Markdown holds as many lines as when each line
// break of the names is replaced by '↵' (so no name ends a table row).
#include <fuzzer/FuzzedDataProvider.h>

#include <QJsonDocument>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "ReportTestData.h"
#include "report/ReportWriters.h"

namespace {

constexpr QChar kAngle(0x2039);      // '‹', what '<' becomes in the harmless twin
constexpr QChar kLineBreak(0x21B5);  // '↵', what '\n' becomes

struct Strings {
    QStringList names;  // one per result, as many as the input gives
    QString folder, config, file, dataset, tensor, message, module, reason;
};

Strings take(FuzzedDataProvider& input) {
    const auto next = [&input] {
        QString text = QString::fromStdString(input.ConsumeRandomLengthString(64));
        return text.remove(kAngle).remove(kLineBreak);  // the twin's characters stay the twin's
    };
    Strings s;
    for (int i = 0; i < 24 && input.remaining_bytes() > 0; ++i) {
        s.names << next();
    }
    for (QString* field :
         {&s.folder, &s.config, &s.file, &s.dataset, &s.tensor, &s.message, &s.module, &s.reason}) {
        *field = next();
    }
    return s;
}

// The same strings with every '<' and line break replaced: what a report that escapes them
// must look like, markup and lines counted.
Strings harmlessTwin(Strings s) {
    const auto defuse = [](QString& text) {
        text.replace(QLatin1Char('<'), kAngle).replace(QLatin1Char('\n'), kLineBreak);
    };
    for (auto& name : s.names) {
        defuse(name);
    }
    for (QString* field :
         {&s.folder, &s.config, &s.file, &s.dataset, &s.tensor, &s.message, &s.module, &s.reason}) {
        defuse(*field);
    }
    return s;
}

ttrace::CheckReport reportWith(bool bug, const Strings& s) {
    ttrace::CheckReport report = ttrace::test::makeReport(bug);
    auto& results = report.comparison.results;
    for (qsizetype i = 0; i < s.names.size() && static_cast<std::size_t>(i) < results.size(); ++i) {
        results[static_cast<std::size_t>(i)].key.name = s.names[i];
    }
    report.distributed.folder = s.folder;
    report.configPath = s.config;
    ttrace::Diagnostic hostile;
    hostile.file = s.file;
    hostile.dataset = s.dataset;
    hostile.tensor = s.tensor;
    hostile.message = s.message;
    report.diagnostics.push_back(hostile);
    if (report.localization.rootCause) {
        report.localization.rootCause->module = s.module;
        report.localization.rootCause->reason = s.reason;
    }
    return report;
}

[[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "fuzz_reports: %s\n", what);
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    FuzzedDataProvider input(data, size);
    const bool bug = input.ConsumeBool();
    const Strings hostile = take(input);
    const ttrace::CheckReport report = reportWith(bug, hostile);
    const ttrace::CheckReport twin = reportWith(bug, harmlessTwin(hostile));

    QJsonParseError error;
    if (QJsonDocument::fromJson(ttrace::reportToJson(report), &error).isNull()) {
        fail("the JSON report does not parse");
    }
    if (ttrace::reportToHtml(report).count(QLatin1Char('<')) !=
        ttrace::reportToHtml(twin).count(QLatin1Char('<'))) {
        fail("a '<' of a name reached the HTML report unescaped");
    }
    if (ttrace::reportToMarkdown(report).count(QLatin1Char('\n')) !=
        ttrace::reportToMarkdown(twin).count(QLatin1Char('\n'))) {
        fail("a line break of a name reached the Markdown report");
    }
    return 0;
}

#pragma once

#include <QByteArray>

#include "compare/ComparisonJob.h"
#include "compare/Localization.h"
#include "report/ReportWriters.h"

namespace ttrace::test {

// Everything a report says about a comparison, as bytes: equal bytes, equal results.
inline QByteArray comparisonBytes(const ComparisonOutput& output) {
    CheckReport report;
    report.comparison = output;
    report.localization = localize(output.results);
    report.diagnostics = output.diagnostics;
    return reportToJson(report);
}

}  // namespace ttrace::test

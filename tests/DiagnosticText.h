#pragma once

#include <QStringList>
#include <algorithm>

#include "trace/Diagnostic.h"

namespace ttrace::test {

// Every diagnostic on one line with its dataset and tensor, so that two lists of problems
// compare as lists of readable lines.
inline QStringList diagnosticTexts(const Diagnostics& diagnostics) {
    QStringList texts;
    for (const auto& d : diagnostics) {
        texts << d.toString() + QStringLiteral(" | dataset=") + d.dataset +
                     QStringLiteral(" | tensor=") + d.tensor;
    }
    return texts;
}

// Whether `diagnostics` hold an error on `dataset` of rank 0's file whose message starts with
// `message`: what the indexer says of a dataset it leaves out.
inline bool hasRankZeroError(const Diagnostics& diagnostics, const QString& dataset,
                             const QString& message) {
    return std::any_of(diagnostics.begin(), diagnostics.end(), [&](const Diagnostic& d) {
        return d.severity == Severity::Error && d.dataset == dataset &&
               d.file.endsWith(QStringLiteral("rank00000.h5")) && d.message.startsWith(message);
    });
}

}  // namespace ttrace::test

#pragma once

#include <QStringList>

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

}  // namespace ttrace::test

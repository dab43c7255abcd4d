#include "trace/Diagnostic.h"

#include <algorithm>

namespace ttrace {

Diagnostic fileDiagnostic(Severity severity, const QString& file, const QString& message) {
    Diagnostic d;
    d.severity = severity;
    d.file = file;
    d.message = message;
    return d;
}

QString severityName(Severity severity) {
    switch (severity) {
        case Severity::Info:
            return QStringLiteral("info");
        case Severity::Warning:
            return QStringLiteral("warning");
        case Severity::Error:
            return QStringLiteral("error");
    }
    return {};
}

QString Diagnostic::toString() const {
    QString text = severityName(severity) + QStringLiteral(": ");
    if (!file.isEmpty()) {
        text += file;
        if (!dataset.isEmpty()) {
            text += QLatin1Char(':') + dataset;
        }
        text += QStringLiteral(": ");
    }
    if (!tensor.isEmpty()) {
        text += QStringLiteral("tensor ") + tensor + QStringLiteral(": ");
    }
    return text + message;
}

bool hasErrors(const Diagnostics& diagnostics) {
    return std::any_of(diagnostics.begin(), diagnostics.end(),
                       [](const Diagnostic& d) { return d.severity == Severity::Error; });
}

}  // namespace ttrace

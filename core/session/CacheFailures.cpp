#include "session/CacheFailures.h"

#include "store/DiskProblem.h"

namespace ttrace {

void CacheFailures::add(const QString& failure) {
    if (!failures.contains(failure)) {
        failures << failure;
    }
}

std::optional<Diagnostic> CacheFailures::warning(const CacheLocation& cache) const {
    if (failures.isEmpty()) {
        return std::nullopt;
    }
    const QString cause = cache.problem.isEmpty() ? diskProblem(cache.path) : cache.problem;
    QString message = cause.isEmpty() ? QStringLiteral("the cache could not be written")
                                      : QStringLiteral("the cache cannot be written: ") + cause;
    message += resultsKept ? QStringLiteral("; the results of this check are kept all the same")
                           : QStringLiteral(
                                 "; the results of this check are not kept (the next "
                                 "check of these traces compares them again)");
    message += QStringLiteral(" (") + failures.join(QStringLiteral("; ")) + QLatin1Char(')');
    return fileDiagnostic(Severity::Warning, cache.path, message);
}

}  // namespace ttrace

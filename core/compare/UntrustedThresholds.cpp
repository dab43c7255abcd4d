#include "compare/UntrustedThresholds.h"

#include <QStringList>
#include <algorithm>
#include <cmath>
#include <functional>

namespace ttrace {

namespace {

constexpr int kNamed = 3;  // tensors named in a warning before "and N more"

QString number(double value) {
    return QString::number(value, 'g', 3);
}

QString tensorCount(std::size_t n) {
    return n == 1 ? QStringLiteral("1 tensor") : QStringLiteral("%1 tensors").arg(n);
}

// "a (...), b (...), c (...) and 4 more"
QString nameFirst(const std::vector<const TensorResult*>& tensors,
                  const std::function<QString(const TensorResult&)>& numbers) {
    QStringList named;
    for (std::size_t i = 0; i < tensors.size() && i < kNamed; ++i) {
        named << QStringLiteral("%1 (%2)").arg(tensors[i]->key.toString(), numbers(*tensors[i]));
    }
    QString text = named.join(QStringLiteral(", "));
    if (tensors.size() > kNamed) {
        text += QStringLiteral(" and %1 more").arg(tensors.size() - kNamed);
    }
    return text;
}

QString perturbationNumbers(const TensorResult& r) {
    return QStringLiteral("e_pert %1, theoretical threshold %2")
        .arg(number(*r.threshold.perturbationError), number(r.threshold.theoretical));
}

QString blindNumbers(const TensorResult& r) {
    return QStringLiteral("threshold %1, %2")
        .arg(number(r.threshold.value), thresholdMethodName(r.threshold.method));
}

}  // namespace

std::int64_t countBlind(const std::vector<TensorResult>& results) {
    return std::count_if(results.begin(), results.end(),
                         [](const TensorResult& r) { return r.threshold.blind(); });
}

void warnUntrustedThresholds(const std::vector<TensorResult>& results,
                             const PerturbedReferenceInfo& perturbed,
                             const QString& distributedFolder, Diagnostics& diagnostics) {
    std::vector<const TensorResult*> damaged, beyondDeclared, blind;
    for (const TensorResult& r : results) {
        if (r.threshold.perturbationRejected()) {
            const double e = *r.threshold.perturbationError;
            // Small and finite, yet rejected: beyond what the declared perturbation gives.
            (std::isfinite(e) && e >= 0 && e < Threshold::kFirstOrderLimit ? beyondDeclared
                                                                           : damaged)
                .push_back(&r);
        }
        if (r.threshold.blind()) {
            blind.push_back(&r);
        }
    }
    if (!damaged.empty()) {
        diagnostics.push_back(fileDiagnostic(
            Severity::Warning, perturbed.folder,
            QStringLiteral(
                "the perturbed reference moved %1 by its own size or more, or to NaN or "
                "Inf: %2. Damaged there, or a discontinuous operation (a sign, a top-k) took "
                "another branch than in the reference: either way no round-off threshold "
                "follows, and they are judged by the theoretical threshold")
                .arg(tensorCount(damaged.size()), nameFirst(damaged, perturbationNumbers))));
    }
    if (!beyondDeclared.empty() && perturbed.declaredPerturbation) {
        const auto numbers = [&](const TensorResult& r) {
            return QStringLiteral("e_pert %1, at most %2")
                .arg(number(*r.threshold.perturbationError),
                     number(declaredPerturbationBound(r.key, r.dtype, perturbed.computeDtype,
                                                      perturbed.declaredPerturbation)
                                .value_or(0.0)));
        };
        diagnostics.push_back(fileDiagnostic(
            Severity::Warning, perturbed.folder,
            QStringLiteral(
                "the perturbed reference's first-iteration parameters differ from the "
                "reference's by more than its declared perturbation (perturbation.relative %1) "
                "can make them, in %2: %3. The perturbation applied is not the one declared "
                "(applied twice or with another size, or other initial weights), so every "
                "threshold it sets is suspect; these are judged by the theoretical threshold")
                .arg(number(*perturbed.declaredPerturbation), tensorCount(beyondDeclared.size()),
                     nameFirst(beyondDeclared, numbers))));
    }
    if (!blind.empty()) {
        diagnostics.push_back(fileDiagnostic(
            Severity::Warning, distributedFolder,
            QStringLiteral(
                "%1 not effectively checked: a threshold of 1 or more cannot tell the tensor "
                "from a tensor of zeros, so no bug that leaves it smaller shows: %2")
                .arg(tensorCount(blind.size()), nameFirst(blind, blindNumbers))));
    }
}

}  // namespace ttrace

#include "compare/TensorPairing.h"

#include <QStringList>
#include <algorithm>

#include "trace/ShapeText.h"

namespace ttrace {

namespace {

Diagnostic tensorDiagnostic(Severity severity, const QString& file, const TensorKey& key,
                            const QString& message) {
    Diagnostic diagnostic;
    diagnostic.severity = severity;
    diagnostic.file = file;
    diagnostic.tensor = key.toString();
    diagnostic.message = message;
    return diagnostic;
}

// `counterpart` when it has the tensor's global shape, else null and why.
const TrustedTensor* sameShape(const CatalogTensor& tensor, const TrustedTensor& counterpart,
                               const QString& what, const QString& folder, Diagnostics& diagnostics,
                               Severity severity) {
    if (counterpart.globalShape != tensor.globalShape) {
        diagnostics.push_back(tensorDiagnostic(
            severity, folder, tensor.key,
            QStringLiteral("global shape %1 in the distributed run but %2 in the %3")
                .arg(formatShape(tensor.globalShape), formatShape(counterpart.globalShape), what)));
        return nullptr;
    }
    return &counterpart;
}

}  // namespace

std::vector<PlannedTask> pairTensors(const std::vector<CatalogTensor>& distributed,
                                     const TrustedRun& reference, const TrustedRun* perturbed,
                                     Diagnostics& diagnostics) {
    const QString referenceName = QStringLiteral("reference");
    const QString perturbedName = QStringLiteral("perturbed reference");
    std::vector<PlannedTask> tasks;
    QStringList notPerturbed;  // said in one warning below
    for (const auto& tensor : distributed) {
        const auto* ref = reference.find(tensor.key);
        if (!ref) {
            continue;  // measureCoverage says which, grouped
        }
        PlannedTask task;
        task.key = tensor.key;
        task.globalShape = tensor.globalShape;
        task.reference = sameShape(tensor, *ref, referenceName, reference.catalog->folder(),
                                   diagnostics, Severity::Error);
        if (!task.reference) {
            continue;
        }
        if (perturbed) {
            const auto* pert = perturbed->find(tensor.key);
            if (!pert) {
                notPerturbed << tensor.key.toString();
            } else {
                task.perturbed =
                    sameShape(tensor, *pert, perturbedName, perturbed->catalog->folder(),
                              diagnostics, Severity::Warning);
            }
        }
        task.bytes = tensor.storedBytes + task.reference->storedBytes +
                     (task.perturbed ? task.perturbed->storedBytes : 0);
        tasks.push_back(std::move(task));
    }
    if (!notPerturbed.isEmpty()) {
        // One line however many: a perturbed reference of another capture lacks them all.
        constexpr qsizetype kNamed = 3;
        Diagnostic d;
        d.severity = Severity::Warning;
        d.file = perturbed->catalog->folder();
        if (notPerturbed.size() == 1) {
            d.tensor = notPerturbed.front();
            d.message = QStringLiteral(
                "not in the perturbed reference; its threshold is the "
                "theoretical one");
        } else {
            d.message =
                QStringLiteral(
                    "%1 tensors are not in the perturbed reference; their "
                    "thresholds are the theoretical ones: %2%3")
                    .arg(QString::number(notPerturbed.size()),
                         notPerturbed.mid(0, kNamed).join(QStringLiteral(", ")),
                         notPerturbed.size() > kNamed
                             ? QStringLiteral(" and %1 more").arg(notPerturbed.size() - kNamed)
                             : QString());
        }
        diagnostics.push_back(std::move(d));
    }
    return tasks;
}

}  // namespace ttrace

#include "DiagnosticsModel.h"

#include <QColor>

#include "report/ReportText.h"

namespace ttrace {

void DiagnosticsModel::setDiagnostics(Diagnostics diagnostics) {
    beginResetModel();
    diagnostics_ = std::move(diagnostics);
    endResetModel();
}

int DiagnosticsModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(diagnostics_.size());
}

int DiagnosticsModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant DiagnosticsModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) {
        return {};
    }
    const Diagnostic& d = diagnostics_[static_cast<std::size_t>(index.row())];
    switch (role) {
        case Qt::DisplayRole:
            switch (index.column()) {
                case SeverityColumn:
                    return severityName(d.severity);
                case LocationColumn:
                    return report_text::diagnosticLocation(d);
                case TensorColumn:
                    return d.tensor;
                case MessageColumn:
                    return d.message;
                default:
                    return {};
            }
        case Qt::ToolTipRole:
            // libhdf5's own words, for whoever repairs the file, only here.
            return d.details.isEmpty() ? d.toString()
                                       : d.toString() + QStringLiteral("\nlibhdf5: ") + d.details;
        case Qt::ForegroundRole:
            if (index.column() == SeverityColumn && d.severity == Severity::Error) {
                return QColor(0xb2, 0x18, 0x2b);
            }
            return {};
        default:
            return {};
    }
}

QVariant DiagnosticsModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) {
        return {};
    }
    switch (section) {
        case SeverityColumn:
            return QStringLiteral("Severity");
        case LocationColumn:
            return QStringLiteral("File / dataset");
        case TensorColumn:
            return QStringLiteral("Tensor");
        case MessageColumn:
            return QStringLiteral("Message");
        default:
            return {};
    }
}

}  // namespace ttrace

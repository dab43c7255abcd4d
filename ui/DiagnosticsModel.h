#pragma once

#include <QAbstractTableModel>

#include "trace/Diagnostic.h"

namespace ttrace {

// Diagnostics of a check as a table (severity, location, tensor, message), in the order
// given (the overview passes them errors first).
class DiagnosticsModel : public QAbstractTableModel {
    Q_OBJECT

public:
    enum Column { SeverityColumn, LocationColumn, TensorColumn, MessageColumn, ColumnCount };

    using QAbstractTableModel::QAbstractTableModel;

    void setDiagnostics(Diagnostics diagnostics);
    const Diagnostics& diagnostics() const { return diagnostics_; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override;

private:
    Diagnostics diagnostics_;
};

}  // namespace ttrace

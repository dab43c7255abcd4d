#pragma once

#include <QWidget>
#include <memory>

#include "report/CheckReport.h"

class QLabel;
class QTableView;
class QTableWidget;
class QVBoxLayout;

namespace ttrace {

class DiagnosticsModel;

// What was checked and what came out: the verdict with the first faulty tensor, root-cause
// module and faulty shard, the runs' configurations side by side, and the diagnostics
// (errors first).
class RunOverviewPanel : public QWidget {
    Q_OBJECT

public:
    explicit RunOverviewPanel(QWidget* parent = nullptr);

    void setReport(std::shared_ptr<const CheckReport> report);
    // A check is running or was cancelled: says so instead of a verdict.
    void showMessage(const QString& message);

    QString verdictText() const;
    // The value of one finding of the summary ("Root-cause module"), empty when absent.
    QString finding(const QString& item) const;
    DiagnosticsModel* diagnosticsModel() const { return diagnostics_; }

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    void fitDiagnosticsColumns();

    QVBoxLayout* layout_ = nullptr;
    QLabel* verdict_ = nullptr;
    QTableWidget* summary_ = nullptr;
    QTableWidget* runs_ = nullptr;
    QTableView* diagnosticsView_ = nullptr;
    DiagnosticsModel* diagnostics_ = nullptr;
};

}  // namespace ttrace

#pragma once

#include <QMainWindow>
#include <memory>

#include "TraceFolders.h"
#include "report/CheckReport.h"

class QAction;
class QLabel;
class QMenu;
class QProgressBar;
class QPushButton;

namespace ttrace {

class CheckController;
class HeatmapView;
class RunOverviewPanel;
class TensorDetailPanel;

// The debugger's window: overview | heatmap | tensor detail, a status bar with progress and
// Cancel. It owns the check controller and routes every navigation between the views, which
// never call each other.
class MainWindow : public QMainWindow {
    Q_OBJECT

public:
    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;

    // Starts checking `folders` at once (a running check is superseded).
    void openTraces(const TraceFolders& folders);
    [[nodiscard]] bool exportReport(const QString& path, QString* error);
    // The same on a worker thread (a PDF takes tens of milliseconds); exportFinished follows.
    void exportReportInBackground(const QString& path);

    std::shared_ptr<const CheckReport> report() const { return report_; }
    bool isChecking() const;
    CheckController* controller() const { return controller_; }
    HeatmapView* heatmap() const { return heatmap_; }
    RunOverviewPanel* overview() const { return overview_; }
    TensorDetailPanel* detail() const { return detail_; }
    QAction* goToFirstFaultAction() const { return goToFirstFault_; }
    QAction* copySummaryAction() const { return copySummary_; }

public Q_SLOTS:
    void showOpenDialog();
    void showExportDialog();
    void goToFirstFault();
    // Puts the verdict and the summary's findings on the clipboard as plain text.
    void copySummary();
    void cancelCheck();

Q_SIGNALS:
    // The report of the current check is shown (tests and --screenshot wait for it).
    void reportShown();
    // A background export ended: `error` is empty on success.
    void exportFinished(const QString& path, const QString& error);

protected:
    void closeEvent(QCloseEvent* event) override;

private:
    void createActions();
    void createStatusBar();
    void showReport(std::shared_ptr<const CheckReport> report);
    void showTensor(std::size_t resultIndex);
    void setChecking(bool checking);
    void onProgress(const QString& stage, double fraction, double secondsLeft);
    void addRecent(const TraceFolders& folders);
    void rebuildRecentMenu();

    CheckController* controller_ = nullptr;
    RunOverviewPanel* overview_ = nullptr;
    HeatmapView* heatmap_ = nullptr;
    TensorDetailPanel* detail_ = nullptr;
    QProgressBar* progress_ = nullptr;
    QLabel* stage_ = nullptr;
    QLabel* timeLeft_ = nullptr;
    QPushButton* cancel_ = nullptr;
    QMenu* recentMenu_ = nullptr;
    QAction* export_ = nullptr;
    QAction* goToFirstFault_ = nullptr;
    QAction* copySummary_ = nullptr;
    QAction* resetZoom_ = nullptr;
    TraceFolders folders_;
    std::shared_ptr<const CheckReport> report_;
};

}  // namespace ttrace

#pragma once

#include <QMainWindow>
#include <memory>
#include <optional>

#include "ElementFigures.h"
#include "HeatmapFilter.h"
#include "NavigationHistory.h"
#include "TraceFolders.h"
#include "compare/BackendChoice.h"
#include "report/CheckReport.h"
#include "report/HeatmapGrid.h"

class QAction;
class QComboBox;
class QLabel;
class QMenu;
class QProgressBar;
class QPushButton;
class QSplitter;
class QTabWidget;

namespace ttrace {

class BackendMenu;
class BreadcrumbBar;
class CheckController;
class ElementProfileController;
class HeatmapFilterBar;
class HeatmapView;
class RunOverviewPanel;
class TensorDetailPanel;

// The debugger's window: overview | heatmaps (layers, ranks x layer) | tensor detail, with
// breadcrumbs and back/forward above and a status bar with progress and Cancel. It owns the
// controllers and routes every navigation (navigate()) between the views, which never call
// each other.
class MainWindow : public QMainWindow {
    Q_OBJECT

public:
    // `probeCuda`: the CUDA backend this build offers (app/BackendOffer.h); null: none.
    explicit MainWindow(CudaProbe probeCuda = {}, QWidget* parent = nullptr);
    ~MainWindow() override;

    // Starts checking `folders` at once (a running check is superseded).
    void openTraces(const TraceFolders& folders);
    [[nodiscard]] bool exportReport(const QString& path, QString* error);
    // The same on a worker thread (a PDF takes tens of milliseconds); exportFinished follows.
    void exportReportInBackground(const QString& path);

    std::shared_ptr<const CheckReport> report() const { return report_; }
    bool isChecking() const;
    CheckController* controller() const { return controller_; }
    ElementProfileController* profiles() const { return profiles_; }
    HeatmapView* heatmap() const { return heatmap_; }
    HeatmapView* rankHeatmap() const { return rankHeatmap_; }
    HeatmapFilterBar* filterBar() const { return filterBar_; }
    BreadcrumbBar* breadcrumbs() const { return breadcrumbs_; }
    RunOverviewPanel* overview() const { return overview_; }
    TensorDetailPanel* detail() const { return detail_; }
    QTabWidget* views() const { return views_; }
    QAction* goToFirstFaultAction() const { return goToFirstFault_; }
    QAction* copySummaryAction() const { return copySummary_; }
    QAction* backAction() const { return back_; }
    QAction* forwardAction() const { return forward_; }
    QAction* showRanksAction() const { return showRanks_; }
    QAction* focusFilterAction() const { return focusFilter_; }
    BackendMenu* backendMenu() const { return backendMenu_; }
    const Location& location() const { return history_.current(); }

public Q_SLOTS:
    void showOpenDialog();
    void showExportDialog();
    void goToFirstFault();
    // Puts the verdict and the summary's findings on the clipboard as plain text.
    void copySummary();
    void cancelCheck();
    // Shows `location` and records it in the history.
    void navigate(const Location& location);
    void goBack();
    void goForward();
    // The ranks x layer heatmap of the shown tensor's layer (else the first fault's).
    void showRanksOfLayer();

Q_SIGNALS:
    // The report of the current check is shown (tests and --screenshot wait for it).
    void reportShown();
    // A background export ended: `error` is empty on success.
    void exportFinished(const QString& path, const QString& error);

protected:
    void closeEvent(QCloseEvent* event) override;

private:
    // The shown tensor's element plots, when computed, for the HTML report.
    ElementFigures elementFigures() const;
    static constexpr int kLayersTab = 0;  // tabs of views_
    static constexpr int kRanksTab = 1;
    void createActions();
    void createStatusBar();
    QWidget* createLayersTab();
    QWidget* createRanksTab();
    void showReport(std::shared_ptr<const CheckReport> report,
                    std::shared_ptr<const HeatmapGrid> layout);
    void showTensor(std::size_t resultIndex, std::optional<int> rank = std::nullopt);
    void apply(const Location& location);  // shows it, records nothing
    void updateBreadcrumbs();
    void onCrumb(int level);
    void onViewTabChanged(int index);
    void applyFilter(const HeatmapFilter& filter);
    void setChecking(bool checking);
    void onProgress(const QString& stage, double fraction, double secondsLeft);
    void addRecent(const TraceFolders& folders);
    void rebuildRecentMenu();

    CheckController* controller_ = nullptr;
    BackendMenu* backendMenu_ = nullptr;
    ElementProfileController* profiles_ = nullptr;
    std::optional<int> profiledRank_;  // whose copies the element view shows
    RunOverviewPanel* overview_ = nullptr;
    QTabWidget* views_ = nullptr;
    HeatmapFilterBar* filterBar_ = nullptr;
    HeatmapView* heatmap_ = nullptr;
    QComboBox* layerChoice_ = nullptr;
    HeatmapView* rankHeatmap_ = nullptr;
    QLabel* ranksCaption_ = nullptr;
    TensorDetailPanel* detail_ = nullptr;
    BreadcrumbBar* breadcrumbs_ = nullptr;
    QSplitter* splitter_ = nullptr;
    QProgressBar* progress_ = nullptr;
    QLabel* stage_ = nullptr;
    QString resumeNote_;  // appended to the stage while a resumed check runs
    QLabel* timeLeft_ = nullptr;
    QPushButton* cancel_ = nullptr;
    QMenu* recentMenu_ = nullptr;
    QAction* export_ = nullptr;
    QAction* goToFirstFault_ = nullptr;
    QAction* copySummary_ = nullptr;
    QAction* resetZoom_ = nullptr;
    QAction* back_ = nullptr;
    QAction* forward_ = nullptr;
    QAction* showRanks_ = nullptr;
    QAction* focusFilter_ = nullptr;
    TraceFolders folders_;
    std::shared_ptr<const CheckReport> report_;
    std::shared_ptr<const HeatmapGrid> layerLayout_;  // the layer heatmap before filtering
    NavigationHistory history_;
    std::vector<Location> crumbTargets_;        // where each breadcrumb leads
    std::optional<HeatmapFilter> savedFilter_;  // from the last session, until a report shows
    bool applying_ = false;  // apply() is moving widgets: their signals are not navigation
};

}  // namespace ttrace

#include "MainWindow.h"

#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QCloseEvent>
#include <QComboBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFutureWatcher>
#include <QKeySequence>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSplitter>
#include <QStatusBar>
#include <QStyle>
#include <QTabWidget>
#include <QToolBar>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>
#include <cmath>

#include "BackendMenu.h"
#include "BreadcrumbBar.h"
#include "CheckController.h"
#include "ElementErrorImage.h"
#include "ElementFigures.h"
#include "ElementProfileController.h"
#include "ErrorGrids.h"
#include "ErrorHistogramView.h"
#include "HeatmapFilterBar.h"
#include "HeatmapView.h"
#include "OpenTracesDialog.h"
#include "PdfReport.h"
#include "RunOverviewPanel.h"
#include "TensorDetailPanel.h"
#include "report/ReportText.h"
#include "report/ReportWriters.h"

namespace ttrace {

namespace {

constexpr int kMaxRecent = 8;
constexpr int kProgressRange = 1000;

const QString kRecentKey = QStringLiteral("recent");
const QString kGeometryKey = QStringLiteral("window/geometry");
const QString kStateKey = QStringLiteral("window/state");
const QString kSplitterKey = QStringLiteral("window/splitter");
const QString kExportDirKey = QStringLiteral("export/directory");
const QString kFilterModuleKey = QStringLiteral("heatmap/filterModule");
const QString kFilterKindKey = QStringLiteral("heatmap/filterKind");
const QString kFilterIterationKey = QStringLiteral("heatmap/filterIteration");
const QString kDetailTabKey = QStringLiteral("detail/tab");

QString formatSeconds(double seconds) {
    if (seconds < 60) {
        return QStringLiteral("%1 s").arg(std::max(1L, std::lround(seconds)));
    }
    return QStringLiteral("%1 min %2 s")
        .arg(std::lround(seconds) / 60)
        .arg(std::lround(seconds) % 60);
}

}  // namespace

MainWindow::MainWindow(CudaProbe probeCuda, QWidget* parent) : QMainWindow(parent) {
    setWindowTitle(QStringLiteral("ttrace"));
    controller_ = new CheckController(this);
    backendMenu_ = new BackendMenu(std::move(probeCuda), this);
    profiles_ = new ElementProfileController(this);
    overview_ = new RunOverviewPanel(this);
    detail_ = new TensorDetailPanel(this);
    views_ = new QTabWidget(this);
    views_->setObjectName(QStringLiteral("views"));
    views_->addTab(createLayersTab(), QStringLiteral("Layers"));
    views_->addTab(createRanksTab(), QStringLiteral("Ranks × layer"));
    // One filter for both heatmaps, above their tabs.
    filterBar_ = new HeatmapFilterBar(this);
    auto* middle = new QWidget(this);
    auto* middleLayout = new QVBoxLayout(middle);
    middleLayout->setContentsMargins(0, 0, 0, 0);
    middleLayout->addWidget(filterBar_);
    middleLayout->addWidget(views_, 1);
    breadcrumbs_ = new BreadcrumbBar(this);

    splitter_ = new QSplitter(Qt::Horizontal, this);
    splitter_->setObjectName(QStringLiteral("mainSplitter"));
    splitter_->addWidget(overview_);
    splitter_->addWidget(middle);
    splitter_->addWidget(detail_);
    splitter_->setStretchFactor(0, 2);
    splitter_->setStretchFactor(1, 3);
    splitter_->setStretchFactor(2, 2);
    splitter_->setSizes({500, 700, 500});
    auto* central = new QWidget(this);
    auto* layout = new QVBoxLayout(central);
    layout->setContentsMargins(6, 4, 6, 0);
    layout->addWidget(breadcrumbs_);
    layout->addWidget(splitter_, 1);
    setCentralWidget(central);

    createActions();
    createStatusBar();

    connect(controller_, &CheckController::progressChanged, this, &MainWindow::onProgress);
    connect(controller_, &CheckController::started, this, [this] { resumeNote_.clear(); });
    connect(controller_, &CheckController::resuming, this, [this](qint64 reused, qint64 total) {
        resumeNote_ = QStringLiteral(
                          " (resuming: %1 of %2 tensors were compared by an earlier "
                          "check that stopped)")
                          .arg(reused)
                          .arg(total);
        stage_->setText(stage_->text() + resumeNote_);
    });
    connect(controller_, &CheckController::finished, this, &MainWindow::showReport);
    connect(controller_, &CheckController::cancelled, this, [this] {
        setChecking(false);
        stage_->setText(QStringLiteral("Check cancelled"));
        overview_->showMessage(QStringLiteral("The check was cancelled; nothing was stored."));
    });
    connect(heatmap_, &HeatmapView::tensorActivated, this,
            [this](std::size_t result) { showTensor(result); });
    connect(rankHeatmap_, &HeatmapView::rankActivated, this,
            [this](std::size_t result, int rank) { showTensor(result, rank); });
    connect(rankHeatmap_, &HeatmapView::tensorActivated, this,
            [this](std::size_t result) { showTensor(result); });
    connect(rankHeatmap_, &HeatmapView::rankGroupActivated, this, [this](const RankBox& box) {
        Location next = location();
        next.ranks = box;
        navigate(next);
    });
    for (HeatmapView* view : {heatmap_, rankHeatmap_}) {
        connect(view, &HeatmapView::layerRanksRequested, this, [this](int layer) {
            Location next = location();
            next.view = Location::View::LayerRanks;
            next.layer = layer;
            next.ranks = {};
            navigate(next);
        });
    }
    connect(views_, &QTabWidget::currentChanged, this, &MainWindow::onViewTabChanged);
    connect(layerChoice_, &QComboBox::currentIndexChanged, this, [this](int index) {
        if (applying_ || index < 0) {
            return;
        }
        Location next = location();
        next.view = Location::View::LayerRanks;
        next.layer = layerChoice_->itemData(index).toInt();
        next.ranks = {};
        navigate(next);
    });
    connect(filterBar_, &HeatmapFilterBar::filterChanged, this, &MainWindow::applyFilter);
    connect(breadcrumbs_, &BreadcrumbBar::crumbActivated, this, &MainWindow::onCrumb);
    connect(detail_, &TensorDetailPanel::rankChosen, this, [this](int rank) {
        if (const auto result = location().result) {
            showTensor(*result, rank);
        }
    });
    connect(profiles_, &ElementProfileController::finished, detail_,
            &TensorDetailPanel::showProfile);
    connect(profiles_, &ElementProfileController::failed, detail_,
            &TensorDetailPanel::showProfileError);
    connect(this, &MainWindow::exportFinished, this,
            [this](const QString& path, const QString& error) {
                if (error.isEmpty()) {
                    stage_->setText(QStringLiteral("Report written to ") + path);
                } else {
                    QMessageBox::warning(this, QStringLiteral("Export report"), error);
                }
            });

    QSettings settings;
    if (!restoreGeometry(settings.value(kGeometryKey).toByteArray())) {
        resize(1700, 950);
    }
    restoreState(settings.value(kStateKey).toByteArray());
    splitter_->restoreState(settings.value(kSplitterKey).toByteArray());
    detail_->tabs()->setCurrentIndex(settings.value(kDetailTabKey, 0).toInt());
    const QString savedKind = settings.value(kFilterKindKey).toString();
    const QVariant savedIteration = settings.value(kFilterIterationKey);
    savedFilter_ = HeatmapFilter(
        settings.value(kFilterModuleKey).toString(),
        savedKind.isEmpty() ? std::nullopt : tensorKindFromName(savedKind),
        savedIteration.isValid() ? std::optional(savedIteration.toInt()) : std::nullopt);
    rebuildRecentMenu();
    updateBreadcrumbs();
    setChecking(false);
}

QWidget* MainWindow::createLayersTab() {
    heatmap_ = new HeatmapView(this);
    heatmap_->setObjectName(QStringLiteral("layerHeatmap"));
    return heatmap_;
}

namespace {

// The ranks view's caption: whose ranks its rows are, with both runs' layouts where the check
// has them (a reference laid out over ranks differs from the distributed run's).
QString ranksCaptionText(const CheckReport* report) {
    QString rows = QStringLiteral("rows: ranks");
    if (report) {
        rows = QStringLiteral("rows: the distributed run's ranks (%1; the reference: %2)")
                   .arg(report_text::layoutSummary(report->distributed.manifest),
                        report_text::layoutSummary(report->reference.manifest));
    }
    return rows + QStringLiteral(
                      "; columns: the layer's tensors; click a cell for that tensor on that "
                      "rank, on a block of ranks to expand it");
}

}  // namespace

QWidget* MainWindow::createRanksTab() {
    auto* tab = new QWidget(this);
    layerChoice_ = new QComboBox(tab);
    layerChoice_->setObjectName(QStringLiteral("layerChoice"));
    rankHeatmap_ = new HeatmapView(tab);
    rankHeatmap_->setObjectName(QStringLiteral("rankHeatmap"));
    auto* label = new QLabel(QStringLiteral("La&yer:"), tab);
    label->setBuddy(layerChoice_);
    auto* bar = new QHBoxLayout;
    bar->addWidget(label);
    bar->addWidget(layerChoice_);
    ranksCaption_ = new QLabel(tab);
    ranksCaption_->setObjectName(QStringLiteral("ranksCaption"));
    ranksCaption_->setWordWrap(true);
    ranksCaption_->setText(ranksCaptionText(nullptr));
    bar->addWidget(ranksCaption_, 1);
    auto* layout = new QVBoxLayout(tab);
    layout->addLayout(bar);
    layout->addWidget(rankHeatmap_, 1);
    return tab;
}

MainWindow::~MainWindow() = default;

void MainWindow::createActions() {
    QMenu* file = menuBar()->addMenu(QStringLiteral("&File"));
    QAction* open =
        file->addAction(QStringLiteral("&Open trace folders…"), this, &MainWindow::showOpenDialog);
    open->setShortcut(QKeySequence::Open);
    open->setIcon(style()->standardIcon(QStyle::SP_DialogOpenButton));
    recentMenu_ = file->addMenu(QStringLiteral("Open &Recent"));
    export_ =
        file->addAction(QStringLiteral("&Export report…"), this, &MainWindow::showExportDialog);
    export_->setShortcuts({QKeySequence(Qt::CTRL | Qt::Key_E), QKeySequence::SaveAs});
    export_->setIcon(style()->standardIcon(QStyle::SP_DialogSaveButton));
    file->addSeparator();
    QAction* quit = file->addAction(QStringLiteral("&Quit"), this, &QWidget::close);
    quit->setShortcut(QKeySequence::Quit);

    QMenu* edit = menuBar()->addMenu(QStringLiteral("&Edit"));
    copySummary_ = edit->addAction(QStringLiteral("&Copy summary"), this, &MainWindow::copySummary);
    copySummary_->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_C));
    copySummary_->setToolTip(
        QStringLiteral("Copy the verdict, first faulty tensor, root cause and faulty shard"));
    edit->addSeparator();
    edit->addMenu(backendMenu_);

    QMenu* view = menuBar()->addMenu(QStringLiteral("&View"));
    goToFirstFault_ =
        view->addAction(QStringLiteral("Go to &first fault"), this, &MainWindow::goToFirstFault);
    goToFirstFault_->setShortcuts({QKeySequence(Qt::CTRL | Qt::Key_F), QKeySequence(Qt::Key_F8)});
    goToFirstFault_->setIcon(style()->standardIcon(QStyle::SP_MessageBoxWarning));
    showRanks_ =
        view->addAction(QStringLiteral("&Ranks × layer"), this, &MainWindow::showRanksOfLayer);
    showRanks_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
    showRanks_->setToolTip(QStringLiteral("Every rank against the tensors of the shown layer"));
    resetZoom_ = view->addAction(QStringLiteral("Reset &zoom"), this, [this] {
        heatmap_->resetView();
        rankHeatmap_->resetView();
    });
    resetZoom_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_0));
    focusFilter_ = view->addAction(QStringLiteral("&Filter the heatmaps"), this,
                                   [this] { filterBar_->focusModuleField(); });
    focusFilter_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_L));
    view->addSeparator();
    QAction* focusHeatmap = view->addAction(QStringLiteral("Focus the &heatmap"), this, [this] {
        (views_->currentIndex() == kRanksTab ? rankHeatmap_ : heatmap_)
            ->setFocus(Qt::ShortcutFocusReason);
    });
    focusHeatmap->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_1));
    QAction* focusDetail =
        view->addAction(QStringLiteral("Focus the tensor &detail"), this,
                        [this] { detail_->tabs()->setFocus(Qt::ShortcutFocusReason); });
    focusDetail->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_2));
    QAction* elements = view->addAction(QStringLiteral("&Element errors of the tensor"), this,
                                        [this] { detail_->tabs()->setCurrentIndex(1); });
    elements->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_3));

    QMenu* go = menuBar()->addMenu(QStringLiteral("&Go"));
    back_ = go->addAction(QStringLiteral("&Back"), this, &MainWindow::goBack);
    back_->setShortcut(QKeySequence::Back);
    back_->setIcon(style()->standardIcon(QStyle::SP_ArrowBack));
    forward_ = go->addAction(QStringLiteral("&Forward"), this, &MainWindow::goForward);
    forward_->setShortcut(QKeySequence::Forward);
    forward_->setIcon(style()->standardIcon(QStyle::SP_ArrowForward));
    go->addSeparator();
    go->addAction(goToFirstFault_);
    go->addAction(showRanks_);
    QAction* up = go->addAction(QStringLiteral("&Up to the run"), this, [this] { onCrumb(0); });
    up->setShortcut(QKeySequence(Qt::ALT | Qt::Key_Up));

    QMenu* help = menuBar()->addMenu(QStringLiteral("&Help"));
    help->addAction(QStringLiteral("&About ttrace"), this, [this] {
        QMessageBox::about(
            this, QStringLiteral("About ttrace"),
            QStringLiteral("<b>ttrace %1</b><p>Finds and localizes silent bugs in distributed "
                           "training by comparing every captured tensor with a trusted "
                           "reference run (on one device, or on several ranks in another "
                           "layout), against a tolerance estimated from floating-point "
                           "round-off.</p><p>Normalized error = relative error / threshold; "
                           "above 1 is a bug.</p>")
                .arg(QStringLiteral(TTRACE_VERSION)));
    });

    QToolBar* toolbar = addToolBar(QStringLiteral("Main"));
    toolbar->setObjectName(QStringLiteral("mainToolbar"));
    toolbar->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    toolbar->addAction(back_);
    toolbar->addAction(forward_);
    toolbar->addSeparator();
    toolbar->addAction(open);
    toolbar->addAction(export_);
    toolbar->addAction(goToFirstFault_);
    toolbar->addAction(showRanks_);
    toolbar->addAction(resetZoom_);
}

void MainWindow::createStatusBar() {
    stage_ = new QLabel(this);
    stage_->setObjectName(QStringLiteral("stage"));
    progress_ = new QProgressBar(this);
    progress_->setRange(0, kProgressRange);
    progress_->setMaximumWidth(260);
    timeLeft_ = new QLabel(this);
    cancel_ = new QPushButton(QStringLiteral("Cancel"), this);
    cancel_->setObjectName(QStringLiteral("cancel"));
    cancel_->setShortcut(QKeySequence(Qt::Key_Escape));
    connect(cancel_, &QPushButton::clicked, this, &MainWindow::cancelCheck);
    statusBar()->addWidget(stage_, 1);
    statusBar()->addPermanentWidget(progress_);
    statusBar()->addPermanentWidget(timeLeft_);
    statusBar()->addPermanentWidget(cancel_);
}

bool MainWindow::isChecking() const {
    return controller_->isRunning();
}

void MainWindow::setChecking(bool checking) {
    progress_->setVisible(checking);
    timeLeft_->setVisible(checking);
    cancel_->setVisible(checking);
    export_->setEnabled(!checking && report_ != nullptr);
    copySummary_->setEnabled(!checking && report_ != nullptr);
    goToFirstFault_->setEnabled(!checking && report_ && report_->bugFound());
    showRanks_->setEnabled(!checking && report_ && !report_->comparison.results.empty());
    back_->setEnabled(!checking && history_.canGoBack());
    forward_->setEnabled(!checking && history_.canGoForward());
}

void MainWindow::openTraces(const TraceFolders& folders) {
    folders_ = folders;
    addRecent(folders);
    setWindowTitle(QStringLiteral("ttrace — ") + folders.displayName());
    report_.reset();
    layerLayout_.reset();
    profiles_->cancel();
    heatmap_->clear();
    rankHeatmap_->clear();
    ranksCaption_->setText(ranksCaptionText(nullptr));
    detail_->setReport(nullptr);
    history_.reset(Location{});
    updateBreadcrumbs();
    overview_->showMessage(
        QStringLiteral("Checking %1 against %2…").arg(folders.distributed, folders.reference));
    CheckRequest request;
    request.distributed = folders.distributed;
    request.reference = folders.reference;
    request.perturbed = folders.perturbed;
    // The window shows one layer's or one tensor's shards at a time.
    request.detailsOnDemand = true;
    BackendChoice backend = backendMenu_->choose();
    if (!backend.backend) {
        overview_->showMessage(QStringLiteral("Not checked: ") + backend.error +
                               QStringLiteral(". Choose Edit > Compare on > Auto or CPU, then "
                                              "open the traces again."));
        stage_->setText(QStringLiteral("Not checked: ") + backend.error);
        return;
    }
    profiles_->setBackend(backend.backend);
    request.backend = std::move(backend.backend);
    progress_->setValue(0);
    stage_->setText(QStringLiteral("Starting the check…"));
    timeLeft_->clear();
    controller_->start(std::move(request));
    setChecking(true);
}

void MainWindow::onProgress(const QString& stage, double fraction, double secondsLeft) {
    progress_->setValue(static_cast<int>(std::lround(fraction * kProgressRange)));
    stage_->setText(QStringLiteral("Checking: ") + stage + QStringLiteral("…") + resumeNote_);
    timeLeft_->setText(secondsLeft < 0
                           ? QString()
                           : QStringLiteral("about %1 left").arg(formatSeconds(secondsLeft)));
}

void MainWindow::cancelCheck() {
    controller_->cancel();
}

void MainWindow::showReport(std::shared_ptr<const CheckReport> report,
                            std::shared_ptr<const HeatmapGrid> layout) {
    report_ = std::move(report);
    layerLayout_ = std::move(layout);
    overview_->setReport(report_);
    heatmap_->setReport(report_);
    rankHeatmap_->setReport(report_);
    ranksCaption_->setText(ranksCaptionText(report_.get()));
    detail_->setReport(report_);
    applying_ = true;
    layerChoice_->clear();
    for (const int layer : resultLayers(*report_)) {
        layerChoice_->addItem(layerName(layer), layer);
    }
    applying_ = false;
    filterBar_->setChoices(report_.get());  // applies the filter: the layer heatmap fills
    if (savedFilter_) {
        filterBar_->setFilter(*savedFilter_);
        savedFilter_.reset();
    }
    history_.reset(Location{});
    apply(history_.current());
    setChecking(false);
    // With no bug, the tensor closest to its tolerance is the one worth a look.
    if (!report_->bugFound()) {
        const auto worst = report_text::worstTensors(report_->comparison.results, 1);
        if (!worst.empty()) {
            showTensor(worst.front());
        }
    }
    const ComparisonOutput& comparison = report_->comparison;
    stage_->setText(
        comparison.results.empty()
            ? QStringLiteral("No tensor compared: the verdict and the diagnostics say why")
            : QStringLiteral("%1; %2").arg(comparison.coverage.describe(report_->comparedCount()),
                                           report_text::comparisonLine(*report_)));
    Q_EMIT reportShown();
}

void MainWindow::copySummary() {
    if (report_) {
        QGuiApplication::clipboard()->setText(report_text::summaryText(*report_));
        stage_->setText(QStringLiteral("Summary copied to the clipboard"));
    }
}

void MainWindow::showOpenDialog() {
    OpenTracesDialog dialog(folders_, this);
    if (dialog.exec() == QDialog::Accepted) {
        openTraces(dialog.folders());
    }
}

namespace {

constexpr QSize kFigureSize(760, 320);

// Runs on any thread: reads only its arguments.
bool writeReport(const CheckReport& report, const QImage& heatmap, const ElementFigures& figures,
                 const QString& path, QString* error) {
    const QString suffix = QFileInfo(path).suffix().toLower();
    if (suffix == QStringLiteral("json")) {  // one tensor at a time
        return writeReportFile(
            path, [&report](QIODevice& file) { return writeJsonReport(report, file); }, error);
    }
    QByteArray contents;
    if (suffix == QStringLiteral("md") || suffix == QStringLiteral("markdown")) {
        contents = reportToMarkdown(report).toUtf8();
    } else if (suffix == QStringLiteral("pdf")) {
        contents = reportToPdf(report, heatmap, figures);
    } else {
        contents = withElementFigures(reportToHtml(report), figures).toUtf8();
    }
    return writeReportFile(path, contents, error);
}

}  // namespace

bool MainWindow::exportReport(const QString& path, QString* error) {
    if (!report_) {
        if (error) {
            *error = QStringLiteral("no report to export yet");
        }
        return false;
    }
    // The heatmap as shown (zoom included), grabbed here: widgets live on the GUI thread.
    return writeReport(*report_, heatmap_->grab().toImage(), elementFigures(), path, error);
}

ElementFigures MainWindow::elementFigures() const {
    ElementFigures figures;
    const auto profile = detail_->elementImage()->profile();
    const auto shown = detail_->currentResult();
    if (!report_ || !profile || !shown || report_->comparison.results[*shown].key != profile->key) {
        return figures;
    }
    figures.tensor = profile->key.toString();
    figures.histogram = detail_->histogram()->toImage(kFigureSize);
    figures.image = detail_->elementImage()->toImage(kFigureSize);
    return figures;
}

void MainWindow::exportReportInBackground(const QString& path) {
    if (!report_) {
        Q_EMIT exportFinished(path, QStringLiteral("no report to export yet"));
        return;
    }
    // The worker gets copies: the immutable report and the grabbed image.
    const std::shared_ptr<const CheckReport> report = report_;
    const QImage heatmap = heatmap_->grab().toImage();
    const ElementFigures figures = elementFigures();
    auto* watcher = new QFutureWatcher<QString>(this);
    connect(watcher, &QFutureWatcher<QString>::finished, this, [this, watcher, path] {
        const QString error = watcher->result();
        watcher->deleteLater();
        Q_EMIT exportFinished(path, error);
    });
    watcher->setFuture(QtConcurrent::run([report, heatmap, figures, path] {
        QString error;
        return writeReport(*report, heatmap, figures, path, &error) ? QString() : error;
    }));
}

void MainWindow::showExportDialog() {
    const QString html = QStringLiteral("HTML report (*.html)");
    const QString markdown = QStringLiteral("Markdown for an issue tracker (*.md)");
    const QString json = QStringLiteral("JSON for tools (*.json)");
    const QString pdf = QStringLiteral("PDF to print or attach (*.pdf)");
    QString filter = html;
    const QString directory = QSettings().value(kExportDirKey, QDir::homePath()).toString();
    QString path = QFileDialog::getSaveFileName(
        this, QStringLiteral("Export report"),
        QDir(directory).filePath(QStringLiteral("ttrace-report.html")),
        QStringList{html, markdown, json, pdf}.join(QStringLiteral(";;")), &filter);
    if (path.isEmpty()) {
        return;
    }
    if (QFileInfo(path).suffix().isEmpty()) {
        path += filter == markdown ? QStringLiteral(".md")
                : filter == json   ? QStringLiteral(".json")
                : filter == pdf    ? QStringLiteral(".pdf")
                                   : QStringLiteral(".html");
    }
    QSettings().setValue(kExportDirKey, QFileInfo(path).absolutePath());
    stage_->setText(QStringLiteral("Writing ") + path + QStringLiteral("…"));
    exportReportInBackground(path);
}

void MainWindow::addRecent(const TraceFolders& folders) {
    QSettings settings;
    QVariantList recent = settings.value(kRecentKey).toList();
    const QStringList entry = folders.toList();
    recent.removeAll(QVariant(entry));
    recent.prepend(QVariant(entry));
    while (recent.size() > kMaxRecent) {
        recent.removeLast();
    }
    settings.setValue(kRecentKey, recent);
    rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu() {
    recentMenu_->clear();
    const QVariantList recent = QSettings().value(kRecentKey).toList();
    for (const QVariant& value : recent) {
        const TraceFolders folders = TraceFolders::fromList(value.toStringList());
        if (!folders.isComplete()) {
            continue;
        }
        QAction* action = recentMenu_->addAction(folders.displayName(), this,
                                                 [this, folders] { openTraces(folders); });
        action->setToolTip(folders.toList().join(QLatin1Char('\n')));
    }
    recentMenu_->setEnabled(!recentMenu_->isEmpty());
}

void MainWindow::closeEvent(QCloseEvent* event) {
    QSettings settings;
    settings.setValue(kGeometryKey, saveGeometry());
    settings.setValue(kStateKey, saveState());
    settings.setValue(kSplitterKey, splitter_->saveState());
    settings.setValue(kDetailTabKey, detail_->tabs()->currentIndex());
    const HeatmapFilter filter = filterBar_->filter();
    settings.setValue(kFilterModuleKey, filter.module());
    settings.setValue(kFilterKindKey, filter.kind() ? tensorKindName(*filter.kind()) : QString());
    settings.setValue(kFilterIterationKey,
                      filter.iteration() ? QVariant(*filter.iteration()) : QVariant());
    controller_->cancel();
    QMainWindow::closeEvent(event);
}

}  // namespace ttrace

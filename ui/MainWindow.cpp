#include "MainWindow.h"

#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QCloseEvent>
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
#include <QToolBar>
#include <QtConcurrent/QtConcurrentRun>
#include <cmath>

#include "CheckController.h"
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

QString formatSeconds(double seconds) {
    if (seconds < 60) {
        return QStringLiteral("%1 s").arg(std::max(1L, std::lround(seconds)));
    }
    return QStringLiteral("%1 min %2 s")
        .arg(std::lround(seconds) / 60)
        .arg(std::lround(seconds) % 60);
}

}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
    setWindowTitle(QStringLiteral("ttrace"));
    controller_ = new CheckController(this);
    overview_ = new RunOverviewPanel(this);
    heatmap_ = new HeatmapView(this);
    detail_ = new TensorDetailPanel(this);

    auto* splitter = new QSplitter(Qt::Horizontal, this);
    splitter->setObjectName(QStringLiteral("mainSplitter"));
    splitter->addWidget(overview_);
    splitter->addWidget(heatmap_);
    splitter->addWidget(detail_);
    splitter->setStretchFactor(0, 2);
    splitter->setStretchFactor(1, 3);
    splitter->setStretchFactor(2, 2);
    splitter->setSizes({540, 700, 460});
    setCentralWidget(splitter);

    createActions();
    createStatusBar();

    connect(controller_, &CheckController::progressChanged, this, &MainWindow::onProgress);
    connect(controller_, &CheckController::finished, this, &MainWindow::showReport);
    connect(controller_, &CheckController::cancelled, this, [this] {
        setChecking(false);
        stage_->setText(QStringLiteral("Check cancelled"));
        overview_->showMessage(QStringLiteral("The check was cancelled; nothing was stored."));
    });
    connect(heatmap_, &HeatmapView::tensorActivated, this, &MainWindow::showTensor);
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
    splitter->restoreState(settings.value(kSplitterKey).toByteArray());
    rebuildRecentMenu();
    setChecking(false);
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

    QMenu* view = menuBar()->addMenu(QStringLiteral("&View"));
    goToFirstFault_ =
        view->addAction(QStringLiteral("Go to &first fault"), this, &MainWindow::goToFirstFault);
    goToFirstFault_->setShortcuts({QKeySequence(Qt::CTRL | Qt::Key_F), QKeySequence(Qt::Key_F8)});
    goToFirstFault_->setIcon(style()->standardIcon(QStyle::SP_MessageBoxWarning));
    resetZoom_ = view->addAction(QStringLiteral("&Reset zoom"), heatmap_, &HeatmapView::resetView);
    resetZoom_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_0));

    QMenu* help = menuBar()->addMenu(QStringLiteral("&Help"));
    help->addAction(QStringLiteral("&About ttrace"), this, [this] {
        QMessageBox::about(
            this, QStringLiteral("About ttrace"),
            QStringLiteral("<b>ttrace %1</b><p>Finds and localizes silent bugs in distributed "
                           "training by comparing every captured tensor with a single-device "
                           "reference, against a tolerance estimated from floating-point "
                           "round-off.</p><p>Normalized error = relative error / threshold; "
                           "above 1 is a bug.</p>")
                .arg(QStringLiteral(TTRACE_VERSION)));
    });

    QToolBar* toolbar = addToolBar(QStringLiteral("Main"));
    toolbar->setObjectName(QStringLiteral("mainToolbar"));
    toolbar->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    toolbar->addAction(open);
    toolbar->addAction(export_);
    toolbar->addAction(goToFirstFault_);
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
}

void MainWindow::openTraces(const TraceFolders& folders) {
    folders_ = folders;
    addRecent(folders);
    setWindowTitle(QStringLiteral("ttrace — ") + folders.displayName());
    report_.reset();
    heatmap_->clear();
    detail_->setReport(nullptr);
    overview_->showMessage(
        QStringLiteral("Checking %1 against %2…").arg(folders.distributed, folders.reference));
    CheckRequest request;
    request.distributed = folders.distributed;
    request.reference = folders.reference;
    request.perturbed = folders.perturbed;
    progress_->setValue(0);
    stage_->setText(QStringLiteral("Starting the check…"));
    timeLeft_->clear();
    controller_->start(std::move(request));
    setChecking(true);
}

void MainWindow::onProgress(const QString& stage, double fraction, double secondsLeft) {
    progress_->setValue(static_cast<int>(std::lround(fraction * kProgressRange)));
    stage_->setText(QStringLiteral("Checking: ") + stage + QStringLiteral("…"));
    timeLeft_->setText(secondsLeft < 0
                           ? QString()
                           : QStringLiteral("about %1 left").arg(formatSeconds(secondsLeft)));
}

void MainWindow::cancelCheck() {
    controller_->cancel();
}

void MainWindow::showReport(std::shared_ptr<const CheckReport> report) {
    report_ = std::move(report);
    overview_->setReport(report_);
    heatmap_->setReport(report_);
    detail_->setReport(report_);
    setChecking(false);
    // With no bug, the tensor closest to its tolerance is the one worth a look.
    if (!report_->bugFound()) {
        const auto worst = report_text::worstTensors(report_->comparison.results, 1);
        if (!worst.empty()) {
            showTensor(worst.front());
        }
    }
    stage_->setText(
        QStringLiteral("%1 tensors compared in %2 s on the %3 backend%4")
            .arg(report_->comparison.results.size())
            .arg(report_text::formatNumber(report_->seconds), report_->comparison.backendName,
                 report_->fromCache ? QStringLiteral(" (results from the cache)") : QString()));
    Q_EMIT reportShown();
}

void MainWindow::showTensor(std::size_t resultIndex) {
    heatmap_->selectResult(resultIndex);
    detail_->showResult(resultIndex);
}

void MainWindow::goToFirstFault() {
    if (report_ && report_->localization.firstFaulty) {
        showTensor(*report_->localization.firstFaulty);
    }
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

// Runs on any thread: reads only its arguments.
bool writeReport(const CheckReport& report, const QImage& heatmap, const QString& path,
                 QString* error) {
    const QString suffix = QFileInfo(path).suffix().toLower();
    QByteArray contents;
    if (suffix == QStringLiteral("md") || suffix == QStringLiteral("markdown")) {
        contents = reportToMarkdown(report).toUtf8();
    } else if (suffix == QStringLiteral("json")) {
        contents = reportToJson(report);
    } else if (suffix == QStringLiteral("pdf")) {
        contents = reportToPdf(report, heatmap);
    } else {
        contents = reportToHtml(report).toUtf8();
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
    return writeReport(*report_, heatmap_->grab().toImage(), path, error);
}

void MainWindow::exportReportInBackground(const QString& path) {
    if (!report_) {
        Q_EMIT exportFinished(path, QStringLiteral("no report to export yet"));
        return;
    }
    // The worker gets copies: the immutable report and the grabbed image.
    const std::shared_ptr<const CheckReport> report = report_;
    const QImage heatmap = heatmap_->grab().toImage();
    auto* watcher = new QFutureWatcher<QString>(this);
    connect(watcher, &QFutureWatcher<QString>::finished, this, [this, watcher, path] {
        const QString error = watcher->result();
        watcher->deleteLater();
        Q_EMIT exportFinished(path, error);
    });
    watcher->setFuture(QtConcurrent::run([report, heatmap, path] {
        QString error;
        return writeReport(*report, heatmap, path, &error) ? QString() : error;
    }));
}

void MainWindow::showExportDialog() {
    const QString html = QStringLiteral("HTML report (*.html)");
    const QString markdown = QStringLiteral("Markdown for an issue tracker (*.md)");
    const QString json = QStringLiteral("JSON for tools (*.json)");
    const QString pdf = QStringLiteral("PDF to print or attach (*.pdf)");
    QString filter = html;
    QString path = QFileDialog::getSaveFileName(
        this, QStringLiteral("Export report"), QStringLiteral("ttrace-report.html"),
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
    if (auto* splitter = qobject_cast<QSplitter*>(centralWidget())) {
        settings.setValue(kSplitterKey, splitter->saveState());
    }
    controller_->cancel();
    QMainWindow::closeEvent(event);
}

}  // namespace ttrace

// The GUI on the bundled sample traces (real runs of examples/gpt): a real MainWindow
// (offscreen), the real check on a worker thread, the heatmap, drill-down, cancel and export.
// What each sample must show comes from resources/samples/samples.json (the bug corpus).
#include <QAbstractItemModelTester>
#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QElapsedTimer>
#include <QFile>
#include <QLabel>
#include <QProcess>
#include <QScopeGuard>
#include <QSettings>
#include <QSignalSpy>
#include <QSplitter>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>
#include <set>

#include "BackendMenu.h"
#include "BreadcrumbBar.h"
#include "BundledSamples.h"
#include "CheckController.h"
#include "ComparableReport.h"
#include "DiagnosticsModel.h"
#include "ElementErrorImage.h"
#include "ElementProfileController.h"
#include "ErrorGrids.h"
#include "ErrorHistogramView.h"
#include "Fp8Traces.h"
#include "HeatmapFilterBar.h"
#include "HeatmapView.h"
#include "MainWindow.h"
#include "RankGrid.h"
#include "ReportTestData.h"
#include "RunOverviewPanel.h"
#include "TensorDetailPanel.h"
#include "TestPaths.h"
#include "TraceFolders.h"
#include "compare/ComparisonJob.h"
#include "report/ReportText.h"
#include "session/DistributedComparison.h"
#include "trace/IsolatedHdf5.h"

using namespace ttrace;

namespace {

constexpr int kCheckTimeoutMs = 180000;

TraceFolders sample(const QString& name) {
    QString error;
    const TraceFolders folders = detectTraceFolders(test::bundledSample(name).folder(), &error);
    if (!error.isEmpty()) {
        qWarning("%s", qPrintable(error));
    }
    return folders;
}

QStringList columnTexts(const QTableWidget* table, int column) {
    QStringList texts;
    for (int r = 0; r < table->rowCount(); ++r) {
        texts << (table->item(r, column) ? table->item(r, column)->text() : QString());
    }
    return texts;
}

// The value of the row `label` of the statistics of the check's first tensor, as the window
// shows it once the tensor's cell is opened (Return on the heatmap), into `text`.
void firstTensorStatistic(const TraceFolders& folders, const QString& label, QString& text) {
    MainWindow window;
    window.show();
    QSignalSpy shown(&window, &MainWindow::reportShown);
    window.openTraces(folders);
    QTRY_VERIFY_WITH_TIMEOUT(shown.count() == 1, kCheckTimeoutMs);
    QCOMPARE(window.report()->comparison.results.size(), std::size_t{1});
    QVERIFY(window.heatmap()->selectResult(0));
    QTest::keyClick(window.heatmap(), Qt::Key_Return);
    QCOMPARE(window.detail()->currentResult(), std::optional<std::size_t>(0));
    const auto* statistics =
        window.detail()->findChild<QTableWidget*>(QStringLiteral("statistics"));
    QVERIFY(statistics);
    const auto row = static_cast<int>(columnTexts(statistics, 0).indexOf(label));
    QVERIFY2(row >= 0, qPrintable(columnTexts(statistics, 0).join(QLatin1Char('|'))));
    text = statistics->item(row, 1)->text();
}

// Opens a sample in `window` and waits for its report.
bool openAndWait(MainWindow& window, const QString& name) {
    QSignalSpy shown(&window, &MainWindow::reportShown);
    window.openTraces(sample(name));
    return shown.wait(kCheckTimeoutMs) || shown.count() > 0;
}

// Pixels of the element image whose error is above the threshold and that lie inside
// `shard`'s rectangles.
int hotPixelsInside(const ElementErrorProfile& profile, const ShardFootprint& shard,
                    double threshold) {
    const ErrorImage& image = profile.image;
    int hot = 0;
    for (int r = 0; r < image.height; ++r) {
        for (int c = 0; c < image.width; ++c) {
            const std::int64_t row = image.rowStart(r), column = image.columnStart(c);
            const bool inside =
                std::any_of(shard.rects.begin(), shard.rects.end(), [&](const ElementRect& e) {
                    return row >= e.rowStart && row < e.rowStop && column >= e.columnStart &&
                           column < e.columnStop;
                });
            if (inside && image.at(r, c) > threshold) {
                ++hot;
            }
        }
    }
    return hot;
}

}  // namespace

class TestGui : public QObject {
    Q_OBJECT

private:
    QTemporaryDir cache_;
    QTemporaryDir out_;

private Q_SLOTS:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);  // QSettings away from the user's
        QCoreApplication::setOrganizationName(QStringLiteral("ttrace-tests"));
        QCoreApplication::setApplicationName(QStringLiteral("test_gui"));
        QSettings().clear();  // filters or a layout left by an earlier, failed run
        QVERIFY(cache_.isValid());
        QVERIFY(out_.isValid());
        qputenv("TTRACE_CACHE_DIR", cache_.path().toUtf8());
        QVERIFY2(!test::sourceDir().isEmpty(), "TTRACE_SOURCE_DIR must name the repository");
        // As the program does: rank files are read by HDF5 worker processes.
        const auto notIsolated = isolateHdf5ForThisProgram();
        QVERIFY2(!notIsolated, qPrintable(notIsolated.value_or(QString())));
    }

    void detectsSampleFoldersByRole() {
        const TraceFolders folders = sample(QStringLiteral("row_bias_every_rank"));
        QVERIFY(folders.distributed.endsWith(QStringLiteral("/dist")));
        QVERIFY(folders.reference.endsWith(QStringLiteral("/ref")));
        QVERIFY(folders.perturbed.endsWith(QStringLiteral("/pert")));
    }

    // A forward bug of tensor parallelism: the first fault, its module, drill-down, export.
    void bugSampleShowsFirstFaultAndDrillsDown() {
        const test::BundledSample expected =
            test::bundledSample(QStringLiteral("row_bias_every_rank"));
        QVERIFY2(!expected.rootCause.isEmpty(), "samples.json lacks row_bias_every_rank");
        MainWindow window;
        window.show();
        QSignalSpy shown(&window, &MainWindow::reportShown);
        window.openTraces(sample(expected.name));
        QVERIFY(window.isChecking());
        QTRY_VERIFY_WITH_TIMEOUT(shown.count() == 1, kCheckTimeoutMs);
        QVERIFY(!window.isChecking());

        const auto report = window.report();
        QVERIFY(report);
        const auto& results = report->comparison.results;
        QVERIFY(!results.empty());
        QCOMPARE(window.heatmap()->cellCount(), results.size());

        // The marker sits on the first faulty tensor's cell.
        const auto marked = window.heatmap()->firstFaultMarkerResult();
        QVERIFY(marked);
        const TensorKey& key = results[*marked].key;
        QCOMPARE(key.toString(), expected.firstFaulty);

        // Go to first fault: the detail panel shows that tensor and every shard's ranks.
        QVERIFY(window.goToFirstFaultAction()->isEnabled());
        window.goToFirstFaultAction()->trigger();
        QCOMPARE(window.detail()->currentResult(), marked);
        QCOMPARE(window.heatmap()->selectedResult(), marked);
        QVERIFY(window.detail()->titleText().contains(key.name));
        const auto* shards =
            window.detail()->findChild<QTableWidget*>(QStringLiteral("shardTable"));
        QVERIFY(shards);
        const auto markedShards = report->shardsOf(*marked);
        QCOMPARE(static_cast<std::size_t>(shards->rowCount()), markedShards->size());
        const QStringList rankTexts = columnTexts(shards, 0);
        for (const ShardResult& shard : *markedShards) {
            QVERIFY(rankTexts.contains(formatRankList(shard.ranks)));
        }

        // The overview names the verdict and the root-cause module.
        QVERIFY2(window.overview()->verdictText().contains(QStringLiteral("Bug found")),
                 qPrintable(window.overview()->verdictText()));
        // "module (why)": the module's name is the first word
        QCOMPARE(window.overview()
                     ->finding(QStringLiteral("Root-cause module"))
                     .section(QLatin1Char(' '), 0, 0),
                 expected.rootCause);

        // A click on another cell drills down to that tensor.
        const std::size_t other = *marked == 0 ? 1 : 0;
        const auto center = window.heatmap()->cellCenter(other);
        QVERIFY(center);
        auto* plot = window.heatmap()->findChild<QWidget*>(QStringLiteral("heatmapPlot"));
        QVERIFY(plot);
        QTest::mouseClick(plot, Qt::LeftButton, {}, plot->mapFrom(window.heatmap(), *center));
        QCOMPARE(window.detail()->currentResult(), std::optional<std::size_t>(other));

        // Export as HTML.
        const QString path = out_.filePath(QStringLiteral("report.html"));
        QString error;
        QVERIFY2(window.exportReport(path, &error), qPrintable(error));
        QFile file(path);
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QByteArray html = file.readAll();
        QVERIFY(html.startsWith("<!DOCTYPE html>") || html.contains("<html"));
        QVERIFY(html.contains(expected.firstFaulty.toUtf8()));
        QVERIFY(html.contains(expected.rootCause.toUtf8()));

        // Export as PDF, the heatmap embedded: a real PDF of more than text alone.
        const QString pdfPath = out_.filePath(QStringLiteral("report.pdf"));
        QElapsedTimer pdfTime;
        pdfTime.start();
        QVERIFY2(window.exportReport(pdfPath, &error), qPrintable(error));
        qInfo("PDF export: %lld ms", static_cast<long long>(pdfTime.elapsed()));
        QFile pdf(pdfPath);
        QVERIFY(pdf.open(QIODevice::ReadOnly));
        const QByteArray pdfBytes = pdf.readAll();
        QVERIFY(pdfBytes.startsWith("%PDF"));
        QVERIFY2(pdfBytes.size() > 20000, QByteArray::number(pdfBytes.size()).constData());
        QVERIFY(pdfBytes.contains("/Image"));

        // The dialog's path: the same PDF written on a worker thread.
        const QString backgroundPath = out_.filePath(QStringLiteral("background.pdf"));
        QSignalSpy exported(&window, &MainWindow::exportFinished);
        window.exportReportInBackground(backgroundPath);
        QTRY_COMPARE_WITH_TIMEOUT(exported.count(), 1, 30000);
        QCOMPARE(exported.at(0).at(1).toString(), QString());
        QFile background(backgroundPath);
        QVERIFY(background.open(QIODevice::ReadOnly));
        QVERIFY(background.readAll().startsWith("%PDF"));

        // Copy summary: the same words as the Markdown summary, as plain text.
        QVERIFY(window.copySummaryAction()->isEnabled());
        window.copySummaryAction()->trigger();
        const QString copied = QGuiApplication::clipboard()->text();
        QVERIFY2(copied.startsWith(QStringLiteral("Bug found")), qPrintable(copied));
        for (const report_text::SummaryRow& row : report_text::summaryRows(*report)) {
            QVERIFY2(copied.contains(row.item + QStringLiteral(": ") + row.value),
                     qPrintable(row.item));
        }
        QVERIFY(copied.contains(QStringLiteral("First faulty tensor: ") + key.name));
        QVERIFY(copied.contains(QStringLiteral("Root-cause module: ") + expected.rootCause));
        QVERIFY(copied.contains(QStringLiteral("Faulty shard: ")));
    }

    // First fault -> Elements: histogram counts above the threshold, the image's hot pixels
    // inside the shards above tolerance; computed on a worker, "computing…" meanwhile. The
    // MoE sample's first fault is an activation split over the two data-parallel ranks.
    void firstFaultShowsElementErrors() {
        MainWindow window;
        window.show();
        QVERIFY(openAndWait(window, QStringLiteral("moe_expert_offset")));
        QSignalSpy profiled(window.profiles(), &ElementProfileController::finished);
        window.goToFirstFaultAction()->trigger();
        const auto first = window.report()->localization.firstFaulty;
        QVERIFY(first);
        QVERIFY(window.profiles()->isRunning() || profiled.count() == 1);
        QTRY_COMPARE_WITH_TIMEOUT(profiled.count(), 1, 60000);

        const TensorResult& result = window.report()->comparison.results[*first];
        const auto resultShards = window.report()->shardsOf(*first);
        const ElementErrorImage* image = window.detail()->elementImage();
        const auto profile = image->profile();
        QVERIFY(profile);
        QCOMPARE(profile->key, result.key);
        QCOMPARE(profile->histogram.total(), result.metrics.count);
        QVERIFY2(window.detail()->histogram()->countAboveThreshold() > 0,
                 qPrintable(window.detail()->histogram()->caption()));
        QVERIFY(window.detail()->histogram()->caption().contains(
            QStringLiteral("%1 elements").arg(result.metrics.count)));
        QCOMPARE(image->image().width(), profile->image.width);

        // Every shard above tolerance is drawn as faulty and holds hot pixels.
        std::set<QString> aboveTolerance;
        for (const ShardResult& shard : *resultShards) {
            if (!(shard.normalizedError <= 1)) {
                aboveTolerance.insert(shard.ranges.toString());
            }
        }
        QCOMPARE(image->faultyShards().size(), aboveTolerance.size());
        QVERIFY(!aboveTolerance.empty());
        QVERIFY(resultShards->size() > 1);
        for (const std::size_t s : image->faultyShards()) {
            QVERIFY(hotPixelsInside(*profile, profile->shards[s], result.threshold.value) > 0);
        }
        // The HTML report embeds both plots of the tensor shown.
        const QString htmlPath = out_.filePath(QStringLiteral("elements.html"));
        QString error;
        QVERIFY2(window.exportReport(htmlPath, &error), qPrintable(error));
        QFile html(htmlPath);
        QVERIFY(html.open(QIODevice::ReadOnly));
        const QByteArray htmlBytes = html.readAll();
        QVERIFY(htmlBytes.contains(
            QByteArray("<h2>Element errors of ").append(result.key.toString().toUtf8())));
        QCOMPARE(htmlBytes.count("src=\"data:image/png;base64,"), 2);
        // So does the PDF: the heatmap and the two plots are its three images.
        const QString pdfPath = out_.filePath(QStringLiteral("elements.pdf"));
        QVERIFY2(window.exportReport(pdfPath, &error), qPrintable(error));
        QFile pdf(pdfPath);
        QVERIFY(pdf.open(QIODevice::ReadOnly));
        QCOMPARE(pdf.readAll().count("/Subtype /Image"), 3);

        // The tooltip names the position and the shard under the pointer.
        window.detail()->tabs()->setCurrentIndex(1);
        QTRY_VERIFY(image->isVisible() && image->height() > 2 * image->fontMetrics().height());
        const QString tip = image->toolTipAt(QPoint(image->width() / 2, image->height() / 2));
        QVERIFY2(tip.contains(QStringLiteral("max element error")), qPrintable(tip));
        QVERIFY2(tip.contains(QStringLiteral("on ranks")), qPrintable(tip));
    }

    // Ranks x layer: reachable from the first fault, a cell per rank holding a piece, a click
    // opens that tensor with that rank selected; breadcrumbs and back/forward follow.
    void ranksByLayerAndNavigation() {
        MainWindow window;
        window.show();
        QVERIFY(openAndWait(window, QStringLiteral("row_bias_every_rank")));
        const auto report = window.report();
        QCOMPARE(window.breadcrumbs()->crumbs().size(), 1);
        QVERIFY(!window.backAction()->isEnabled());
        QCOMPARE(window.backAction()->shortcut(), QKeySequence(QKeySequence::Back));
        QCOMPARE(window.forwardAction()->shortcut(), QKeySequence(QKeySequence::Forward));

        window.goToFirstFaultAction()->trigger();
        const std::size_t first = *report->localization.firstFaulty;
        const TensorResult& faulty = report->comparison.results[first];
        QCOMPARE(window.location().result, std::optional<std::size_t>(first));
        QCOMPARE(window.breadcrumbs()->crumbs().last(), faulty.key.toString());
        QCOMPARE(window.breadcrumbs()->crumbs().at(1),
                 QStringLiteral("layer %1").arg(faulty.layer));

        window.showRanksAction()->trigger();
        QCOMPARE(window.views()->currentIndex(), 1);
        // Whose ranks the rows are, with both runs' layouts.
        const auto* caption = window.findChild<QLabel*>(QStringLiteral("ranksCaption"));
        QVERIFY(caption);
        QVERIFY2(
            caption->text().startsWith(
                QStringLiteral("rows: the distributed run's ranks (%1; the reference: one device)")
                    .arg(report_text::layoutSummary(report->distributed.manifest))),
            qPrintable(caption->text()));
        HeatmapView* ranks = window.rankHeatmap();
        std::set<int> layerRanks;
        std::size_t layerTensors = 0;
        for (std::size_t i = 0; i < report->comparison.results.size(); ++i) {
            if (report->comparison.results[i].layer == faulty.layer) {
                ++layerTensors;
                const auto shards = report->shardsOf(i);
                for (const ShardResult& shard : *shards) {
                    layerRanks.insert(shard.ranks.begin(), shard.ranks.end());
                }
            }
        }
        QCOMPARE(static_cast<std::size_t>(ranks->grid().rowLabels.size()), layerRanks.size());
        QCOMPARE(static_cast<std::size_t>(ranks->grid().columnLabels.size()), layerTensors);
        // The columns leave out the layer's module path, which the layer box already names.
        const QString layerPath = QStringLiteral("layers.%1.").arg(faulty.layer);
        for (const QString& label : ranks->grid().columnLabels) {
            QVERIFY2(!label.startsWith(layerPath) && label.contains(QStringLiteral(" it")),
                     qPrintable(label));
        }
        QCOMPARE(ranks->firstFaultMarkerResult(), std::optional<std::size_t>(first));
        // The cell of the faulty tensor on its last rank is its worst piece there.
        const int rank = *layerRanks.rbegin();
        double worst = 0;
        const auto shards = report->shardsOf(first);
        for (const ShardResult& shard : *shards) {
            if (std::find(shard.ranks.begin(), shard.ranks.end(), rank) != shard.ranks.end()) {
                worst = std::max(worst, shard.normalizedError);
            }
        }
        const auto cell = std::find_if(
            ranks->grid().cells.begin(), ranks->grid().cells.end(),
            [&](const ErrorGridCell& c) { return c.result == first && c.rank == rank; });
        QVERIFY(cell != ranks->grid().cells.end());
        QCOMPARE(cell->normalizedError, worst);

        // Click another tensor's cell on that rank: its detail opens with the rank selected.
        const auto other = std::find_if(
            ranks->grid().cells.begin(), ranks->grid().cells.end(),
            [&](const ErrorGridCell& c) { return c.result != first && c.rank == rank; });
        QVERIFY(other != ranks->grid().cells.end());
        const std::size_t otherResult = other->result;
        auto* plot = ranks->findChild<QWidget*>(QStringLiteral("heatmapPlot"));
        const auto center = ranks->cellCenter(otherResult, rank);
        QVERIFY(center);
        QTest::mouseClick(plot, Qt::LeftButton, {}, plot->mapFrom(ranks, *center));
        QCOMPARE(window.detail()->currentResult(), std::optional<std::size_t>(otherResult));
        QCOMPARE(window.detail()->selectedRank(), std::optional<int>(rank));
        QCOMPARE(window.detail()->elementImage()->selectedRank(), std::optional<int>(rank));
        QCOMPARE(window.breadcrumbs()->crumbs().last(), QStringLiteral("rank %1").arg(rank));

        // Back: the ranks view of the first fault, then the first fault on the layers view.
        QVERIFY(window.backAction()->isEnabled());
        window.backAction()->trigger();
        QCOMPARE(window.location().result, std::optional<std::size_t>(first));
        QCOMPARE(window.views()->currentIndex(), 1);
        window.backAction()->trigger();
        QCOMPARE(window.views()->currentIndex(), 0);
        QCOMPARE(window.detail()->currentResult(), std::optional<std::size_t>(first));
        window.forwardAction()->trigger();
        window.forwardAction()->trigger();
        QCOMPARE(window.detail()->currentResult(), std::optional<std::size_t>(otherResult));
        QVERIFY(!window.forwardAction()->isEnabled());

        // The first crumb goes up to the run: no tensor shown, the layer heatmap in front.
        Q_EMIT window.breadcrumbs()->crumbActivated(0);
        QVERIFY(!window.location().result);
        QCOMPARE(window.views()->currentIndex(), 0);
        QVERIFY(!window.detail()->currentResult());
        window.backAction()->trigger();
        QCOMPARE(window.detail()->currentResult(), std::optional<std::size_t>(otherResult));

        // A click on the Ranks grid of the Summary tab picks that rank of the tensor shown.
        window.detail()->tabs()->setCurrentIndex(0);
        RankGrid* grid = window.detail()->rankGrid();
        QTRY_VERIFY(grid->isVisible() && grid->height() > 20);
        const int firstRank = report->shardsOf(otherResult)->front().ranks.front();
        QPoint cellPoint;
        for (int y = 0; y < grid->height() && cellPoint.isNull(); y += 2) {
            for (int x = 0; x < grid->width(); x += 2) {
                if (grid->rankAt(QPoint(x, y)) == firstRank) {
                    cellPoint = QPoint(x, y);
                    break;
                }
            }
        }
        QVERIFY(!cellPoint.isNull());
        QTest::mouseClick(grid, Qt::LeftButton, {}, cellPoint);
        QCOMPARE(window.location().rank, std::optional<int>(firstRank));
        QCOMPARE(grid->selectedRank(), std::optional<int>(firstRank));
        QCOMPARE(window.detail()->currentResult(), std::optional<std::size_t>(otherResult));

        // Keyboard: the layer heatmap walks cells with arrows and opens one with Enter.
        window.views()->setCurrentIndex(0);
        HeatmapView* layers = window.heatmap();
        layers->selectResult(first);
        QTest::keyClick(layers, Qt::Key_Right);
        const auto walked = layers->selectedResult();
        QVERIFY(walked);
        QTest::keyClick(layers, Qt::Key_Return);
        QCOMPARE(window.detail()->currentResult(), walked);
    }

    void filtersNarrowTheHeatmap() {
        MainWindow window;
        window.show();
        QVERIFY(openAndWait(window, QStringLiteral("row_bias_every_rank")));
        const auto report = window.report();
        const auto& results = report->comparison.results;
        HeatmapView* heatmap = window.heatmap();
        const std::size_t all = heatmap->cellCount();
        QCOMPARE(all, results.size());

        const auto countShown = [&](const HeatmapFilter& filter) {
            return static_cast<std::size_t>(
                std::count_if(results.begin(), results.end(),
                              [&](const TensorResult& r) { return filter.shows(r); }));
        };
        // Module substring.
        const HeatmapFilter fc2(QStringLiteral("fc2"), std::nullopt, std::nullopt);
        window.filterBar()->setFilter(fc2);
        QVERIFY(heatmap->cellCount() < all);
        QCOMPARE(heatmap->cellCount(), countShown(fc2));
        for (const ErrorGridCell& cell : heatmap->grid().cells) {
            QVERIFY(results[cell.result].key.module().contains(QStringLiteral("fc2")));
        }
        // Glob and tensor kind.
        const HeatmapFilter glob(QStringLiteral("layers.?.mlp.fc*"), TensorKind::ForwardOutput,
                                 std::nullopt);
        window.filterBar()->setFilter(glob);
        QVERIFY(heatmap->cellCount() > 0);
        QCOMPARE(heatmap->cellCount(), countShown(glob));
        for (const ErrorGridCell& cell : heatmap->grid().cells) {
            QCOMPARE(results[cell.result].key.kind, TensorKind::ForwardOutput);
        }
        // An iteration nobody captured shows nothing.
        const HeatmapFilter none(QStringLiteral("no-such-module"), std::nullopt, std::nullopt);
        window.filterBar()->setFilter(none);
        QCOMPARE(heatmap->cellCount(), std::size_t{0});

        // Go to first fault clears a filter that hides it.
        window.goToFirstFaultAction()->trigger();
        QCOMPARE(heatmap->cellCount(), all);
        QCOMPARE(heatmap->firstFaultMarkerResult(), report->localization.firstFaulty);
        QCOMPARE(heatmap->selectedResult(), report->localization.firstFaulty);

        // Ctrl+L focuses the module field.
        window.activateWindow();
        QVERIFY(QTest::qWaitForWindowActive(&window));
        QCOMPARE(window.focusFilterAction()->shortcut(), QKeySequence(Qt::CTRL | Qt::Key_L));
        window.focusFilterAction()->trigger();
        QVERIFY(QApplication::focusWidget());
        QCOMPARE(QApplication::focusWidget()->objectName(), QStringLiteral("moduleFilter"));

        // The filter is a setting: the next window starts with it.
        window.filterBar()->setFilter(fc2);
        window.close();
        MainWindow next;
        QVERIFY(openAndWait(next, QStringLiteral("row_bias_every_rank")));
        QCOMPARE(next.filterBar()->filter().module(), QStringLiteral("fc2"));
        QCOMPARE(next.heatmap()->cellCount(), countShown(fc2));
        next.filterBar()->setFilter(HeatmapFilter());
        next.close();
    }

    // A dark palette reaches the plots (QCustomPlot does not follow it by itself).
    void plotsFollowADarkPalette() {
        MainWindow window;
        // A complete dark palette, as a dark desktop theme hands to Qt.
        QPalette dark;
        const QColor background(0x20, 0x20, 0x20), text(0xf0, 0xf0, 0xf0);
        for (const auto role : {QPalette::Window, QPalette::Button, QPalette::ToolTipBase}) {
            dark.setColor(role, background);
        }
        for (const auto role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText,
                                QPalette::ToolTipText, QPalette::BrightText}) {
            dark.setColor(role, text);
        }
        dark.setColor(QPalette::Base, QColor(0x18, 0x18, 0x18));
        dark.setColor(QPalette::AlternateBase, QColor(0x28, 0x28, 0x28));
        dark.setColor(QPalette::PlaceholderText, QColor(0x90, 0x90, 0x90));
        dark.setColor(QPalette::Light, QColor(0x40, 0x40, 0x40));
        dark.setColor(QPalette::Midlight, QColor(0x30, 0x30, 0x30));
        dark.setColor(QPalette::Mid, QColor(0x28, 0x28, 0x28));
        dark.setColor(QPalette::Dark, QColor(0x10, 0x10, 0x10));
        dark.setColor(QPalette::Shadow, Qt::black);
        dark.setColor(QPalette::Highlight, QColor(0x2a, 0x82, 0xda));
        dark.setColor(QPalette::HighlightedText, Qt::white);
        dark.setColor(QPalette::Link, QColor(0x6c, 0xb4, 0xff));
        window.setPalette(dark);
        window.show();
        QVERIFY(openAndWait(window, QStringLiteral("row_bias_every_rank")));
        window.goToFirstFaultAction()->trigger();
        QTRY_VERIFY_WITH_TIMEOUT(window.detail()->elementImage()->profile(), 60000);
        window.detail()->tabs()->setCurrentIndex(1);
        for (QWidget* plot : {window.heatmap()->findChild<QWidget*>(QStringLiteral("heatmapPlot")),
                              window.detail()->histogram()->findChild<QWidget*>(
                                  QStringLiteral("errorHistogramPlot"))}) {
            QVERIFY(plot);
            const QImage image = plot->grab().toImage();
            QCOMPARE(image.pixelColor(1, 1), QColor(0x20, 0x20, 0x20));
        }
    }

    // The SP sample runs on a 2 x 2 mesh (pp x tp): its first fault, a gradient of the first
    // stage, is held by two of the four ranks.
    // A check and a run checked before hold their results without shards and rank sequence
    // numbers: only the tensor the localization looked into holds its shards, the rest is read
    // from the results store when shown and equals what a comparison held in memory gives; the
    // stored run's localization, ranks x layer view and exported report equal the check's.
    void storedRunReadsDetailsOnDemand() {
        QTemporaryDir cache;
        const QByteArray sharedCache = qgetenv("TTRACE_CACHE_DIR");
        qputenv("TTRACE_CACHE_DIR", cache.path().toUtf8());
        const auto restore = qScopeGuard([&] { qputenv("TTRACE_CACHE_DIR", sharedCache); });
        MainWindow checked;
        QVERIFY(openAndWait(checked, QStringLiteral("row_bias_every_rank")));
        MainWindow stored;
        QVERIFY(openAndWait(stored, QStringLiteral("row_bias_every_rank")));
        const auto a = checked.report();
        const auto b = stored.report();
        QVERIFY(!a->fromCache && a->details);
        QVERIFY(b->fromCache && b->details);
        const TraceFolders folders = sample(QStringLiteral("row_bias_every_rank"));
        const TraceSet pert = openTraceSet(folders.perturbed);
        const ComparisonOutput inMemory = compareTraceSets(
            openTraceSet(folders.distributed), openTraceSet(folders.reference), &pert, {});
        const auto target = b->localization.shardTensor();
        QVERIFY(target);
        QCOMPARE(b->comparison.results.size(), inMemory.results.size());
        QCOMPARE(a->comparison.results.size(), inMemory.results.size());
        for (std::size_t i = 0; i < b->comparison.results.size(); ++i) {
            for (const auto& report : {a, b}) {
                QCOMPARE(report->comparison.results[i].key, inMemory.results[i].key);
                QCOMPARE(report->comparison.results[i].shards.empty(), i != *target);
                QVERIFY(report->comparison.results[i].rankSeq.empty());
                QCOMPARE(*report->rankSeqOf(i), inMemory.results[i].rankSeq);
            }
            const auto& expected = &inMemory.results[i].shards;
            const auto read = b->shardsOf(i);
            QVERIFY(!expected->empty());
            QCOMPARE(read->size(), expected->size());
            for (std::size_t s = 0; s < read->size(); ++s) {
                QCOMPARE((*read)[s].ranks, (*expected)[s].ranks);
                QCOMPARE((*read)[s].ranges.toString(), (*expected)[s].ranges.toString());
                QCOMPARE((*read)[s].normalizedError, (*expected)[s].normalizedError);
            }
        }

        QCOMPARE(b->localization.perRank.size(), a->localization.perRank.size());
        for (std::size_t r = 0; r < b->localization.perRank.size(); ++r) {
            QCOMPARE(b->localization.perRank[r].rank, a->localization.perRank[r].rank);
            QCOMPARE(b->localization.perRank[r].result, a->localization.perRank[r].result);
            QCOMPARE(b->localization.perRank[r].seq, a->localization.perRank[r].seq);
        }
        QVERIFY(!b->localization.perRank.empty());
        QVERIFY(b->localization.faultyShard && a->localization.faultyShard);
        QCOMPARE(b->localization.faultyShard->ranks, a->localization.faultyShard->ranks);
        const int layer = b->comparison.results[*b->localization.firstFaulty].layer;
        const ErrorGrid fromCheck = rankLayerGrid(*a, layer);
        const ErrorGrid fromStore = rankLayerGrid(*b, layer);
        QCOMPARE(fromStore.rowLabels, fromCheck.rowLabels);
        QCOMPARE(fromStore.columnLabels, fromCheck.columnLabels);
        QCOMPARE(fromStore.cells.size(), fromCheck.cells.size());
        QVERIFY(!fromStore.cells.empty());
        for (std::size_t c = 0; c < fromStore.cells.size(); ++c) {
            QCOMPARE(fromStore.cells[c].row, fromCheck.cells[c].row);
            QCOMPARE(fromStore.cells[c].column, fromCheck.cells[c].column);
            QCOMPARE(fromStore.cells[c].normalizedError, fromCheck.cells[c].normalizedError);
        }

        QString error;
        const QString checkedJson = out_.filePath(QStringLiteral("checked.json"));
        const QString storedJson = out_.filePath(QStringLiteral("stored.json"));
        QVERIFY2(checked.exportReport(checkedJson, &error), qPrintable(error));
        QVERIFY2(stored.exportReport(storedJson, &error), qPrintable(error));
        const QJsonObject expectedReport = test::comparableReport(checkedJson);
        QVERIFY(expectedReport.contains(QStringLiteral("tensors")));
        QVERIFY(test::comparableReport(storedJson) == expectedReport);
    }

    void rankGridShowsFirstFaultOnTheMesh() {
        MainWindow window;
        window.show();
        QSignalSpy shown(&window, &MainWindow::reportShown);
        window.openTraces(sample(QStringLiteral("sp_norm_grad_no_allreduce")));
        QTRY_VERIFY_WITH_TIMEOUT(shown.count() == 1, kCheckTimeoutMs);
        window.goToFirstFaultAction()->trigger();
        const auto report = window.report();
        const auto first = report->localization.firstFaulty;
        QVERIFY(first);
        const Manifest& manifest = report->distributed.manifest;

        const RankGrid* grid = window.detail()->rankGrid();
        QVERIFY(grid);
        QCOMPARE(grid->cellCount(), manifest.worldSize);
        std::set<int> holding;
        const auto shards = report->shardsOf(*first);
        for (const ShardResult& shard : *shards) {
            holding.insert(shard.ranks.begin(), shard.ranks.end());
        }
        QVERIFY(!holding.empty());
        QVERIFY(static_cast<int>(holding.size()) < manifest.worldSize);
        for (int rank = 0; rank < manifest.worldSize; ++rank) {
            const bool holds = holding.count(rank) > 0;
            QCOMPARE(grid->cellColor(rank) != RankGrid::kNoData, holds);
            QVERIFY(grid->cellToolTip(rank).startsWith(QStringLiteral("rank %1").arg(rank)));
        }
        const auto& faulty = report->localization.faultyShard;
        if (faulty && faulty->result == *first && faulty->standsOut) {
            for (const int rank : faulty->ranks) {
                QVERIFY(grid->isOutlined(rank));
            }
        }
        // Coordinates name every mesh axis.
        if (!manifest.meshAxes.empty()) {
            QVERIFY2(grid->cellToolTip(0).contains(manifest.meshAxes.back() + QLatin1Char('0')),
                     qPrintable(grid->cellToolTip(0)));
        }
    }

    void cleanSampleHasNoBug() {
        MainWindow window;
        QSignalSpy shown(&window, &MainWindow::reportShown);
        window.openTraces(sample(QStringLiteral("clean")));
        QTRY_VERIFY_WITH_TIMEOUT(shown.count() == 1, kCheckTimeoutMs);
        QVERIFY2(window.overview()->verdictText().contains(QStringLiteral("No bug")),
                 qPrintable(window.overview()->verdictText()));
        QVERIFY(!window.heatmap()->firstFaultMarkerResult());
        QVERIFY(!window.goToFirstFaultAction()->isEnabled());
        QCOMPARE(window.heatmap()->cellCount(), window.report()->comparison.results.size());
    }

    // Edit > Compare on: a window whose build offers no CUDA says why in the menu and checks on
    // the CPU under Auto; CUDA chosen anyway starts nothing and says why.
    void backendChoiceSaysWhyNotCuda() {
        // A cache of its own: results from the cache keep the name of the backend that
        // computed them.
        QTemporaryDir cache;
        const QByteArray sharedCache = qgetenv("TTRACE_CACHE_DIR");
        qputenv("TTRACE_CACHE_DIR", cache.path().toUtf8());
        const auto restore = qScopeGuard([&] { qputenv("TTRACE_CACHE_DIR", sharedCache); });
        MainWindow window;
        auto* menu = window.backendMenu();
        QVERIFY(menu);
        QCOMPARE(menu->kind(), BackendKind::Auto);
        QSignalSpy shown(&window, &MainWindow::reportShown);
        window.openTraces(sample(QStringLiteral("clean")));
        QTRY_VERIFY_WITH_TIMEOUT(shown.count() == 1, kCheckTimeoutMs);
        const auto* status = window.findChild<QLabel*>(QStringLiteral("stage"));
        QVERIFY2(status->text().endsWith(QStringLiteral(
                     "backend: CPU (CUDA not used: this build of ttrace has no CUDA backend)")),
                 qPrintable(status->text()));
        Q_EMIT menu->aboutToShow();
        QAction* cuda = menu->actions().at(2);
        QCOMPARE(cuda->text(),
                 QStringLiteral("CUDA: the CUDA backend cannot run: this build of ttrace has no "
                                "CUDA backend"));
        QVERIFY(!cuda->isEnabled());

        menu->setKind(BackendKind::Cuda);
        window.openTraces(sample(QStringLiteral("clean")));
        QVERIFY(!window.isChecking());
        QVERIFY2(status->text().startsWith(QStringLiteral(
                     "Not checked: the CUDA backend cannot run: this build of ttrace has no CUDA")),
                 qPrintable(status->text()));
        menu->setKind(BackendKind::Cpu);
        window.openTraces(sample(QStringLiteral("row_bias_every_rank")));
        QTRY_VERIFY_WITH_TIMEOUT(shown.count() == 2, kCheckTimeoutMs);
        QVERIFY2(status->text().endsWith(QStringLiteral("backend: CPU")),
                 qPrintable(status->text()));
    }

    void supersededCheckIsDropped() {
        MainWindow window;
        QSignalSpy shown(&window, &MainWindow::reportShown);
        window.openTraces(sample(QStringLiteral("row_bias_every_rank")));
        window.openTraces(sample(QStringLiteral("clean")));
        QTRY_VERIFY_WITH_TIMEOUT(shown.count() == 1, kCheckTimeoutMs);
        QTest::qWait(300);  // a late result of the first check would arrive by now
        QCOMPARE(shown.count(), 1);
        QVERIFY(window.overview()->verdictText().contains(QStringLiteral("No bug")));
    }

    // A check that stopped partway (test hook: the process fails after its first tensor)
    // leaves its finished tensors for the next: the window says it resumes, and shows the
    // complete run.
    void stoppedCheckResumes() {
        QTemporaryDir cache;
        const QByteArray sharedCache = qgetenv("TTRACE_CACHE_DIR");
        qputenv("TTRACE_CACHE_DIR", cache.path().toUtf8());
        const auto restore = qScopeGuard([&] {
            qputenv("TTRACE_CACHE_DIR", sharedCache);
            qunsetenv(kFailProcessVariable);
        });
        qputenv(kFailProcessVariable, "0");
        MainWindow stopped;
        QVERIFY(openAndWait(stopped, QStringLiteral("row_bias_every_rank")));
        QVERIFY(!stopped.report()->comparison.complete());
        qunsetenv(kFailProcessVariable);

        MainWindow resumed;
        QSignalSpy resuming(resumed.controller(), &CheckController::resuming);
        QVERIFY(openAndWait(resumed, QStringLiteral("row_bias_every_rank")));
        QCOMPARE(resuming.count(), 1);
        const qint64 reused = resuming.at(0).at(0).toLongLong();
        const qint64 total = resuming.at(0).at(1).toLongLong();
        QVERIFY(reused >= 1 && reused < total);
        QVERIFY(resumed.report()->comparison.complete());
        QCOMPARE(static_cast<qint64>(resumed.report()->comparison.results.size()), total);
    }

    void cancelLeavesWindowUsable() {
        MainWindow window;
        window.show();
        QSignalSpy shown(&window, &MainWindow::reportShown);
        QSignalSpy cancelled(window.controller(), &CheckController::cancelled);
        window.openTraces(sample(QStringLiteral("sp_norm_grad_no_allreduce")));
        QVERIFY(window.isChecking());
        window.cancelCheck();
        QVERIFY(!window.isChecking());
        QCOMPARE(cancelled.count(), 1);
        QVERIFY(window.overview()->verdictText().contains(QStringLiteral("cancelled")));
        QTest::qWait(300);
        QCOMPARE(shown.count(), 0);  // the cancelled check's result never shows

        window.openTraces(sample(QStringLiteral("clean")));
        QTRY_VERIFY_WITH_TIMEOUT(shown.count() == 1, kCheckTimeoutMs);
        QVERIFY(window.overview()->verdictText().contains(QStringLiteral("No bug")));
    }

    // What the window says when the check did not see everything: one rank file
    // unreadable, a pipeline stage that captured nothing. Never a blue "No bug found": the
    // verdict box is orange and names what was left out, and the findings table and the
    // status bar say the same as the CLI.
    void partialChecksAreNeverAPlainNoBug_data() {
        QTest::addColumn<QStringList>("folders");
        QTest::addColumn<QString>("verdict");
        QTest::addColumn<QString>("status");
        QTest::newRow("unreadable rank file")
            << QStringList{test::fixture(QStringLiteral("bad/truncated")),
                           test::fixture(QStringLiteral("bad/ref")), QString()}
            << QStringLiteral(
                   "No bug in what was compared: 2 of 6 reference tensors compared; "
                   "4 not comparable. 2 errors in the input (truncated/rank00001.h5, "
                   "bad/truncated)")
            << QStringLiteral("2 of 6 reference tensors compared; 4 not comparable; compared ");
        QTest::newRow("missing pipeline stage")
            << QStringList{test::fixture(QStringLiteral("bad/stage_missing")),
                           test::fixture(QStringLiteral("combined"), QStringLiteral("ref")),
                           test::fixture(QStringLiteral("combined"), QStringLiteral("pert"))}
            << QStringLiteral(
                   "No bug in what was compared: 44 of 88 reference tensors "
                   "compared; 44 not captured.")
            << QStringLiteral("44 of 88 reference tensors compared; 44 not captured; compared ");
    }

    void partialChecksAreNeverAPlainNoBug() {
        QFETCH(QStringList, folders);
        QFETCH(QString, verdict);
        QFETCH(QString, status);
        MainWindow window;
        QSignalSpy shown(&window, &MainWindow::reportShown);
        window.openTraces({folders[0], folders[1], folders[2]});
        QTRY_VERIFY_WITH_TIMEOUT(shown.count() == 1, kCheckTimeoutMs);
        QVERIFY2(window.overview()->verdictText().startsWith(verdict),
                 qPrintable(window.overview()->verdictText()));
        const auto* box = window.findChild<QLabel*>(QStringLiteral("verdict"));
        QVERIFY(box && box->styleSheet().contains(QStringLiteral("#d95f0e")));  // orange
        const auto* findings = window.findChild<QTableWidget*>(QStringLiteral("summary"));
        QVERIFY(findings && findings->rowCount() > 1);
        QCOMPARE(findings->item(0, 1)->text(),
                 QStringLiteral("No bug in the tensors compared (%1 of %2 tensors faulty)")
                     .arg(0)
                     .arg(window.report()->comparison.results.size()));
        QCOMPARE(findings->item(1, 0)->text(), QStringLiteral("Coverage"));
        const auto* statusBar = window.findChild<QLabel*>(QStringLiteral("stage"));
        QVERIFY(statusBar);
        QVERIFY2(statusBar->text().startsWith(status), qPrintable(statusBar->text()));
    }

    // A window opened beside a CLI check of the same traces sharing its cache waits for it
    // (saying so) and then shows the results the CLI stored, with a warning naming the wait.
    void windowBesideACliCheckWaitsForIt() {
        QTemporaryDir cache;
        const QByteArray sharedCache = qgetenv("TTRACE_CACHE_DIR");
        qputenv("TTRACE_CACHE_DIR", cache.path().toUtf8());
        const auto restore = qScopeGuard([&] { qputenv("TTRACE_CACHE_DIR", sharedCache); });
        const TraceFolders folders = sample(QStringLiteral("clean"));
        QProcess cli;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("TTRACE_TEST_HOLD_RUN_LOCK_MS"), QStringLiteral("2000"));
        cli.setProcessEnvironment(env);
        cli.start(qEnvironmentVariable("TTRACE_CHECK"),
                  {QStringLiteral("--cache-dir"), cache.path(), folders.distributed,
                   folders.reference, QStringLiteral("--perturbed"), folders.perturbed});
        QTRY_VERIFY_WITH_TIMEOUT(!QDir(cache.filePath(QStringLiteral("locks")))
                                      .entryList({QStringLiteral("*.lock")})
                                      .isEmpty(),
                                 60000);
        MainWindow window;
        QSignalSpy shown(&window, &MainWindow::reportShown);
        QSignalSpy progress(window.controller(), &CheckController::progressChanged);
        window.openTraces(folders);
        QTRY_VERIFY_WITH_TIMEOUT(shown.count() == 1, kCheckTimeoutMs);
        QVERIFY(cli.state() == QProcess::NotRunning || cli.waitForFinished(300000));
        QCOMPARE(cli.exitCode(), 0);
        bool sawWaiting = false;
        for (const auto& args : progress) {
            sawWaiting = sawWaiting || args.at(0).toString() == QStringLiteral("waiting");
        }
        QVERIFY(sawWaiting);
        QVERIFY(window.report()->fromCache);
        const auto& diagnostics = window.report()->diagnostics;
        QVERIFY(std::any_of(diagnostics.begin(), diagnostics.end(), [](const Diagnostic& d) {
            return d.message.contains(QStringLiteral("for another check of the same traces"));
        }));
        QVERIFY2(window.overview()->verdictText().startsWith(QStringLiteral("No bug found")),
                 qPrintable(window.overview()->verdictText()));
    }

    // The bad-input corpus: whatever is wrong with the input, the window never shows a blue
    // "No bug found".
    void badInputsAreNeverANoBug_data() {
        QTest::addColumn<QString>("name");
        for (const char* name : {"missing_rank", "extra_rank", "rank_mismatch", "gap", "overlap",
                                 "shape_mismatch", "truncated", "corrupt", "dtype_storage",
                                 "missing_attr", "dtype_mixed", "newer_version", "no_manifest"}) {
            QTest::newRow(name) << QString::fromLatin1(name);
        }
    }

    void badInputsAreNeverANoBug() {
        QFETCH(QString, name);
        MainWindow window;
        QSignalSpy shown(&window, &MainWindow::reportShown);
        window.openTraces({test::fixture(QStringLiteral("bad/") + name),
                           test::fixture(QStringLiteral("bad/ref")), QString()});
        QTRY_VERIFY_WITH_TIMEOUT(shown.count() == 1, kCheckTimeoutMs);
        const QString verdict = window.overview()->verdictText();
        QVERIFY2(!verdict.startsWith(QStringLiteral("No bug found")), qPrintable(verdict));
        const auto* box = window.findChild<QLabel*>(QStringLiteral("verdict"));
        QVERIFY2(box && !box->styleSheet().contains(QStringLiteral("#2166ac")),  // not blue
                 qPrintable(verdict));
        const auto* findings = window.findChild<QTableWidget*>(QStringLiteral("summary"));
        QVERIFY(findings);
        for (int row = 0; row < findings->rowCount(); ++row) {
            QVERIFY(!findings->item(row, 1)->text().startsWith(QStringLiteral("No bug found")));
        }
    }

    // A rank file that crashes libhdf5, and one that hangs it: the window stays up, says what
    // happened in which file, and shows the rest of the check, never as "No bug found".
    void survivesFilesThatCrashOrHangHdf5_data() {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QString>("says");
        QTest::addColumn<int>("compared");
        // The signal varies: a segmentation fault in a release build, an abort where
        // AddressSanitizer catches the damage first.
        QTest::newRow("segfault") << "segv_ranges"
                                  << ") while reading the attributes of dataset /tensors/000100"
                                  << 244;
        QTest::newRow("hang") << "hang_global_heap"
                              << "stopped responding for 2 s while reading the attributes of "
                                 "dataset /tensors/000094"
                              << 240;
    }

    void survivesFilesThatCrashOrHangHdf5() {
        QFETCH(QString, name);
        QFETCH(QString, says);
        QFETCH(int, compared);
        Hdf5Isolation quick;
        quick.workerPath = test::hdf5Worker();
        quick.limits.stallSeconds = 2;
        isolateHdf5(quick);
        const auto asTheProgram = qScopeGuard([] { isolateHdf5ForThisProgram(); });
        MainWindow window;
        QSignalSpy shown(&window, &MainWindow::reportShown);
        window.openTraces({test::fixture(QStringLiteral("bad/hdf5_") + name),
                           test::sourceDir() + QStringLiteral("/resources/samples/clean/ref"),
                           QString()});
        QTRY_VERIFY_WITH_TIMEOUT(shown.count() == 1, kCheckTimeoutMs);
        const QString verdict = window.overview()->verdictText();
        QVERIFY2(
            verdict.contains(QStringLiteral("%1 of 356 reference tensors compared").arg(compared)),
            qPrintable(verdict));
        QVERIFY2(!verdict.startsWith(QStringLiteral("No bug found")), qPrintable(verdict));
        const DiagnosticsModel* model = window.overview()->diagnosticsModel();
        bool said = false;
        for (int row = 0; row < model->rowCount(); ++row) {
            const QString message =
                model->index(row, DiagnosticsModel::MessageColumn).data().toString();
            said = said || (message.contains(QStringLiteral("the HDF5 library ")) &&
                            message.contains(says));
        }
        QVERIFY2(said, qPrintable(says));
    }

    void unreadableFoldersShowDiagnostics() {
        MainWindow window;
        QSignalSpy shown(&window, &MainWindow::reportShown);
        window.openTraces({out_.filePath(QStringLiteral("missing-dist")),
                           out_.filePath(QStringLiteral("missing-ref")), QString()});
        QTRY_VERIFY_WITH_TIMEOUT(shown.count() == 1, kCheckTimeoutMs);
        QVERIFY2(window.overview()->verdictText().contains(QStringLiteral("could not be compared")),
                 qPrintable(window.overview()->verdictText()));
        DiagnosticsModel* model = window.overview()->diagnosticsModel();
        QAbstractItemModelTester tester(model,
                                        QAbstractItemModelTester::FailureReportingMode::QtTest);
        QVERIFY(model->rowCount() > 0);
        QCOMPARE(model->index(0, DiagnosticsModel::SeverityColumn).data().toString(),
                 QStringLiteral("error"));
        QVERIFY(model->index(0, DiagnosticsModel::LocationColumn)
                    .data()
                    .toString()
                    .contains(QStringLiteral("missing-")));
        // The message, not the long folder path, gets the room: a screenshot says what is wrong.
        window.resize(1700, 900);
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        window.findChild<QSplitter*>(QStringLiteral("mainSplitter"))->setSizes({500, 700, 500});
        QCoreApplication::processEvents();
        const auto* view = window.findChild<QTableView*>(QStringLiteral("diagnostics"));
        QVERIFY(view);
        const int width = view->viewport()->width();
        QVERIFY2(view->columnWidth(DiagnosticsModel::LocationColumn) <= width / 4,
                 qPrintable(QString::number(view->columnWidth(DiagnosticsModel::LocationColumn))));
        QVERIFY2(view->columnWidth(DiagnosticsModel::MessageColumn) >= width / 3,
                 qPrintable(QString::number(view->columnWidth(DiagnosticsModel::MessageColumn))));
        QCOMPARE(window.heatmap()->cellCount(), std::size_t{0});
        // Nothing compared: no "No bug found (0 of 0 tensors faulty)", no "on the  backend".
        const auto* findings = window.findChild<QTableWidget*>(QStringLiteral("summary"));
        QVERIFY(findings && findings->rowCount() > 0);
        QCOMPARE(findings->item(0, 1)->text(),
                 QStringLiteral("Nothing compared (no tensor compared)"));
        QCOMPARE(window.findChild<QLabel*>(QStringLiteral("stage"))->text(),
                 QStringLiteral("No tensor compared: the verdict and the diagnostics say why"));
    }

    // The ranks x layer columns name tensors relative to the layer, the layer's own module
    // whole; rows name only the mesh axes that have more than one coordinate.
    void labelsWithinALayer() {
        const auto key = [](const char* name, TensorKind kind) {
            TensorKey k;
            k.name = QString::fromLatin1(name);
            k.kind = kind;
            k.microBatch = 1;
            return k;
        };
        const TensorKey layer = key("layers.1", TensorKind::ForwardInput);
        const TensorKey fc1 = key("layers.1.mlp.fc1", TensorKind::ForwardOutput);
        const TensorKey norm = key("layers.1.norm1.weight", TensorKind::ParamGrad);
        const QStringList labels = labelsWithinLayer({&layer, &fc1, &norm});
        QCOMPARE(labels.size(), 3);
        QCOMPARE(labels[0], layer.toString());
        QCOMPARE(labels[1], fc1.toString().mid(9));  // without "layers.1."
        QVERIFY(labels[1].startsWith(QStringLiteral("mlp.fc1 forward_output")));
        QVERIFY(labels[2].startsWith(QStringLiteral("norm1.weight param_grad")));
        // One tensor alone keeps its whole name.
        QCOMPARE(labelsWithinLayer({&fc1}), QStringList{fc1.toString()});

        Manifest manifest;
        manifest.meshAxes = {QStringLiteral("pp"), QStringLiteral("cp"), QStringLiteral("tp")};
        manifest.meshShape = {2, 1, 2};
        RankEntry entry;
        entry.rank = 3;
        entry.coords = {1, 0, 1};
        manifest.ranks = {entry};
        QCOMPARE(meshCoordinates(manifest, 3), QStringLiteral("pp1 tp1"));
    }

    // A blind tensor's cell is hatched: its normalized error is small because its threshold
    // is huge, and a dark blue cell alone would read as checked.
    void blindCellsAreHatched() {
        auto report = std::make_shared<CheckReport>(test::makeReport(false));
        report->comparison.results[1].threshold.value = 1.5;
        HeatmapView view;
        view.setReport(report);
        view.setGrid(layerErrorGrid(*report, buildHeatmapGrid(report->comparison.results)));
        QCOMPARE(view.blindMarkResults(), std::vector<std::size_t>{1});
        report->comparison.results[1].threshold.value = 0.5;
        view.setGrid(layerErrorGrid(*report, buildHeatmapGrid(report->comparison.results)));
        QVERIFY(view.blindMarkResults().empty());
    }

    // A forward recomputed differently is listed with the replica mismatches, by its rank.
    void recomputationMismatchIsListed() {
        auto report = std::make_shared<CheckReport>(test::makeReport(true));
        TensorResult& recomputed = report->comparison.results[1];
        recomputed.recomputationMismatches = {{recomputed.shards[0].ranges, 5, 3, 64, false}};
        TensorDetailPanel panel;
        panel.setReport(report);
        panel.showResult(1);
        const auto* table = panel.findChild<QTableWidget*>(QStringLiteral("replicaMismatches"));
        QVERIFY(table);
        QCOMPARE(table->rowCount(), 1);
        QCOMPARE(table->item(0, 0)->text(), QStringLiteral("5 first forward"));
        QCOMPARE(table->item(0, 1)->text(), QStringLiteral("5 recomputed"));
        QCOMPARE(table->item(0, 3)->text(), QStringLiteral("3 of 64"));
        QVERIFY(!table->isHidden());
    }

    void fp8ScalesRowSaysWhatTheScaleCheckFound() {
        // The tensor panel's "fp8 scales" row: for a TP shard quantized with its own amax (half
        // the tensor's) the mismatch on its rank, as the findings say it; for right shards the
        // largest difference against its tolerance (bf16 round-off: the perturbed reference
        // carries the reference's scale).
        for (const bool faulty : {true, false}) {
            const test::Fp8Traces traces(1.0, faulty ? test::kHalfScale : test::kRightScale);
            QString text;
            firstTensorStatistic(TraceFolders{traces.dist, traces.ref, traces.pert},
                                 QStringLiteral("fp8 scales"), text);
            if (QTest::currentTestFailed()) {
                return;
            }
            QVERIFY2(text.startsWith(QStringLiteral("per tensor (the reference's); ")),
                     qPrintable(text));
            if (faulty) {
                QVERIFY2(text.contains(QStringLiteral("on rank 1 is 0.5x the reference's")),
                         qPrintable(text));
            } else {
                QVERIFY2(text.endsWith(QStringLiteral("largest difference 0 of tolerance 0.0322")),
                         qPrintable(text));
            }
        }
    }

    void mxfp8ScalesRowNamesTheRecipe() {
        // MXFP8 (E8M0 scales per row block, scale_format): the row is named after the recipe
        // and says what the reference's scales are; rank 1 scaled row 1 by its own half-row.
        QTemporaryDir dir;
        const QString dist = dir.filePath(QStringLiteral("dist")),
                      ref = dir.filePath(QStringLiteral("ref"));
        QVERIFY(QDir().mkpath(dist) && QDir().mkpath(ref));
        QVERIFY(test::writeManifest(ref, 1, QString(), QStringLiteral("reference")));
        const test::BlockGrid rows = test::perRow({test::kOneX, test::kHalfX});
        test::writeBlockScaledFp8(test::rankFile(ref, 0), 0, rows, test::kCols, {}, "e8m0");
        QVERIFY(test::writeManifest(dist, 2, QStringLiteral("tp")));
        test::writeBlockScaledFp8(test::rankFile(dist, 0), 0, rows, test::kCols / 2,
                                  "[[[0,2]],[[0,2]]]", "e8m0");
        test::writeBlockScaledFp8(test::rankFile(dist, 1), 1,
                                  test::perRow({test::kOneX, test::kQuarterX}), test::kCols / 2,
                                  "[[[0,2]],[[2,4]]]", "e8m0");
        QString text;
        firstTensorStatistic(TraceFolders{dist, ref, QString()}, QStringLiteral("MXFP8 scales"),
                             text);
        if (QTest::currentTestFailed()) {
            return;
        }
        QVERIFY2(text.startsWith(QStringLiteral("E8M0 per block of [1 x 4] (the reference's); "
                                                "MXFP8 scale_inv of block [1:2][2:4]")),
                 qPrintable(text));
    }

    void diagnosticsModelPassesTester() {
        DiagnosticsModel model;
        QAbstractItemModelTester tester(&model,
                                        QAbstractItemModelTester::FailureReportingMode::QtTest);
        Diagnostic error;
        error.file = QStringLiteral("rank00000.h5");
        error.dataset = QStringLiteral("/tensors/x");
        error.message = QStringLiteral("unreadable");
        Diagnostic warning = error;
        warning.severity = Severity::Warning;
        model.setDiagnostics({error, warning});
        QCOMPARE(model.rowCount(), 2);
        QCOMPARE(model.index(1, DiagnosticsModel::SeverityColumn).data().toString(),
                 QStringLiteral("warning"));
        QCOMPARE(model.index(0, DiagnosticsModel::MessageColumn).data().toString(),
                 QStringLiteral("unreadable"));
        model.setDiagnostics({});
        QCOMPARE(model.rowCount(), 0);
    }
};

QTEST_MAIN(TestGui)
#include "test_gui.moc"

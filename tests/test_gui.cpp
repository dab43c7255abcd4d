// The GUI on the bundled sample traces: a real MainWindow (offscreen), the real check on a
// worker thread, the heatmap, drill-down, cancel and export.
#include <QAbstractItemModelTester>
#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QElapsedTimer>
#include <QFile>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>
#include <set>

#include "CheckController.h"
#include "DiagnosticsModel.h"
#include "HeatmapView.h"
#include "MainWindow.h"
#include "RankGrid.h"
#include "RunOverviewPanel.h"
#include "TensorDetailPanel.h"
#include "TestPaths.h"
#include "TraceFolders.h"
#include "report/ReportText.h"

using namespace ttrace;

namespace {

constexpr int kCheckTimeoutMs = 180000;

TraceFolders sample(const QString& name) {
    QString error;
    const TraceFolders folders = detectTraceFolders(
        test::sourceDir() + QStringLiteral("/resources/samples/") + name, &error);
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
        QVERIFY(cache_.isValid());
        QVERIFY(out_.isValid());
        qputenv("TTRACE_CACHE_DIR", cache_.path().toUtf8());
        QVERIFY2(!test::sourceDir().isEmpty(), "TTRACE_SOURCE_DIR must name the repository");
    }

    void detectsSampleFoldersByRole() {
        const TraceFolders folders = sample(QStringLiteral("row_bias_every_rank"));
        QVERIFY(folders.distributed.endsWith(QStringLiteral("/dist")));
        QVERIFY(folders.reference.endsWith(QStringLiteral("/ref")));
        QVERIFY(folders.perturbed.endsWith(QStringLiteral("/pert")));
    }

    void bugSampleShowsFirstFaultAndDrillsDown() {
        MainWindow window;
        window.show();
        QSignalSpy shown(&window, &MainWindow::reportShown);
        window.openTraces(sample(QStringLiteral("row_bias_every_rank")));
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
        QCOMPARE(key.name, QStringLiteral("layers.0.fc2"));
        QCOMPARE(key.kind, TensorKind::ForwardOutput);
        QCOMPARE(key.iteration, 0);
        QCOMPARE(key.microBatch, 0);

        // Go to first fault: the detail panel shows that tensor and every shard's ranks.
        QVERIFY(window.goToFirstFaultAction()->isEnabled());
        window.goToFirstFaultAction()->trigger();
        QCOMPARE(window.detail()->currentResult(), marked);
        QCOMPARE(window.heatmap()->selectedResult(), marked);
        QVERIFY(window.detail()->titleText().contains(QStringLiteral("layers.0.fc2")));
        const auto* shards =
            window.detail()->findChild<QTableWidget*>(QStringLiteral("shardTable"));
        QVERIFY(shards);
        QCOMPARE(static_cast<std::size_t>(shards->rowCount()), results[*marked].shards.size());
        const QStringList rankTexts = columnTexts(shards, 0);
        for (const ShardResult& shard : results[*marked].shards) {
            QVERIFY(rankTexts.contains(report_text::formatRankList(shard.ranks)));
        }

        // The overview names the verdict and the root-cause module.
        QVERIFY2(window.overview()->verdictText().contains(QStringLiteral("Bug found")),
                 qPrintable(window.overview()->verdictText()));
        QVERIFY2(window.overview()
                     ->finding(QStringLiteral("Root-cause module"))
                     .startsWith(QStringLiteral("layers.0.fc2")),
                 qPrintable(window.overview()->finding(QStringLiteral("Root-cause module"))));

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
        QVERIFY(html.contains("layers.0.fc2"));

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
        QVERIFY(copied.contains(QStringLiteral("First faulty tensor: layers.0.fc2")));
        QVERIFY(copied.contains(QStringLiteral("Root-cause module: layers.0.fc2")));
        QVERIFY(copied.contains(QStringLiteral("Faulty shard: ")));
    }

    void rankGridShowsFirstFaultOnTheMesh() {
        MainWindow window;
        window.show();
        QSignalSpy shown(&window, &MainWindow::reportShown);
        window.openTraces(sample(QStringLiteral("tp_input_grad_no_allreduce")));
        QTRY_VERIFY_WITH_TIMEOUT(shown.count() == 1, kCheckTimeoutMs);
        window.goToFirstFaultAction()->trigger();
        const auto report = window.report();
        const auto first = report->localization.firstFaulty;
        QVERIFY(first);
        const TensorResult& result = report->comparison.results[*first];
        const Manifest& manifest = report->distributed.manifest;

        const RankGrid* grid = window.detail()->rankGrid();
        QVERIFY(grid);
        QCOMPARE(grid->cellCount(), manifest.worldSize);
        std::set<int> holding;
        for (const ShardResult& shard : result.shards) {
            holding.insert(shard.ranks.begin(), shard.ranks.end());
        }
        QVERIFY(!holding.empty());
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

    void cancelLeavesWindowUsable() {
        MainWindow window;
        window.show();
        QSignalSpy shown(&window, &MainWindow::reportShown);
        QSignalSpy cancelled(window.controller(), &CheckController::cancelled);
        window.openTraces(sample(QStringLiteral("tp_input_grad_no_allreduce")));
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
        QCOMPARE(window.heatmap()->cellCount(), std::size_t{0});
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

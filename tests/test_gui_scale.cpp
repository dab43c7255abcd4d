// The GUI on a trace set with more ranks than a heatmap shows rows: a TP 2 x PP 2 x DP 40 job
// written by bench/make_synthetic_traces.py (CTest fixture "scale_traces", with a bug on the
// ranks of tp coordinate 0 in layer 1), checked for real and shown in a real window.
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTableWidget>
#include <QtTest>
#include <set>

#include "BreadcrumbBar.h"
#include "ElementErrorImage.h"
#include "ErrorGrids.h"
#include "HeatmapView.h"
#include "MainWindow.h"
#include "RankGrid.h"
#include "RankGroups.h"
#include "TensorDetailPanel.h"
#include "report/ErrorColorMap.h"

using namespace ttrace;

namespace {

constexpr int kCheckTimeoutMs = 180000;
constexpr int kBugLayer = 1;  // make_synthetic_traces.py --bug 1

QString scaleFixture(const QString& role) {
    return qEnvironmentVariable("TTRACE_SCALE_FIXTURES") + QLatin1Char('/') + role;
}

// The mesh coordinates of `rank`, empty when the manifest has none.
std::vector<int> coordsOf(const Manifest& manifest, int rank) {
    for (const RankEntry& entry : manifest.ranks) {
        if (entry.rank == rank) {
            return entry.coords;
        }
    }
    return {};
}

bool inBox(const Manifest& manifest, const RankBox& box, int rank) {
    const std::vector<int> coords = coordsOf(manifest, rank);
    if (coords.size() != box.ranges.size()) {
        return false;
    }
    for (std::size_t a = 0; a < box.ranges.size(); ++a) {
        if (coords[a] < box.ranges[a].first || coords[a] > box.ranges[a].second) {
            return false;
        }
    }
    return true;
}

int axisIndex(const Manifest& manifest, const QString& axis) {
    const auto it = std::find(manifest.meshAxes.begin(), manifest.meshAxes.end(), axis);
    return it == manifest.meshAxes.end() ? -1 : static_cast<int>(it - manifest.meshAxes.begin());
}

// The worst normalized error of `result`'s pieces held by the ranks `holds` accepts; NaN when
// none holds one.
template <typename Holds>
double worstOf(const std::vector<ShardResult>& shards, Holds holds) {
    double worst = std::nan("");
    for (const ShardResult& shard : shards) {
        for (const int rank : shard.ranks) {
            if (holds(rank) && (std::isnan(worst) || shard.normalizedError > worst)) {
                worst = shard.normalizedError;
            }
        }
    }
    return worst;
}

}  // namespace

class TestGuiScale : public QObject {
    Q_OBJECT

private:
    std::unique_ptr<MainWindow> window_;
    std::shared_ptr<const CheckReport> report_;

    // The ranks holding a piece of the layer's tensors.
    std::set<int> layerRanks(int layer) const {
        std::set<int> ranks;
        for (std::size_t i = 0; i < report_->comparison.results.size(); ++i) {
            if (report_->comparison.results[i].layer == layer) {
                const auto shards = report_->shardsOf(i);
                for (const ShardResult& shard : *shards) {
                    ranks.insert(shard.ranks.begin(), shard.ranks.end());
                }
            }
        }
        return ranks;
    }

    void showLayerRanks(int layer) {
        Location ranks;
        ranks.view = Location::View::LayerRanks;
        ranks.layer = layer;
        window_->navigate(ranks);
    }

private Q_SLOTS:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);  // QSettings away from the user's
        QCoreApplication::setOrganizationName(QStringLiteral("ttrace-tests"));
        QCoreApplication::setApplicationName(QStringLiteral("test_gui_scale"));
        window_ = std::make_unique<MainWindow>();
        window_->show();
        QSignalSpy shown(window_.get(), &MainWindow::reportShown);
        window_->openTraces({scaleFixture(QStringLiteral("dist")),
                             scaleFixture(QStringLiteral("ref")),
                             scaleFixture(QStringLiteral("pert"))});
        QVERIFY(shown.wait(kCheckTimeoutMs) || shown.count() > 0);
        report_ = window_->report();
        QVERIFY(report_ && report_->bugFound());
        QCOMPARE(report_->distributed.manifest.ranks.size(), std::size_t{160});
        QCOMPARE(report_->comparison.results[*report_->localization.firstFaulty].layer, kBugLayer);
    }

    // Rows are blocks of ranks along the mesh, fewer than the cap, covering every rank of the
    // layer once; each cell is the worst of its members' pieces.
    void groupedRows() {
        const Manifest& manifest = report_->distributed.manifest;
        showLayerRanks(kBugLayer);
        const ErrorGrid& grid = window_->rankHeatmap()->grid();
        const std::set<int> ranks = layerRanks(kBugLayer);
        QCOMPARE(ranks.size(), std::size_t{80});  // one pipeline stage: tp 2 x dp 40
        QVERIFY(!grid.rowBoxes.empty());
        QCOMPARE(grid.rowBoxes.size(), static_cast<std::size_t>(grid.rowLabels.size()));
        QVERIFY(grid.rowBoxes.size() <= kMaxRankRows);
        std::map<int, int> rowOfRank;
        for (std::size_t row = 0; row < grid.rowBoxes.size(); ++row) {
            int members = 0;
            for (const int rank : ranks) {
                if (inBox(manifest, grid.rowBoxes[row], rank)) {
                    QVERIFY2(rowOfRank.emplace(rank, static_cast<int>(row)).second,
                             "a rank in two rows");
                    ++members;
                }
            }
            QVERIFY(members > 1);
            QVERIFY2(grid.rowLabels[static_cast<qsizetype>(row)].endsWith(
                         QStringLiteral("(%1 ranks)").arg(members)),
                     qPrintable(grid.rowLabels[static_cast<qsizetype>(row)]));
        }
        QCOMPARE(rowOfRank.size(), ranks.size());
        // A block spans one tp coordinate: the tp 0 bug shows on every other row.
        const int tp = axisIndex(manifest, QStringLiteral("tp"));
        QVERIFY(tp >= 0);
        for (const RankBox& box : grid.rowBoxes) {
            QCOMPARE(box.ranges[static_cast<std::size_t>(tp)].first,
                     box.ranges[static_cast<std::size_t>(tp)].second);
        }
        QVERIFY(grid.rowLabels.front().contains(QStringLiteral("dp0-")));

        for (const ErrorGridCell& cell : grid.cells) {
            QVERIFY(!cell.rank);
            const double expected = worstOf(*report_->shardsOf(cell.result), [&](int rank) {
                const auto it = rowOfRank.find(rank);
                return it != rowOfRank.end() && it->second == cell.row;
            });
            QCOMPARE(cell.normalizedError, expected);
        }
        QCOMPARE(window_->rankHeatmap()->firstFaultMarkerResult(),
                 report_->localization.firstFaulty);
    }

    // Enter on a faulty block expands it (a breadcrumb step); a click on a member opens the
    // tensor on that rank, one of the ranks the bug was put on; Back returns up the steps.
    void expandAndOpenFaultyRank() {
        const Manifest& manifest = report_->distributed.manifest;
        const std::size_t first = *report_->localization.firstFaulty;
        showLayerRanks(kBugLayer);
        HeatmapView* view = window_->rankHeatmap();
        const ErrorGrid grouped = view->grid();
        const auto faultyCell = std::find_if(
            grouped.cells.begin(), grouped.cells.end(),
            [&](const ErrorGridCell& c) { return c.result == first && c.normalizedError > 1; });
        QVERIFY(faultyCell != grouped.cells.end());
        const RankBox box = grouped.rowBoxes[static_cast<std::size_t>(faultyCell->row)];

        // Keyboard: the tensor's first row, down to the faulty block, Enter.
        QVERIFY(view->selectResult(first));
        const auto top = std::find_if(grouped.cells.begin(), grouped.cells.end(),
                                      [&](const ErrorGridCell& c) { return c.result == first; });
        view->setFocus();
        for (int row = top->row; row < faultyCell->row; ++row) {
            QTest::keyClick(view, Qt::Key_Down);
        }
        QTest::keyClick(view, Qt::Key_Return);
        QVERIFY(window_->location().ranks == box);
        QCOMPARE(window_->breadcrumbs()->crumbs().last(),
                 grouped.rowLabels[faultyCell->row].section(QStringLiteral(" ("), 0, 0));

        const ErrorGrid& members = view->grid();
        QVERIFY(members.rowBoxes.empty());
        std::set<int> expected;
        for (const int rank : layerRanks(kBugLayer)) {
            if (inBox(manifest, box, rank)) {
                expected.insert(rank);
            }
        }
        std::set<int> shown;
        for (const ErrorGridCell& cell : members.cells) {
            QVERIFY(cell.rank);
            shown.insert(*cell.rank);
        }
        QCOMPARE(shown, expected);

        // Click the first fault on the member whose piece is worst.
        const auto worstMember =
            std::max_element(members.cells.begin(), members.cells.end(),
                             [&](const ErrorGridCell& a, const ErrorGridCell& b) {
                                 return (a.result == first ? a.normalizedError : -1) <
                                        (b.result == first ? b.normalizedError : -1);
                             });
        QVERIFY(worstMember->result == first && worstMember->normalizedError > 1);
        const int rank = *worstMember->rank;
        const std::vector<int> coords = coordsOf(manifest, rank);
        QCOMPARE(coords.size(), std::size_t{3});
        QCOMPARE(coords[static_cast<std::size_t>(axisIndex(manifest, QStringLiteral("tp")))], 0);
        QCOMPARE(coords[static_cast<std::size_t>(axisIndex(manifest, QStringLiteral("pp")))], 1);
        auto* plot = view->findChild<QWidget*>(QStringLiteral("heatmapPlot"));
        const auto center = view->cellCenter(first, rank);
        QVERIFY(center);
        QTest::mouseClick(plot, Qt::LeftButton, {}, plot->mapFrom(view, *center));
        QCOMPARE(window_->detail()->currentResult(), std::optional<std::size_t>(first));
        QCOMPARE(window_->detail()->selectedRank(), std::optional<int>(rank));
        QCOMPARE(window_->breadcrumbs()->crumbs().last(), QStringLiteral("rank %1").arg(rank));

        // The detail lists every shard and replica of the tensor, the rank's row selected.
        auto* shards = window_->detail()->findChild<QTableWidget*>(QStringLiteral("shardTable"));
        QVERIFY(shards);
        const auto faultyShards = report_->shardsOf(first);
        QCOMPARE(static_cast<std::size_t>(shards->rowCount()), faultyShards->size());
        QCOMPARE(faultyShards->size(), std::size_t{80});  // tp 2 x dp 40 pieces
        const auto selected = shards->selectionModel()->selectedRows();
        QCOMPARE(selected.size(), 1);
        const auto& selectedRanks =
            (*faultyShards)[static_cast<std::size_t>(selected.front().row())].ranks;
        QVERIFY(std::find(selectedRanks.begin(), selectedRanks.end(), rank) != selectedRanks.end());

        // Back: the block's members, then the blocks; the layer crumb goes to the blocks too.
        window_->backAction()->trigger();
        QVERIFY(window_->location().ranks == box);
        QVERIFY(view->grid().rowBoxes.empty());
        window_->backAction()->trigger();
        QVERIFY(window_->location().ranks.all());
        QCOMPARE(view->grid().rowBoxes.size(), grouped.rowBoxes.size());
        window_->forwardAction()->trigger();
        window_->forwardAction()->trigger();
        QCOMPARE(window_->detail()->selectedRank(), std::optional<int>(rank));
        Q_EMIT window_->breadcrumbs()->crumbActivated(1);
        QVERIFY(window_->location().ranks.all());
        QVERIFY(!window_->location().result);
        QCOMPARE(view->grid().rowBoxes.size(), grouped.rowBoxes.size());
    }

    // The Summary tab's rank grid of the first fault: its 80 mesh rows (pp 2 x dp 40) become
    // blocks of data-parallel ranks per stage, each cell showing the worst of its ranks, the
    // tp 0 column faulty.
    void rankGridBandsItsRows() {
        window_->goToFirstFault();
        const RankGrid* grid = window_->detail()->rankGrid();
        const QStringList& rows = grid->rowLabels();
        QVERIFY2(rows.size() > 1 && rows.size() <= 48, qPrintable(rows.join(u'|')));
        QVERIFY2(rows.front().startsWith(QStringLiteral("pp0 dp0-")), qPrintable(rows.front()));
        const std::size_t first = *report_->localization.firstFaulty;
        const auto shards = report_->shardsOf(first);
        const Manifest& manifest = report_->distributed.manifest;
        const int tp = axisIndex(manifest, QStringLiteral("tp"));
        int faultyCells = 0;
        for (int row = 0; row < rows.size(); ++row) {
            for (int column = 0; column < 2; ++column) {
                const auto shown = grid->rankShownAt(row, column);
                QVERIFY(shown);
                QCOMPARE(coordsOf(manifest, *shown)[static_cast<std::size_t>(tp)], column);
                // The worst of the ranks sharing the row's label and the column.
                const QString label = rows[row];
                const double worst = worstOf(*shards, [&](int rank) {
                    const auto coords = coordsOf(manifest, rank);
                    if (coords[static_cast<std::size_t>(tp)] != column) {
                        return false;
                    }
                    const int pp =
                        coords[static_cast<std::size_t>(axisIndex(manifest, QStringLiteral("pp")))];
                    const int dp =
                        coords[static_cast<std::size_t>(axisIndex(manifest, QStringLiteral("dp")))];
                    const auto range = label.section(QStringLiteral(" dp"), 1).split(u'-');
                    return label.startsWith(QStringLiteral("pp%1 ").arg(pp)) &&
                           dp >= range.front().toInt() && dp <= range.back().toInt();
                });
                if (std::isnan(worst)) {
                    QCOMPARE(grid->cellColor(*shown), RankGrid::kNoData);
                    continue;
                }
                QCOMPARE(grid->cellColor(*shown), QColor(errorColor(worst)));
                if (worst > 1) {
                    ++faultyCells;
                    QCOMPARE(column, 0);  // the bug is on tp 0
                }
            }
        }
        QVERIFY(faultyCells > 0);
    }

    // The element image outlines the first fault's 40 data-parallel shards where they are a
    // few pixels apart, and leaves them out where their frames would hide the image.
    void elementImageOutlinesShardsThatFit() {
        window_->goToFirstFault();
        const ElementErrorImage* image = window_->detail()->elementImage();
        QTRY_VERIFY_WITH_TIMEOUT(image->profile(), kCheckTimeoutMs);
        QCOMPARE(image->profile()->shards.size(), std::size_t{40});
        QVERIFY(image->outlinesShardsAt(QSize(400, 800)));   // 20 pixels a shard
        QVERIFY(!image->outlinesShardsAt(QSize(400, 120)));  // 2 pixels a shard
    }

    // The grouping itself on the shape: one pipeline stage of tp 8 x dp 156.
    void groupsOfALargeStage() {
        Manifest manifest;
        manifest.meshAxes = {QStringLiteral("pp"), QStringLiteral("dp"), QStringLiteral("tp")};
        manifest.meshShape = {8, 156, 8};
        std::vector<int> ranks;
        for (int dp = 0; dp < 156; ++dp) {
            for (int tp = 0; tp < 8; ++tp) {
                const int rank = 3 * 156 * 8 + dp * 8 + tp;
                manifest.ranks.push_back({rank, QString(), {3, dp, tp}});
                ranks.push_back(rank);
            }
        }
        const RankSpace space(manifest, ranks);
        const auto groups = groupRanks(space, ranks, kMaxRankRows);
        QCOMPARE(groups.size(), std::size_t{64});
        QCOMPARE(space.label(groups[0].box), QStringLiteral("pp3 dp0-19 tp0"));
        QCOMPARE(space.label(groups[1].box), QStringLiteral("pp3 dp0-19 tp1"));
        QCOMPARE(space.label(groups.back().box), QStringLiteral("pp3 dp140-155 tp7"));
        std::size_t members = 0;
        for (const RankGroup& group : groups) {
            members += group.members.size();
            QVERIFY(group.members.size() <= 20);
        }
        QCOMPARE(members, ranks.size());
        // Few enough ranks: one group each; without mesh coordinates: blocks of rank numbers.
        QCOMPARE(groupRanks(space, {ranks.begin(), ranks.begin() + 10}, kMaxRankRows).size(),
                 std::size_t{10});
        const RankSpace plain(Manifest{}, ranks);
        const auto blocks = groupRanks(plain, ranks, kMaxRankRows);
        QVERIFY(blocks.size() <= kMaxRankRows);
        QCOMPARE(plain.label(blocks.front().box), QStringLiteral("ranks 3744-3763"));
    }

    void cleanupTestCase() { window_.reset(); }
};

QTEST_MAIN(TestGuiScale)
#include "test_gui_scale.moc"

#pragma once

#include <QColor>
#include <QString>
#include <QWidget>
#include <functional>
#include <optional>
#include <vector>

#include "report/CheckReport.h"

namespace ttrace {

// One tensor across the device mesh: a cell per rank, columns along the last mesh axis (tp),
// rows over the other axes ("pp0 dp1"), coloured by the normalized error of the worst shard
// or replica that rank holds, grey where it holds none; the faulty shard's ranks outlined
// when that shard stands out.
class RankGrid : public QWidget {
    Q_OBJECT

public:
    explicit RankGrid(QWidget* parent = nullptr);

    // Shows `result` of `report`, whose shards are `shards` (copied: the grid keeps only what
    // it paints).
    void showResult(const CheckReport& report, std::size_t result,
                    const std::vector<ShardResult>& shards);
    void clear();
    // Frames `rank`'s cell dashed yellow, as the heatmaps frame their selection.
    void setSelectedRank(std::optional<int> rank);
    std::optional<int> selectedRank() const { return selectedRank_; }

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

    // For tests: cells drawn, a rank's fill colour, its tooltip text, whether it is outlined.
    int cellCount() const { return static_cast<int>(cells_.size()); }
    QColor cellColor(int rank) const;
    QString cellToolTip(int rank) const;
    std::optional<int> rankAt(const QPoint& pos) const;
    bool isOutlined(int rank) const;
    // The rows' labels (mesh rows, or blocks of them past kMostRows), and the rank whose
    // colour the cell at (row, column) shows: of a block, its worst.
    const QStringList& rowLabels() const { return rowLabels_; }
    std::optional<int> rankShownAt(int row, int column) const;

    static const QColor kNoData;

Q_SIGNALS:
    // A click on the cell of a rank holding a piece of the tensor.
    void rankClicked(int rank);

protected:
    void paintEvent(QPaintEvent* event) override;
    bool event(QEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;

private:
    struct Cell {
        int rank = 0;
        int row = 0;
        int column = 0;
        QString coords;               // "pp0 dp1 tp1"
        std::optional<double> error;  // worst normalized error of the rank's pieces
        bool outlined = false;
    };
    struct Geometry {
        QRectF grid;
        double cellWidth = 0;
        double cellHeight = 0;
        bool labels = true;
    };
    Geometry geometry() const;
    // Turns the mesh rows into at most kMostRows blocks of rows (RankGroups), each cell then
    // showing the worst of its ranks.
    void bandRows(
        const Manifest& manifest,
        const std::function<QString(const std::vector<std::pair<int, int>>&)>& leadingLabel);
    const Cell* cellAt(const QPoint& pos) const;
    const Cell* cellShownAt(int row, int column) const;
    const Cell* cellOfRank(int rank) const;

    std::vector<Cell> cells_;
    QStringList rowLabels_;
    QStringList columnLabels_;
    int rows_ = 0;
    int columns_ = 0;
    std::optional<int> selectedRank_;
    bool banded_ = false;  // rows are blocks of mesh rows
};

}  // namespace ttrace

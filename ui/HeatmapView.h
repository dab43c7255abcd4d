#pragma once

#include <QPoint>
#include <QWidget>
#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

#include "ErrorGrid.h"
#include "report/CheckReport.h"

class QCustomPlot;
class QCPColorMap;
class QCPColorScale;
class QCPItemRect;
class QCPItemStraightLine;
class QMouseEvent;

namespace ttrace {

// A heatmap of normalized error: an ErrorGrid drawn as a colour map, log10 of the normalized
// error with 1.0 the boundary between blue (round-off) and orange/red (bug), grey where no
// tensor is. Used for the layer-by-layer heatmap and for the ranks x layer one. Wheel zooms,
// dragging pans; a click, or Enter on the cell chosen with the arrow keys, activates a cell
// (on a row that is a block of ranks: expands it);
// the context menu (right click, Menu key) offers the ranks of the cell's layer.
class HeatmapView : public QWidget {
    Q_OBJECT

public:
    explicit HeatmapView(QWidget* parent = nullptr);
    ~HeatmapView() override;

    // The report the cells refer to (tooltips); clears the grid.
    void setReport(std::shared_ptr<const CheckReport> report);
    void setGrid(ErrorGrid grid);
    void clear();

    // For tests and navigation: cells drawn, the result under the first-fault marker (read
    // back from the marker's position), the selected cell.
    std::size_t cellCount() const { return cellCount_; }
    std::optional<std::size_t> firstFaultMarkerResult() const;
    // The results whose cells are hatched as blind (threshold of 1 or more), read back from
    // the marks, in drawing order.
    std::vector<std::size_t> blindMarkResults() const;
    std::optional<std::size_t> selectedResult() const;
    std::optional<int> selectedRank() const;
    // Centre of a result's cell (of `rank` on per-rank grids) in widget coordinates.
    std::optional<QPoint> cellCenter(std::size_t result,
                                     std::optional<int> rank = std::nullopt) const;
    const ErrorGrid& grid() const { return grid_; }
    void applyPalette();

public Q_SLOTS:
    // Selects the result's cell (its `rank` cell on per-rank grids, else the first one);
    // false when the grid does not show it.
    bool selectResult(std::size_t result, std::optional<int> rank = std::nullopt);
    void resetView();

Q_SIGNALS:
    void tensorActivated(std::size_t resultIndex);
    void rankActivated(std::size_t resultIndex, int rank);
    // A cell of a row that is a block of ranks (ErrorGrid::rowBoxes): expand it.
    void rankGroupActivated(const ttrace::RankBox& box);
    void layerRanksRequested(int layer);

protected:
    void keyPressEvent(QKeyEvent* event) override;
    void contextMenuEvent(QContextMenuEvent* event) override;
    void changeEvent(QEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;

private:
    std::optional<std::size_t> cellAtPixel(const QPoint& pos) const;  // index into cells
    std::optional<std::size_t> cellOf(std::size_t result, std::optional<int> rank) const;
    QString tooltipFor(const ErrorGridCell& cell) const;
    void placeRect(QCPItemRect* rect, int column, int row, double halfSize = 0.5);
    // The result of the cell whose top left corner `rect` sits at (a mark placed by
    // placeRect), read back from its position.
    std::optional<std::size_t> resultUnder(const QCPItemRect* rect) const;
    // Labels every k-th row and column so that labels never overlap at the current zoom, and
    // shows the lines between groups of rows where they are far enough apart.
    void updateTicks();
    void selectCell(std::size_t cell);
    void activate(std::size_t cell);
    void showContextMenu(std::size_t cell, const QPoint& globalPos);
    void onMousePress(QMouseEvent* event);
    void onMouseRelease(QMouseEvent* event);
    void onMouseMove(QMouseEvent* event);

    QCustomPlot* plot_ = nullptr;
    QCPColorMap* map_ = nullptr;
    QCPColorScale* scale_ = nullptr;
    QCPItemRect* faultMarker_ = nullptr;
    QCPItemRect* faultHalo_ = nullptr;  // black under the white frame: visible on any colour
    QCPItemRect* selectionMarker_ = nullptr;
    std::vector<QCPItemStraightLine*> separators_;  // between groups of rows; owned by plot_
    // Hatching over the cells of blind tensors: their normalized error is small because
    // their threshold is huge, and a dark blue cell would read as checked. Owned by plot_.
    std::vector<QCPItemRect*> blindMarks_;
    int fewestGroupRows_ = 0;  // rows of the smallest group
    static constexpr double kFewestPixelsBetweenLines = 4;
    std::shared_ptr<const CheckReport> report_;
    ErrorGrid grid_;
    std::vector<std::optional<std::size_t>> cellAt_;  // row * columns + column -> cell
    std::size_t cellCount_ = 0;
    std::optional<std::size_t> selected_;  // index into grid_.cells
    QPoint pressPos_;
};

}  // namespace ttrace

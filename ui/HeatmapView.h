#pragma once

#include <QPoint>
#include <QWidget>
#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

#include "report/CheckReport.h"
#include "report/HeatmapGrid.h"

class QCustomPlot;
class QCPColorMap;
class QCPColorScale;
class QCPItemRect;
class QMouseEvent;

namespace ttrace {

// The layer-by-layer heatmap: rows are modules in execution order (grouped by layer),
// columns are tensor kind x iteration x micro-batch, colour is log10 of the normalized error
// with 1.0 the boundary between blue (round-off) and orange/red (bug). The only class that
// calls QCustomPlot.
class HeatmapView : public QWidget {
    Q_OBJECT

public:
    explicit HeatmapView(QWidget* parent = nullptr);
    ~HeatmapView() override;

    void setReport(std::shared_ptr<const CheckReport> report);
    void clear();

    // For tests and navigation: cells drawn, the result under the first-fault marker (read
    // back from the marker's position), the selected result.
    std::size_t cellCount() const { return cellCount_; }
    std::optional<std::size_t> firstFaultMarkerResult() const;
    std::optional<std::size_t> selectedResult() const { return selected_; }
    // Centre of a result's cell in widget coordinates (tests click there).
    std::optional<QPoint> cellCenter(std::size_t result) const;

public Q_SLOTS:
    void selectResult(std::size_t result);
    void resetView();

Q_SIGNALS:
    void tensorActivated(std::size_t resultIndex);

private:
    struct CellPos {
        int column = 0;
        int row = 0;
    };
    std::optional<std::size_t> resultAtPixel(const QPoint& pos) const;
    std::optional<CellPos> cellOf(std::size_t result) const;
    QString tooltipFor(std::size_t result) const;
    void placeRect(QCPItemRect* rect, const CellPos& cell, double halfSize = 0.5);
    void onMousePress(QMouseEvent* event);
    void onMouseRelease(QMouseEvent* event);
    void onMouseMove(QMouseEvent* event);

    QCustomPlot* plot_ = nullptr;
    QCPColorMap* map_ = nullptr;
    QCPColorScale* scale_ = nullptr;
    QCPItemRect* faultMarker_ = nullptr;
    QCPItemRect* faultHalo_ = nullptr;  // black under the white frame: visible on any colour
    QCPItemRect* selectionMarker_ = nullptr;
    std::shared_ptr<const CheckReport> report_;
    HeatmapGrid grid_;
    std::vector<std::optional<std::size_t>> cellResult_;  // row * columns + column -> result
    std::size_t cellCount_ = 0;
    std::optional<std::size_t> selected_;
    QPoint pressPos_;
};

}  // namespace ttrace

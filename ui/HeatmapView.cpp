#include "HeatmapView.h"

#include <QContextMenuEvent>
#include <QKeyEvent>
#include <QMenu>
#include <QMouseEvent>
#include <QTimer>
#include <QToolTip>
#include <QVBoxLayout>
#include <cmath>

#include "PlotStyle.h"
#include "report/ErrorColorMap.h"
#include "report/ReportText.h"

namespace ttrace {

namespace {

using report_text::formatNumber;

constexpr double kMissing = std::numeric_limits<double>::quiet_NaN();

// log10 of the normalized error, clamped to the colour scale; non-finite errors are the
// worst colour.
double cellValue(double normalizedError) {
    if (!std::isfinite(normalizedError)) {
        return kErrorColorMaxDecade;
    }
    if (normalizedError <= 0) {
        return kErrorColorMinDecade;
    }
    return std::clamp(std::log10(normalizedError), kErrorColorMinDecade, kErrorColorMaxDecade);
}

// The report's colour map sampled into a QCustomPlot gradient, so that the GUI and the HTML
// report colour the same error alike; two stops a hair apart make the step at 1.0.
QCPColorGradient errorGradient() {
    QCPColorGradient gradient;
    gradient.clearColorStops();
    constexpr int kSamplesPerHalf = 30;
    const double span = kErrorColorMaxDecade - kErrorColorMinDecade;
    for (int i = 0; i <= kSamplesPerHalf; ++i) {
        const double below = kErrorColorMinDecade * (1.0 - i / double{kSamplesPerHalf});
        const double above = kErrorColorMaxDecade * i / double{kSamplesPerHalf};
        const double abovePos = (above - kErrorColorMinDecade) / span;
        gradient.setColorStopAt((below - kErrorColorMinDecade) / span,
                                QColor(errorColor(std::pow(10.0, below))));
        gradient.setColorStopAt(i == 0 ? abovePos + 1e-6 : abovePos,
                                QColor(errorColor(std::pow(10.0, above) * (1 + 1e-9))));
    }
    gradient.setLevelCount(600);
    gradient.setNanHandling(QCPColorGradient::nhTransparent);
    return gradient;
}

// Grey where no tensor is: light on a light window, dark on a dark one.
QColor emptyCellColor(const QPalette& palette) {
    return palette.color(QPalette::Window).lightness() < 128 ? QColor(0x4a, 0x4a, 0x4a)
                                                             : QColor(0xe4, 0xe4, 0xe4);
}

}  // namespace

HeatmapView::HeatmapView(QWidget* parent) : QWidget(parent) {
    setFocusPolicy(Qt::StrongFocus);  // arrow keys walk the cells, Enter opens one
    plot_ = new QCustomPlot(this);
    plot_->setObjectName(QStringLiteral("heatmapPlot"));
    plot_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    plot_->setMouseTracking(true);  // tooltips without a button held
    plot_->setFocusProxy(this);
    plot_->setContextMenuPolicy(Qt::NoContextMenu);  // ours, from the widget

    for (QCPAxis* axis : {plot_->xAxis, plot_->yAxis}) {
        axis->grid()->setVisible(false);
        axis->setSubTicks(false);
        QFont font = axis->tickLabelFont();
        font.setPointSizeF(font.pointSizeF() * 0.85);
        axis->setTickLabelFont(font);
    }
    plot_->xAxis->setTickLabelRotation(60);
    plot_->yAxis->setRangeReversed(true);  // first row on top

    map_ = new QCPColorMap(plot_->xAxis, plot_->yAxis);
    map_->setInterpolate(false);
    map_->setTightBoundary(false);

    scale_ = new QCPColorScale(plot_);
    scale_->setType(QCPAxis::atRight);
    scale_->axis()->setLabel(QStringLiteral("normalized error (above 1 = bug)"));
    auto decades = QSharedPointer<QCPAxisTickerText>::create();
    for (int d = static_cast<int>(kErrorColorMinDecade); d <= kErrorColorMaxDecade; ++d) {
        decades->addTick(d, d < 0 ? QString::number(std::pow(10.0, d), 'g', 3)
                                  : QString::number(static_cast<int>(std::pow(10.0, d))));
    }
    scale_->axis()->setTicker(decades);
    scale_->axis()->setSubTicks(false);
    plot_->plotLayout()->addElement(0, 1, scale_);
    map_->setColorScale(scale_);
    // The scale passes its gradient and range on to the map: set them on the scale.
    scale_->setGradient(errorGradient());
    scale_->setDataRange(QCPRange(kErrorColorMinDecade, kErrorColorMaxDecade));
    auto* margins = new QCPMarginGroup(plot_);
    plot_->axisRect()->setMarginGroup(QCP::msBottom | QCP::msTop, margins);
    scale_->setMarginGroup(QCP::msBottom | QCP::msTop, margins);

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(plot_, 1);

    connect(plot_, &QCustomPlot::mousePress, this, &HeatmapView::onMousePress);
    connect(plot_, &QCustomPlot::mouseRelease, this, &HeatmapView::onMouseRelease);
    connect(plot_, &QCustomPlot::mouseMove, this, &HeatmapView::onMouseMove);
    // Wheel zoom changes how many labels fit; updated after the replot it caused.
    connect(plot_, &QCustomPlot::mouseWheel, this,
            [this] { QTimer::singleShot(0, this, &HeatmapView::updateTicks); });
    applyPalette();
    clear();
}

HeatmapView::~HeatmapView() = default;

void HeatmapView::clear() {
    setReport(nullptr);
}

void HeatmapView::setReport(std::shared_ptr<const CheckReport> report) {
    report_ = std::move(report);
    setGrid(ErrorGrid{});
}

void HeatmapView::setGrid(ErrorGrid grid) {
    grid_ = std::move(grid);
    selected_.reset();
    plot_->clearItems();  // layer separators and markers of the previous grid
    // The first fault: a white frame on a black one, visible on dark blue and dark red alike;
    // the selection: a dashed yellow frame (no red/green pair for colour-blind users).
    faultHalo_ = new QCPItemRect(plot_);
    faultHalo_->setPen(QPen(Qt::black, 6));
    faultMarker_ = new QCPItemRect(plot_);
    faultMarker_->setPen(QPen(Qt::white, 2.5));
    selectionMarker_ = new QCPItemRect(plot_);
    selectionMarker_->setPen(QPen(QColor(0xff, 0xe0, 0x00), 2.5, Qt::DashLine));
    for (QCPItemRect* rect : {faultHalo_, faultMarker_, selectionMarker_}) {
        rect->setSelectable(false);
        rect->setVisible(false);
    }

    const int columns = static_cast<int>(grid_.columnLabels.size());
    const int rows = static_cast<int>(grid_.rowLabels.size());
    // QCPColorMapData needs two cells per axis to know a cell's size; an extra one stays empty.
    const int dataColumns = std::max(columns, 2);
    const int dataRows = std::max(rows, 2);
    map_->data()->setSize(dataColumns, dataRows);
    map_->data()->setRange(QCPRange(0, dataColumns - 1), QCPRange(0, dataRows - 1));
    map_->data()->fill(kMissing);
    cellAt_.assign(static_cast<std::size_t>(columns) * static_cast<std::size_t>(rows),
                   std::nullopt);
    cellCount_ = 0;
    for (std::size_t i = 0; i < grid_.cells.size(); ++i) {
        const ErrorGridCell& cell = grid_.cells[i];
        map_->data()->setCell(cell.column, cell.row, cellValue(cell.normalizedError));
        auto& slot = cellAt_[static_cast<std::size_t>(cell.row) * grid_.columnLabels.size() +
                             static_cast<std::size_t>(cell.column)];
        if (!slot) {
            ++cellCount_;
        }
        slot = i;
    }

    // A line between groups (layers, mesh rows) groups the rows.
    separators_.clear();
    fewestGroupRows_ = rows;
    int groupStart = 0;
    const auto group = [this](int row) {
        return static_cast<std::size_t>(row) < grid_.rowGroups.size()
                   ? grid_.rowGroups[static_cast<std::size_t>(row)]
                   : 0;
    };
    for (int r = 1; r <= rows; ++r) {
        if (r < rows && group(r) == group(r - 1)) {
            continue;
        }
        fewestGroupRows_ = std::min(fewestGroupRows_, r - groupStart);
        groupStart = r;
        if (r == rows) {
            break;
        }
        auto* line = new QCPItemStraightLine(plot_);
        line->point1->setCoords(0, r - 0.5);
        line->point2->setCoords(1, r - 0.5);
        line->setPen(QPen(QColor(0x60, 0x60, 0x60), 1));
        line->setSelectable(false);
        separators_.push_back(line);
    }

    blindMarks_.clear();
    for (const ErrorGridCell& cell : grid_.cells) {
        if (report_ && cell.result < report_->comparison.results.size() &&
            report_->comparison.results[cell.result].threshold.blind()) {
            auto* mark = new QCPItemRect(plot_);
            mark->setPen(Qt::NoPen);
            mark->setBrush(QBrush(QColor(0x80, 0x80, 0x80), Qt::BDiagPattern));
            mark->setSelectable(false);
            placeRect(mark, cell.column, cell.row);
            blindMarks_.push_back(mark);
        }
    }

    if (grid_.markedResult) {
        // Every cell of the marked result: one on the layer heatmap, a column of ranks on a
        // per-rank one.
        int column = -1, top = rows, bottom = -1;
        for (const ErrorGridCell& cell : grid_.cells) {
            if (cell.result == *grid_.markedResult) {
                column = cell.column;
                top = std::min(top, cell.row);
                bottom = std::max(bottom, cell.row);
            }
        }
        if (column >= 0) {
            for (QCPItemRect* rect : {faultHalo_, faultMarker_}) {
                rect->topLeft->setCoords(column - 0.5, top - 0.5);
                rect->bottomRight->setCoords(column + 0.5, bottom + 0.5);
                rect->setVisible(true);
            }
        }
    }
    resetView();
}

void HeatmapView::applyPalette() {
    applyPlotPalette(plot_, palette());
    plot_->axisRect()->setBackground(QBrush(emptyCellColor(palette())));
    plot_->replot();
}

void HeatmapView::changeEvent(QEvent* event) {
    if (event->type() == QEvent::PaletteChange) {
        applyPalette();
    }
    QWidget::changeEvent(event);
}

void HeatmapView::resetView() {
    plot_->xAxis->setRange(-0.5, std::max<double>(grid_.columnLabels.size(), 1) - 0.5);
    plot_->yAxis->setRange(-0.5, std::max<double>(grid_.rowLabels.size(), 1) - 0.5);
    updateTicks();
}

void HeatmapView::updateTicks() {
    const double lineHeight = QFontMetricsF(plot_->xAxis->tickLabelFont()).height();
    // `spacing`: the room a label needs along its axis, in text lines.
    const auto ticks = [lineHeight](const QStringList& labels, const QCPRange& range, double pixels,
                                    double spacing) {
        auto ticker = QSharedPointer<QCPAxisTickerText>::create();
        const double perLabel = pixels / std::max(1.0, range.size());
        const int step = std::max(1, static_cast<int>(std::ceil(lineHeight * spacing / perLabel)));
        for (int i = 0; i < labels.size(); i += step) {
            ticker->addTick(i, labels[i]);
        }
        return ticker;
    };
    // Column labels are slanted: neighbours closer than 1.6 lines overlap.
    plot_->xAxis->setTicker(
        ticks(grid_.columnLabels, plot_->xAxis->range(), plot_->axisRect()->width(), 1.6));
    plot_->yAxis->setTicker(
        ticks(grid_.rowLabels, plot_->yAxis->range(), plot_->axisRect()->height(), 1.25));
    // Group lines closer than a few pixels (hundreds of layers in view) would stripe the
    // whole map: they show again when zoomed in.
    const double pixelsPerRow =
        plot_->axisRect()->height() / std::max(1.0, plot_->yAxis->range().size());
    const bool spaced = fewestGroupRows_ * pixelsPerRow >= kFewestPixelsBetweenLines;
    for (QCPItemStraightLine* line : separators_) {
        line->setVisible(spaced);
    }
    plot_->replot();
}

void HeatmapView::resizeEvent(QResizeEvent* event) {
    QWidget::resizeEvent(event);
    QTimer::singleShot(0, this, &HeatmapView::updateTicks);  // once the plot has its size
}

bool HeatmapView::selectResult(std::size_t result, std::optional<int> rank) {
    const auto cell = cellOf(result, rank);
    if (!cell) {
        selected_.reset();
        selectionMarker_->setVisible(false);
        plot_->replot();
        return false;
    }
    selectCell(*cell);
    return true;
}

void HeatmapView::selectCell(std::size_t cell) {
    selected_ = cell;
    const ErrorGridCell& c = grid_.cells[cell];
    // Inside the cell, so that a selected first fault still shows its own frame.
    placeRect(selectionMarker_, c.column, c.row, 0.34);
    selectionMarker_->setVisible(true);
    plot_->replot();
}

std::optional<std::size_t> HeatmapView::selectedResult() const {
    return selected_ ? std::optional(grid_.cells[*selected_].result) : std::nullopt;
}

std::optional<int> HeatmapView::selectedRank() const {
    return selected_ ? grid_.cells[*selected_].rank : std::nullopt;
}

std::optional<std::size_t> HeatmapView::cellOf(std::size_t result, std::optional<int> rank) const {
    for (std::size_t i = 0; i < grid_.cells.size(); ++i) {
        const ErrorGridCell& cell = grid_.cells[i];
        if (cell.result == result && (!rank || !cell.rank || cell.rank == rank)) {
            return i;
        }
    }
    return std::nullopt;
}

void HeatmapView::placeRect(QCPItemRect* rect, int column, int row, double halfSize) {
    rect->topLeft->setCoords(column - halfSize, row - halfSize);
    rect->bottomRight->setCoords(column + halfSize, row + halfSize);
}

std::optional<std::size_t> HeatmapView::resultUnder(const QCPItemRect* rect) const {
    const QPointF a = rect->topLeft->coords();
    const auto column = static_cast<long>(std::lround(a.x() + 0.5));
    const auto row = static_cast<long>(std::lround(a.y() + 0.5));
    if (column < 0 || row < 0 || column >= grid_.columnLabels.size() ||
        row >= grid_.rowLabels.size()) {
        return std::nullopt;
    }
    const auto cell = cellAt_[static_cast<std::size_t>(row) * grid_.columnLabels.size() +
                              static_cast<std::size_t>(column)];
    return cell ? std::optional(grid_.cells[*cell].result) : std::nullopt;
}

std::vector<std::size_t> HeatmapView::blindMarkResults() const {
    std::vector<std::size_t> results;
    for (const QCPItemRect* mark : blindMarks_) {
        if (const auto result = resultUnder(mark)) {
            results.push_back(*result);
        }
    }
    return results;
}

std::optional<std::size_t> HeatmapView::firstFaultMarkerResult() const {
    return faultMarker_->visible() ? resultUnder(faultMarker_) : std::nullopt;
}

std::optional<QPoint> HeatmapView::cellCenter(std::size_t result, std::optional<int> rank) const {
    const auto cell = cellOf(result, rank);
    if (!cell) {
        return std::nullopt;
    }
    const ErrorGridCell& c = grid_.cells[*cell];
    const QPoint inPlot(static_cast<int>(plot_->xAxis->coordToPixel(c.column)),
                        static_cast<int>(plot_->yAxis->coordToPixel(c.row)));
    return plot_->mapTo(this, inPlot);
}

std::optional<std::size_t> HeatmapView::cellAtPixel(const QPoint& pos) const {
    if (!plot_->axisRect()->rect().contains(pos)) {
        return std::nullopt;
    }
    const auto column = static_cast<long>(std::lround(plot_->xAxis->pixelToCoord(pos.x())));
    const auto row = static_cast<long>(std::lround(plot_->yAxis->pixelToCoord(pos.y())));
    if (column < 0 || row < 0 || column >= grid_.columnLabels.size() ||
        row >= grid_.rowLabels.size()) {
        return std::nullopt;
    }
    return cellAt_[static_cast<std::size_t>(row) * grid_.columnLabels.size() +
                   static_cast<std::size_t>(column)];
}

QString HeatmapView::tooltipFor(const ErrorGridCell& cell) const {
    if (!report_ || cell.result >= report_->comparison.results.size()) {
        return {};
    }
    const TensorResult& r = report_->comparison.results[cell.result];
    QString text = QStringLiteral("<b>%1</b>").arg(r.key.toString().toHtmlEscaped());
    if (static_cast<std::size_t>(cell.row) < grid_.rowBoxes.size()) {
        text +=
            QStringLiteral(
                "<br>%1: normalized error %2 (worst of its ranks; click to "
                "expand)")
                .arg(grid_.rowLabels[cell.row].toHtmlEscaped(), formatNumber(cell.normalizedError));
    } else if (cell.rank) {
        text += QStringLiteral("<br>rank %1: normalized error %2 (worst of its pieces)")
                    .arg(*cell.rank)
                    .arg(formatNumber(cell.normalizedError));
    }
    text += QStringLiteral(
                "<br>normalized error: %1%2<br>relative error: %3<br>"
                "threshold: %4 (%5)")
                .arg(formatNumber(r.normalizedError),
                     r.isFaulty() ? QStringLiteral(" &mdash; <b>faulty</b>") : QString(),
                     formatNumber(r.judgedError()), formatNumber(r.threshold.value),
                     thresholdMethodName(r.threshold.method));
    if (r.commonFactor != 1) {
        text += QStringLiteral(
                    "<br>beyond a factor %1 common to the iteration's gradients (measured: %2)")
                    .arg(QString::number(r.commonFactor, 'g', 8),
                         formatNumber(r.metrics.relativeError));
    }
    if (r.threshold.blind()) {
        text += QStringLiteral(
            "<br><b>blind</b> (hatched): a threshold of 1 or more cannot tell this tensor from "
            "zeros, so it is not effectively checked");
    }
    if (report_->localization.firstFaulty == cell.result) {
        text += QStringLiteral("<br><b>first faulty tensor</b>");
    }
    return text;
}

void HeatmapView::activate(std::size_t cell) {
    selectCell(cell);
    const ErrorGridCell& c = grid_.cells[cell];
    if (static_cast<std::size_t>(c.row) < grid_.rowBoxes.size()) {
        Q_EMIT rankGroupActivated(grid_.rowBoxes[static_cast<std::size_t>(c.row)]);
    } else if (c.rank) {
        Q_EMIT rankActivated(c.result, *c.rank);
    } else {
        Q_EMIT tensorActivated(c.result);
    }
}

void HeatmapView::showContextMenu(std::size_t cell, const QPoint& globalPos) {
    if (!report_) {
        return;
    }
    const ErrorGridCell& c = grid_.cells[cell];
    const int layer = report_->comparison.results[c.result].layer;
    QMenu menu(this);
    if (static_cast<std::size_t>(c.row) < grid_.rowBoxes.size()) {
        menu.addAction(QStringLiteral("&Expand ranks"), this, [this, cell] { activate(cell); });
        menu.addAction(QStringLiteral("&Open tensor"), this,
                       [this, result = c.result] { Q_EMIT tensorActivated(result); });
    } else {
        menu.addAction(QStringLiteral("&Open tensor"), this, [this, cell] { activate(cell); });
    }
    menu.addAction(layer >= 0 ? QStringLiteral("Show &ranks × layer %1").arg(layer)
                              : QStringLiteral("Show &ranks × tensors outside the layers"),
                   this, [this, layer] { Q_EMIT layerRanksRequested(layer); });
    menu.exec(globalPos);
}

void HeatmapView::contextMenuEvent(QContextMenuEvent* event) {
    std::optional<std::size_t> cell;
    if (event->reason() == QContextMenuEvent::Mouse) {
        cell = cellAtPixel(plot_->mapFrom(this, event->pos()));
    } else {
        cell = selected_;  // keyboard: the selected cell
    }
    if (cell) {
        selectCell(*cell);
        const ErrorGridCell& c = grid_.cells[*cell];
        const QPoint at = event->reason() == QContextMenuEvent::Mouse
                              ? event->globalPos()
                              : mapToGlobal(*cellCenter(c.result, c.rank));
        showContextMenu(*cell, at);
    }
    event->accept();
}

void HeatmapView::keyPressEvent(QKeyEvent* event) {
    if (grid_.cells.empty()) {
        QWidget::keyPressEvent(event);
        return;
    }
    if (event->key() == Qt::Key_Return || event->key() == Qt::Key_Enter) {
        if (selected_) {
            activate(*selected_);
        }
        return;
    }
    int dx = 0, dy = 0;
    switch (event->key()) {
        case Qt::Key_Left:
            dx = -1;
            break;
        case Qt::Key_Right:
            dx = 1;
            break;
        case Qt::Key_Up:
            dy = -1;
            break;
        case Qt::Key_Down:
            dy = 1;
            break;
        default:
            QWidget::keyPressEvent(event);
            return;
    }
    if (!selected_) {
        selectCell(0);
        return;
    }
    // The next cell holding a tensor in that direction, skipping empty ones.
    const ErrorGridCell& from = grid_.cells[*selected_];
    int column = from.column + dx, row = from.row + dy;
    const int columns = static_cast<int>(grid_.columnLabels.size());
    const int rows = static_cast<int>(grid_.rowLabels.size());
    while (column >= 0 && row >= 0 && column < columns && row < rows) {
        if (const auto cell = cellAt_[static_cast<std::size_t>(row) * grid_.columnLabels.size() +
                                      static_cast<std::size_t>(column)]) {
            selectCell(*cell);
            return;
        }
        column += dx;
        row += dy;
    }
}

void HeatmapView::onMousePress(QMouseEvent* event) {
    pressPos_ = event->pos();
    setFocus(Qt::MouseFocusReason);
}

void HeatmapView::onMouseRelease(QMouseEvent* event) {
    // A release near the press is a click; farther, it ended a pan.
    if (event->button() != Qt::LeftButton ||
        (event->pos() - pressPos_).manhattanLength() > QApplication::startDragDistance()) {
        return;
    }
    if (const auto cell = cellAtPixel(event->pos())) {
        activate(*cell);
    }
}

void HeatmapView::onMouseMove(QMouseEvent* event) {
    if (event->buttons() != Qt::NoButton) {
        return;
    }
    if (const auto cell = cellAtPixel(event->pos())) {
        QToolTip::showText(event->globalPosition().toPoint(), tooltipFor(grid_.cells[*cell]),
                           plot_);
    } else {
        QToolTip::hideText();
    }
}

}  // namespace ttrace

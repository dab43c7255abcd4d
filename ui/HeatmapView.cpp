#include "HeatmapView.h"

#include <QMouseEvent>
#include <QPushButton>
#include <QToolTip>
#include <QVBoxLayout>
#include <cmath>

#include "report/ErrorColorMap.h"
#include "report/ReportText.h"

// qcustomplot.h uses the Qt keywords `signals` and `foreach`, which QT_NO_KEYWORDS removes
// for our own code.
#define signals Q_SIGNALS
#define foreach Q_FOREACH
#include <qcustomplot.h>
#undef foreach
#undef signals

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

QString columnLabel(const HeatmapColumn& column) {
    return tensorKindName(column.kind) + QLatin1Char(' ') + column.label();
}

}  // namespace

HeatmapView::HeatmapView(QWidget* parent) : QWidget(parent) {
    plot_ = new QCustomPlot(this);
    plot_->setObjectName(QStringLiteral("heatmapPlot"));
    plot_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    plot_->setMouseTracking(true);  // tooltips without a button held
    plot_->axisRect()->setBackground(QBrush(QColor(0xe4, 0xe4, 0xe4)));  // empty cells: grey

    for (QCPAxis* axis : {plot_->xAxis, plot_->yAxis}) {
        axis->grid()->setVisible(false);
        axis->setSubTicks(false);
        QFont font = axis->tickLabelFont();
        font.setPointSizeF(font.pointSizeF() * 0.85);
        axis->setTickLabelFont(font);
    }
    plot_->xAxis->setTickLabelRotation(60);
    plot_->yAxis->setRangeReversed(true);  // first module on top

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

    auto* reset = new QPushButton(QStringLiteral("Reset view"), this);
    reset->setObjectName(QStringLiteral("resetView"));
    reset->setToolTip(QStringLiteral("Show the whole heatmap again (wheel zooms, drag pans)"));
    connect(reset, &QPushButton::clicked, this, &HeatmapView::resetView);

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(plot_, 1);
    layout->addWidget(reset, 0, Qt::AlignRight);

    connect(plot_, &QCustomPlot::mousePress, this, &HeatmapView::onMousePress);
    connect(plot_, &QCustomPlot::mouseRelease, this, &HeatmapView::onMouseRelease);
    connect(plot_, &QCustomPlot::mouseMove, this, &HeatmapView::onMouseMove);
    clear();
}

HeatmapView::~HeatmapView() = default;

void HeatmapView::clear() {
    setReport(nullptr);
}

void HeatmapView::setReport(std::shared_ptr<const CheckReport> report) {
    report_ = std::move(report);
    grid_ = report_ ? buildHeatmapGrid(report_->comparison.results) : HeatmapGrid{};
    selected_.reset();
    plot_->clearItems();  // layer separators and markers of the previous report
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

    const int columns = static_cast<int>(grid_.columns.size());
    const int rows = static_cast<int>(grid_.rows.size());
    // QCPColorMapData needs two cells per axis to know a cell's size; an extra one stays empty.
    const int dataColumns = std::max(columns, 2);
    const int dataRows = std::max(rows, 2);
    map_->data()->setSize(dataColumns, dataRows);
    map_->data()->setRange(QCPRange(0, dataColumns - 1), QCPRange(0, dataRows - 1));
    map_->data()->fill(kMissing);
    cellResult_.assign(static_cast<std::size_t>(columns) * static_cast<std::size_t>(rows),
                       std::nullopt);
    cellCount_ = 0;
    for (const HeatmapCell& cell : grid_.cells) {
        const double error = report_->comparison.results[cell.result].normalizedError;
        map_->data()->setCell(static_cast<int>(cell.column), static_cast<int>(cell.row),
                              cellValue(error));
        auto& slot = cellResult_[cell.row * grid_.columns.size() + cell.column];
        if (!slot) {
            ++cellCount_;
        }
        slot = cell.result;
    }

    auto rowTicks = QSharedPointer<QCPAxisTickerText>::create();
    for (int r = 0; r < rows; ++r) {
        rowTicks->addTick(r, grid_.rows[static_cast<std::size_t>(r)].module);
        // A line between layers groups the rows.
        if (r > 0 && grid_.rows[static_cast<std::size_t>(r)].layer !=
                         grid_.rows[static_cast<std::size_t>(r - 1)].layer) {
            auto* line = new QCPItemStraightLine(plot_);
            line->point1->setCoords(0, r - 0.5);
            line->point2->setCoords(1, r - 0.5);
            line->setPen(QPen(QColor(0x60, 0x60, 0x60), 1));
            line->setSelectable(false);
        }
    }
    plot_->yAxis->setTicker(rowTicks);
    auto columnTicks = QSharedPointer<QCPAxisTickerText>::create();
    for (int c = 0; c < columns; ++c) {
        columnTicks->addTick(c, columnLabel(grid_.columns[static_cast<std::size_t>(c)]));
    }
    plot_->xAxis->setTicker(columnTicks);

    if (report_ && report_->localization.firstFaulty) {
        if (const auto cell = cellOf(*report_->localization.firstFaulty)) {
            placeRect(faultHalo_, *cell);
            placeRect(faultMarker_, *cell);
            faultHalo_->setVisible(true);
            faultMarker_->setVisible(true);
        }
    }
    resetView();
}

void HeatmapView::resetView() {
    plot_->xAxis->setRange(-0.5, std::max<double>(grid_.columns.size(), 1) - 0.5);
    plot_->yAxis->setRange(-0.5, std::max<double>(grid_.rows.size(), 1) - 0.5);
    plot_->replot();
}

void HeatmapView::selectResult(std::size_t result) {
    const auto cell = cellOf(result);
    if (!cell) {
        return;
    }
    selected_ = result;
    // Inside the cell, so that a selected first fault still shows its own frame.
    placeRect(selectionMarker_, *cell, 0.34);
    selectionMarker_->setVisible(true);
    plot_->replot();
}

std::optional<HeatmapView::CellPos> HeatmapView::cellOf(std::size_t result) const {
    for (const HeatmapCell& cell : grid_.cells) {
        if (cell.result == result) {
            return CellPos{static_cast<int>(cell.column), static_cast<int>(cell.row)};
        }
    }
    return std::nullopt;
}

void HeatmapView::placeRect(QCPItemRect* rect, const CellPos& cell, double halfSize) {
    rect->topLeft->setCoords(cell.column - halfSize, cell.row - halfSize);
    rect->bottomRight->setCoords(cell.column + halfSize, cell.row + halfSize);
}

std::optional<std::size_t> HeatmapView::firstFaultMarkerResult() const {
    if (!faultMarker_->visible()) {
        return std::nullopt;
    }
    const QPointF a = faultMarker_->topLeft->coords();
    const QPointF b = faultMarker_->bottomRight->coords();
    const auto column = static_cast<long>(std::lround((a.x() + b.x()) / 2));
    const auto row = static_cast<long>(std::lround((a.y() + b.y()) / 2));
    if (column < 0 || row < 0 || static_cast<std::size_t>(column) >= grid_.columns.size() ||
        static_cast<std::size_t>(row) >= grid_.rows.size()) {
        return std::nullopt;
    }
    return cellResult_[static_cast<std::size_t>(row) * grid_.columns.size() +
                       static_cast<std::size_t>(column)];
}

std::optional<QPoint> HeatmapView::cellCenter(std::size_t result) const {
    const auto cell = cellOf(result);
    if (!cell) {
        return std::nullopt;
    }
    const QPoint inPlot(static_cast<int>(plot_->xAxis->coordToPixel(cell->column)),
                        static_cast<int>(plot_->yAxis->coordToPixel(cell->row)));
    return plot_->mapTo(this, inPlot);
}

std::optional<std::size_t> HeatmapView::resultAtPixel(const QPoint& pos) const {
    if (!report_ || !plot_->axisRect()->rect().contains(pos)) {
        return std::nullopt;
    }
    const auto column = static_cast<long>(std::lround(plot_->xAxis->pixelToCoord(pos.x())));
    const auto row = static_cast<long>(std::lround(plot_->yAxis->pixelToCoord(pos.y())));
    if (column < 0 || row < 0 || static_cast<std::size_t>(column) >= grid_.columns.size() ||
        static_cast<std::size_t>(row) >= grid_.rows.size()) {
        return std::nullopt;
    }
    return cellResult_[static_cast<std::size_t>(row) * grid_.columns.size() +
                       static_cast<std::size_t>(column)];
}

QString HeatmapView::tooltipFor(std::size_t result) const {
    const TensorResult& r = report_->comparison.results[result];
    QString text = QStringLiteral(
                       "<b>%1</b><br>normalized error: %2%3<br>relative error: %4<br>"
                       "threshold: %5 (%6)")
                       .arg(r.key.toString().toHtmlEscaped(), formatNumber(r.normalizedError),
                            r.isFaulty() ? QStringLiteral(" &mdash; <b>faulty</b>") : QString(),
                            formatNumber(r.metrics.relativeError), formatNumber(r.threshold.value),
                            thresholdMethodName(r.threshold.method));
    if (report_->localization.firstFaulty == result) {
        text += QStringLiteral("<br><b>first faulty tensor</b>");
    }
    return text;
}

void HeatmapView::onMousePress(QMouseEvent* event) {
    pressPos_ = event->pos();
}

void HeatmapView::onMouseRelease(QMouseEvent* event) {
    // A release near the press is a click; farther, it ended a pan.
    if (event->button() != Qt::LeftButton ||
        (event->pos() - pressPos_).manhattanLength() > QApplication::startDragDistance()) {
        return;
    }
    if (const auto result = resultAtPixel(event->pos())) {
        selectResult(*result);
        Q_EMIT tensorActivated(*result);
    }
}

void HeatmapView::onMouseMove(QMouseEvent* event) {
    if (event->buttons() != Qt::NoButton) {
        return;
    }
    if (const auto result = resultAtPixel(event->pos())) {
        QToolTip::showText(event->globalPosition().toPoint(), tooltipFor(*result), plot_);
    } else {
        QToolTip::hideText();
    }
}

}  // namespace ttrace

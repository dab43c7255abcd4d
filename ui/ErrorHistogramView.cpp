#include "ErrorHistogramView.h"

#include <QEvent>
#include <QLabel>
#include <QPainter>
#include <QVBoxLayout>
#include <cmath>

#include "PlotStyle.h"
#include "report/ErrorColorMap.h"
#include "report/ReportText.h"

namespace ttrace {

namespace {

using report_text::formatNumber;

constexpr double kBinWidth = 1.0 / ErrorHistogram::kBinsPerDecade;  // in decades

QString decadeLabel(int decade) {
    return QStringLiteral("1e%1").arg(decade);
}

}  // namespace

ErrorHistogramView::ErrorHistogramView(QWidget* parent) : QWidget(parent) {
    setObjectName(QStringLiteral("errorHistogram"));
    plot_ = new QCustomPlot(this);
    plot_->setObjectName(QStringLiteral("errorHistogramPlot"));
    plot_->setMinimumHeight(150);
    plot_->xAxis->setLabel(QStringLiteral("element relative error |d−r| / |r| (log)"));
    plot_->yAxis->setLabel(QStringLiteral("elements"));
    plot_->yAxis->setScaleType(QCPAxis::stLogarithmic);
    plot_->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>::create());
    plot_->yAxis->setNumberFormat(QStringLiteral("eb"));
    plot_->yAxis->setNumberPrecision(0);
    for (QCPAxis* axis : {plot_->xAxis, plot_->yAxis}) {
        axis->grid()->setVisible(false);
        QFont font = axis->tickLabelFont();
        font.setPointSizeF(font.pointSizeF() * 0.85);
        axis->setTickLabelFont(font);
        axis->setLabelFont(font);
    }
    caption_ = new QLabel(this);
    caption_->setObjectName(QStringLiteral("errorHistogramCaption"));
    caption_->setWordWrap(true);
    caption_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(plot_, 1);
    layout->addWidget(caption_);
    applyPalette();
    showMessage(QString());
}

ErrorHistogramView::~ErrorHistogramView() = default;

void ErrorHistogramView::showMessage(const QString& message) {
    plot_->clearPlottables();
    plot_->clearItems();
    plot_->setVisible(false);
    profile_.reset();
    aboveThreshold_ = 0;
    caption_->setText(message);
}

void ErrorHistogramView::showProfile(std::shared_ptr<const ElementErrorProfile> profile,
                                     double threshold) {
    plot_->clearPlottables();
    plot_->clearItems();
    plot_->setVisible(true);
    profile_ = profile;
    threshold_ = threshold;
    const ErrorHistogram& h = profile->histogram;
    // Two series: one colour below the threshold, another at and above it (as on the heatmap).
    auto* below = new QCPBars(plot_->xAxis, plot_->yAxis);
    auto* above = new QCPBars(plot_->xAxis, plot_->yAxis);
    below->setName(QStringLiteral("below the threshold"));
    above->setName(QStringLiteral("at or above the threshold"));
    below->setBrush(QColor(errorColor(0.1)));
    above->setBrush(QColor(errorColor(10)));
    aboveThreshold_ = 0;
    int first = ErrorHistogram::kBinCount, last = -1;
    double peak = 1;
    for (int b = 0; b < ErrorHistogram::kBinCount; ++b) {
        const auto count = h.bins[static_cast<std::size_t>(b)];
        if (count == 0) {
            continue;
        }
        first = std::min(first, b);
        last = std::max(last, b);
        peak = std::max(peak, static_cast<double>(count));
        const double centre = ErrorHistogram::kMinDecade + (b + 0.5) * kBinWidth;
        const bool isAbove = threshold > 0 && ErrorHistogram::lowerEdge(b) >= threshold;
        (isAbove ? above : below)->addData(centre, static_cast<double>(count));
        if (isAbove) {
            aboveThreshold_ += count;
        }
    }
    aboveThreshold_ += h.above;
    for (QCPBars* bars : {below, above}) {
        bars->setWidth(kBinWidth * 0.9);
        bars->setBaseValue(0.5);  // log axis: bars grow from below one element
        bars->setPen(Qt::NoPen);
    }

    // Show the occupied bins and the threshold, a decade of margin either side.
    const double thresholdDecade = threshold > 0 ? std::log10(threshold) : 0;
    double lo = first <= last ? ErrorHistogram::kMinDecade + first * kBinWidth : thresholdDecade;
    double hi =
        first <= last ? ErrorHistogram::kMinDecade + (last + 1) * kBinWidth : thresholdDecade;
    if (threshold > 0) {
        lo = std::min(lo, thresholdDecade);
        hi = std::max(hi, thresholdDecade);
    }
    lo = std::floor(lo) - 1;
    hi = std::ceil(hi) + 1;
    auto ticks = QSharedPointer<QCPAxisTickerText>::create();
    const int step = hi - lo > 8 ? 2 : 1;
    for (int d = static_cast<int>(lo); d <= static_cast<int>(hi); d += step) {
        ticks->addTick(d, decadeLabel(d));
    }
    plot_->xAxis->setTicker(ticks);
    plot_->xAxis->setRange(lo, hi);
    plot_->yAxis->setRange(0.5, peak * 2);

    if (threshold > 0) {
        auto* line = new QCPItemStraightLine(plot_);
        line->point1->setCoords(thresholdDecade, 1);
        line->point2->setCoords(thresholdDecade, 2);
        line->setPen(QPen(palette().color(QPalette::WindowText), 1.5, Qt::DashLine));
        auto* label = new QCPItemText(plot_);
        label->position->setTypeX(QCPItemPosition::ptPlotCoords);
        label->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
        label->position->setCoords(thresholdDecade, 0.02);
        label->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
        label->setPadding(QMargins(4, 0, 0, 0));
        label->setColor(palette().color(QPalette::WindowText));
        label->setText(QStringLiteral("threshold ") + formatNumber(threshold));
    }
    plot_->replot();

    QStringList parts;
    parts << QStringLiteral("%1 elements").arg(h.total());
    parts << QStringLiteral("%1 at or above the threshold").arg(aboveThreshold_);
    if (h.exact > 0) {
        parts << QStringLiteral("%1 exactly equal (not drawn)").arg(h.exact);
    }
    if (h.below > 0) {
        parts << QStringLiteral("%1 below 1e%2").arg(h.below).arg(ErrorHistogram::kMinDecade);
    }
    if (h.above > 0) {
        parts << QStringLiteral("%1 at or above 1e%2, NaN or Inf (not drawn)")
                     .arg(h.above)
                     .arg(ErrorHistogram::kMaxDecade);
    }
    caption_->setText(parts.join(QStringLiteral("; ")));
}

QImage ErrorHistogramView::toImage(const QSize& size) const {
    const QFontMetrics metrics(caption_->font());
    const QString text = caption_->text();
    const QRect textRect =
        metrics.boundingRect(QRect(0, 0, size.width(), size.height()), Qt::TextWordWrap, text);
    const int plotHeight = std::max(1, size.height() - textRect.height() - 4);
    QImage out(size, QImage::Format_RGB32);
    out.fill(palette().color(QPalette::Window));
    QPainter painter(&out);
    painter.drawPixmap(0, 0, plot_->toPixmap(size.width(), plotHeight));
    painter.setPen(palette().color(QPalette::WindowText));
    painter.setFont(caption_->font());
    painter.drawText(QRect(0, plotHeight + 4, size.width(), textRect.height()), Qt::TextWordWrap,
                     text);
    return out;
}

QString ErrorHistogramView::caption() const {
    return caption_->text();
}

void ErrorHistogramView::applyPalette() {
    applyPlotPalette(plot_, palette());
    plot_->replot();
}

void ErrorHistogramView::changeEvent(QEvent* event) {
    if (event->type() == QEvent::PaletteChange) {
        applyPalette();
        if (profile_) {
            showProfile(profile_, threshold_);  // the threshold line and label too
        }
    }
    QWidget::changeEvent(event);
}

}  // namespace ttrace

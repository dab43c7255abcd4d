#include "ElementErrorImage.h"

#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>
#include <cmath>

#include "report/ErrorColorMap.h"
#include "report/ReportText.h"

namespace ttrace {

namespace {

using report_text::formatNumber;

constexpr int kLevels = 600;  // colours per scale, as the heatmap's gradient
constexpr int kAxisMargin = 4;

// Colours of the scale sampled once: tens of thousands of pixels, a handful of distinct hues.
const std::vector<QRgb>& colourTable() {
    static const std::vector<QRgb> table = [] {
        std::vector<QRgb> colours(kLevels + 1);
        for (int i = 0; i <= kLevels; ++i) {
            const double decade =
                kErrorColorMinDecade + (kErrorColorMaxDecade - kErrorColorMinDecade) * i / kLevels;
            colours[static_cast<std::size_t>(i)] = QColor(errorColor(std::pow(10.0, decade))).rgb();
        }
        return colours;
    }();
    return table;
}

QRgb colourOf(double normalized) {
    if (!(normalized > 0)) {
        return colourTable().front();
    }
    if (!std::isfinite(normalized)) {
        return colourTable().back();
    }
    const double position = (std::log10(normalized) - kErrorColorMinDecade) /
                            (kErrorColorMaxDecade - kErrorColorMinDecade);
    int level = std::clamp(static_cast<int>(std::lround(position * kLevels)), 0, kLevels);
    // The scale steps at 1.0: just above it is never the colour of 1.0 itself.
    if (normalized > 1) {
        level = std::max(level, kLevels / 2 + 1);
    }
    return colourTable()[static_cast<std::size_t>(level)];
}

// Whether the element (row, column) of the 2-D view lies in `shard`.
bool holds(const ShardFootprint& shard, std::int64_t row, std::int64_t column) {
    return std::any_of(shard.rects.begin(), shard.rects.end(), [&](const ElementRect& e) {
        return row >= e.rowStart && row < e.rowStop && column >= e.columnStart &&
               column < e.columnStop;
    });
}

}  // namespace

ElementErrorImage::ElementErrorImage(QWidget* parent) : QWidget(parent) {
    setObjectName(QStringLiteral("elementErrorImage"));
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
    setMouseTracking(true);
}

void ElementErrorImage::showMessage(const QString& message) {
    profile_.reset();
    faulty_.clear();
    image_ = QImage();
    message_ = message;
    update();
}

void ElementErrorImage::showProfile(std::shared_ptr<const ElementErrorProfile> profile,
                                    double threshold, std::vector<std::size_t> faultyShards) {
    profile_ = std::move(profile);
    threshold_ = threshold;
    faulty_ = std::move(faultyShards);
    message_.clear();
    const ErrorImage& source = profile_->image;
    image_ = QImage(std::max(1, source.width), std::max(1, source.height), QImage::Format_RGB32);
    image_.fill(Qt::lightGray);
    for (int r = 0; r < source.height; ++r) {
        auto* line = reinterpret_cast<QRgb*>(image_.scanLine(r));
        for (int c = 0; c < source.width; ++c) {
            const double error = source.at(r, c);
            line[c] = colourOf(threshold_ > 0 ? error / threshold_ : (error > 0 ? HUGE_VAL : 0.0));
        }
    }
    update();
}

void ElementErrorImage::setSelectedRank(std::optional<int> rank) {
    selectedRank_ = rank;
    update();
}

QSize ElementErrorImage::sizeHint() const {
    return {360, 220};
}

QSize ElementErrorImage::minimumSizeHint() const {
    return {120, 80};
}

QRectF ElementErrorImage::imageRect(const QRect& bounds) const {
    // One line of caption below the image; one more when it says the shards are not
    // outlined, and one for a reference laid out otherwise.
    const int reference = profile_ && !profile_->referenceShards.empty() ? 1 : 0;
    const auto above = [&](int lines) {
        return QRectF(bounds).adjusted(kAxisMargin, kAxisMargin, -kAxisMargin,
                                       -kAxisMargin - (lines + reference) * fontMetrics().height());
    };
    const QRectF oneLine = above(1);
    return !profile_ || shardsFitOutlines(profile_->shards, oneLine) ? oneLine : above(2);
}

QRectF ElementErrorImage::toWidget(const ElementRect& rect, const QRectF& area) const {
    const ErrorImage& image = profile_->image;
    const double sx = area.width() / std::max<std::int64_t>(1, image.columns);
    const double sy = area.height() / std::max<std::int64_t>(1, image.rows);
    return QRectF(area.left() + rect.columnStart * sx, area.top() + rect.rowStart * sy,
                  (rect.columnStop - rect.columnStart) * sx, (rect.rowStop - rect.rowStart) * sy);
}

void ElementErrorImage::drawShard(QPainter& painter, const ShardFootprint& shard,
                                  const QRectF& area, const QPen& under, const QPen& over) const {
    for (const QPen& pen : {under, over}) {
        if (pen.style() == Qt::NoPen) {
            continue;
        }
        painter.setPen(pen);
        for (const ElementRect& rect : shard.rects) {
            painter.drawRect(toWidget(rect, area).adjusted(1, 1, -1, -1));
        }
    }
}

bool ElementErrorImage::outlinesShardsAt(const QSize& size) const {
    return profile_ && shardsFitOutlines(profile_->shards, imageRect(QRect(QPoint(0, 0), size)));
}

bool ElementErrorImage::shardsFitOutlines(const std::vector<ShardFootprint>& shards,
                                          const QRectF& area) const {
    for (const ShardFootprint& shard : shards) {
        for (const ElementRect& rect : shard.rects) {
            const QRectF drawn = toWidget(rect, area);
            if (drawn.width() < kSmallestOutlined || drawn.height() < kSmallestOutlined) {
                return false;
            }
        }
    }
    return true;
}

void ElementErrorImage::paintEvent(QPaintEvent*) {
    QPainter painter(this);
    paint(painter, rect());
}

QImage ElementErrorImage::toImage(const QSize& size) const {
    QImage out(size, QImage::Format_RGB32);
    out.fill(palette().color(QPalette::Window));
    QPainter painter(&out);
    painter.setFont(font());
    paint(painter, out.rect());
    return out;
}

void ElementErrorImage::paint(QPainter& painter, const QRect& bounds) const {
    if (!profile_ || image_.isNull()) {
        painter.setPen(palette().color(QPalette::PlaceholderText));
        painter.drawText(bounds, Qt::AlignCenter | Qt::TextWordWrap,
                         message_.isEmpty() ? QStringLiteral("Click a heatmap cell to see the "
                                                             "errors of its elements.")
                                            : message_);
        return;
    }
    const QRectF area = imageRect(bounds);
    painter.drawImage(area, image_);  // nearest pixel: blocks stay sharp
    painter.setBrush(Qt::NoBrush);
    const ErrorImage& image = profile_->image;
    // Outlines a few pixels apart: thousands of data-parallel shards would hide the image
    // under their frames, so then only the selected rank's shard (and a few faulty ones) is.
    const bool outlined = shardsFitOutlines(profile_->shards, area);
    const auto& referenceShards = profile_->referenceShards;
    const bool referenceOutlined =
        !referenceShards.empty() && shardsFitOutlines(referenceShards, area);
    const bool faultyFramed = outlined || faulty_.size() <= kMostFramesOverSmallShards;
    painter.setPen(palette().color(QPalette::WindowText));
    QString caption = QStringLiteral("%1 rows (leading dims) x %2 columns (last dim)%3")
                          .arg(image.rows)
                          .arg(image.columns)
                          .arg(image.rows > image.height || image.columns > image.width
                                   ? QStringLiteral(", max per block")
                                   : QString());
    if (!outlined) {
        caption += QStringLiteral("\n%1 shards, too small to outline (hover for each)")
                       .arg(profile_->shards.size());
    }
    if (!referenceShards.empty()) {
        caption += QStringLiteral("\nthe reference laid out in %1 other pieces%2")
                       .arg(referenceShards.size())
                       .arg(referenceOutlined ? QStringLiteral(", dash-dotted in blue")
                                              : QStringLiteral(", too small to outline"));
    }
    painter.drawText(
        QRectF(area.left(), area.bottom() + 1, area.width(), 3 * fontMetrics().height()),
        Qt::AlignLeft | Qt::AlignTop, caption);
    // Every shard's outline first, then the faulty ones and the selected rank on top.
    const QColor line = palette().color(QPalette::WindowText);
    if (outlined) {
        for (const ShardFootprint& shard : profile_->shards) {
            drawShard(painter, shard, area, QPen(Qt::NoPen), QPen(line, 1, Qt::DotLine));
        }
    }
    // The reference's own cuts, where its rounding may change: under the faulty frames.
    if (referenceOutlined) {
        for (const ShardFootprint& shard : referenceShards) {
            drawShard(painter, shard, area, QPen(Qt::NoPen),
                      QPen(QColor(0x30, 0x90, 0xff), 1.5, Qt::DashDotLine));
        }
    }
    if (faultyFramed) {
        for (const std::size_t index : faulty_) {
            if (index < profile_->shards.size()) {
                drawShard(painter, profile_->shards[index], area, QPen(Qt::black, 5),
                          QPen(Qt::white, 2));
            }
        }
    }
    if (selectedRank_) {
        for (const ShardFootprint& shard : profile_->shards) {
            if (std::find(shard.ranks.begin(), shard.ranks.end(), *selectedRank_) !=
                shard.ranks.end()) {
                drawShard(painter, shard, area, QPen(Qt::NoPen),
                          QPen(QColor(0xff, 0xe0, 0x00), 2.5, Qt::DashLine));
            }
        }
    }
}

QString ElementErrorImage::toolTipAt(const QPoint& pos) const {
    const QRectF area = imageRect(rect());
    if (!profile_ || !area.contains(pos)) {
        return {};
    }
    const ErrorImage& image = profile_->image;
    const int c = std::clamp(static_cast<int>((pos.x() - area.left()) / area.width() * image.width),
                             0, image.width - 1);
    const int r =
        std::clamp(static_cast<int>((pos.y() - area.top()) / area.height() * image.height), 0,
                   image.height - 1);
    const double error = image.at(r, c);
    const std::int64_t row = image.rowStart(r), column = image.columnStart(c);
    QString text = QStringLiteral("rows %1–%2, columns %3–%4\nmax element error %5")
                       .arg(row)
                       .arg(image.rowStart(r + 1) - 1)
                       .arg(column)
                       .arg(image.columnStart(c + 1) - 1)
                       .arg(formatNumber(error));
    if (threshold_ > 0) {
        text += QStringLiteral(" (%1 x threshold)").arg(formatNumber(error / threshold_));
    }
    for (std::size_t s = 0; s < profile_->shards.size(); ++s) {
        const ShardFootprint& shard = profile_->shards[s];
        if (holds(shard, row, column)) {
            text += QStringLiteral("\nshard %1 on ranks %2%3")
                        .arg(shard.ranges.toString(), formatRankList(shard.ranks),
                             std::find(faulty_.begin(), faulty_.end(), s) != faulty_.end()
                                 ? QStringLiteral(" (above tolerance)")
                                 : QString());
        }
    }
    for (const ShardFootprint& shard : profile_->referenceShards) {
        if (holds(shard, row, column)) {
            text += QStringLiteral("\nreference piece %1 on ranks %2")
                        .arg(shard.ranges.toString(), formatRankList(shard.ranks));
        }
    }
    return text;
}

bool ElementErrorImage::event(QEvent* event) {
    if (event->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(event);
        const QString text = toolTipAt(help->pos());
        if (text.isEmpty()) {
            QToolTip::hideText();
            event->ignore();
        } else {
            QToolTip::showText(help->globalPos(), text, this);
        }
        return true;
    }
    return QWidget::event(event);
}

}  // namespace ttrace

#include "RankGrid.h"

#include <QEvent>
#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>
#include <cmath>
#include <map>

#include "RankGroups.h"
#include "report/ErrorColorMap.h"
#include "report/ReportText.h"

namespace ttrace {

namespace {

constexpr double kMaxCellWidth = 90;
constexpr double kMaxCellHeight = 44;
constexpr int kFallbackColumns = 8;
// Past this many mesh rows (thousands of ranks), rows are blocks of them.
constexpr int kMostRows = 48;

// NaN is worse than any number: a rank with a non-finite piece shows it.
double worse(double a, double b) {
    if (std::isnan(a) || std::isnan(b)) {
        return std::nan("");
    }
    return std::max(a, b);
}

bool isDark(const QColor& c) {
    return 0.299 * c.red() + 0.587 * c.green() + 0.114 * c.blue() < 140;
}

}  // namespace

const QColor RankGrid::kNoData = QColor(0xc8, 0xc8, 0xc8);

RankGrid::RankGrid(QWidget* parent) : QWidget(parent) {
    setObjectName(QStringLiteral("rankGrid"));
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
}

void RankGrid::clear() {
    cells_.clear();
    selectedRank_.reset();
    rowLabels_.clear();
    columnLabels_.clear();
    rows_ = columns_ = 0;
    banded_ = false;
    updateGeometry();
    update();
}

void RankGrid::showResult(const CheckReport& report, std::size_t result,
                          const std::vector<ShardResult>& shards) {
    clear();
    if (result >= report.comparison.results.size()) {
        return;
    }
    const Manifest& manifest = report.distributed.manifest;
    std::map<int, double> worst;
    for (const ShardResult& shard : shards) {
        for (const int rank : shard.ranks) {
            const auto it = worst.find(rank);
            worst[rank] = it == worst.end() ? shard.normalizedError
                                            : worse(it->second, shard.normalizedError);
        }
    }
    std::vector<int> outlined;
    const auto& faulty = report.localization.faultyShard;
    // When no shard stands out, framing every rank would say nothing.
    if (faulty && faulty->result == result && faulty->standsOut) {
        outlined = faulty->ranks;
    }

    std::vector<RankEntry> ranks = manifest.ranks;
    if (ranks.empty()) {
        for (int r = 0; r < manifest.worldSize; ++r) {
            ranks.push_back({r, QString(), {}});
        }
    }
    const std::vector<int>& shape = manifest.meshShape;
    const bool onMesh = !shape.empty() && manifest.meshAxes.size() == shape.size() &&
                        std::all_of(ranks.begin(), ranks.end(), [&](const RankEntry& e) {
                            if (e.coords.size() != shape.size()) {
                                return false;
                            }
                            for (std::size_t i = 0; i < shape.size(); ++i) {
                                if (e.coords[i] < 0 || e.coords[i] >= shape[i]) {
                                    return false;
                                }
                            }
                            return true;
                        });

    // Row labels leave out axes of size 1 ("cp0" in a job without context parallelism).
    const auto leadingLabel = [&](const std::vector<std::pair<int, int>>& ranges) {
        QStringList parts;
        for (std::size_t a = 0; a + 1 < shape.size(); ++a) {
            if (shape[a] == 1) {
                continue;
            }
            const auto [first, last] = ranges[a];
            parts << manifest.meshAxes[a] + (first == last
                                                 ? QString::number(first)
                                                 : QStringLiteral("%1-%2").arg(first).arg(last));
        }
        return parts.join(QLatin1Char(' '));
    };
    if (onMesh) {
        const std::size_t last = shape.size() - 1;
        columns_ = shape[last];
        rows_ = 1;
        for (std::size_t i = 0; i < last; ++i) {
            rows_ *= shape[i];
        }
        for (int c = 0; c < columns_; ++c) {
            columnLabels_ << manifest.meshAxes[last] + QString::number(c);
        }
        rowLabels_ = QStringList(rows_, QString());
    } else {
        // No usable mesh: ranks in reading order, a fixed number per row.
        columns_ = std::clamp(static_cast<int>(ranks.size()), 1, kFallbackColumns);
        rows_ = (static_cast<int>(ranks.size()) + columns_ - 1) / columns_;
        for (int r = 0; r < rows_; ++r) {
            rowLabels_ << QStringLiteral("rank %1").arg(r * columns_);
        }
    }

    for (std::size_t i = 0; i < ranks.size(); ++i) {
        const RankEntry& entry = ranks[i];
        Cell cell;
        cell.rank = entry.rank;
        if (onMesh) {
            const std::size_t last = shape.size() - 1;
            QStringList rowParts;
            std::vector<std::pair<int, int>> at;
            int row = 0;
            for (std::size_t a = 0; a < last; ++a) {
                row = row * shape[a] + entry.coords[a];
                rowParts << manifest.meshAxes[a] + QString::number(entry.coords[a]);
                at.emplace_back(entry.coords[a], entry.coords[a]);
            }
            cell.row = row;
            cell.column = entry.coords[last];
            rowLabels_[row] = leadingLabel(at);
            cell.coords = (rowParts << columnLabels_[cell.column]).join(QLatin1Char(' '));
        } else {
            cell.row = static_cast<int>(i) / columns_;
            cell.column = static_cast<int>(i) % columns_;
        }
        if (const auto it = worst.find(entry.rank); it != worst.end()) {
            cell.error = it->second;
        }
        cell.outlined = std::find(outlined.begin(), outlined.end(), entry.rank) != outlined.end();
        cells_.push_back(cell);
    }
    if (onMesh && rows_ > kMostRows) {
        bandRows(manifest, leadingLabel);
    }
    updateGeometry();
    update();
}

void RankGrid::bandRows(
    const Manifest& manifest,
    const std::function<QString(const std::vector<std::pair<int, int>>&)>& leadingLabel) {
    // The ranks of the first column stand for their rows: blocks of them along the leading
    // axes, as the ranks x layer view groups ranks (the data-parallel axis cut first).
    std::vector<int> firstColumn;
    for (const Cell& cell : cells_) {
        if (cell.column == 0) {
            firstColumn.push_back(cell.rank);
        }
    }
    std::sort(firstColumn.begin(), firstColumn.end());
    const RankSpace space(manifest, firstColumn);
    const auto groups = groupRanks(space, firstColumn, static_cast<std::size_t>(kMostRows));
    std::map<int, int> bandOfRow;  // mesh row -> band
    std::map<int, int> rowOfRank;
    for (const Cell& cell : cells_) {
        rowOfRank[cell.rank] = cell.row;
    }
    rowLabels_.clear();
    for (std::size_t g = 0; g < groups.size(); ++g) {
        for (const int member : groups[g].members) {
            bandOfRow[rowOfRank[member]] = static_cast<int>(g);
        }
        rowLabels_ << leadingLabel(groups[g].box.ranges);
    }
    for (Cell& cell : cells_) {
        cell.row = bandOfRow[cell.row];
    }
    rows_ = static_cast<int>(groups.size());
    banded_ = true;
    // The worst of a band's ranks is painted last, so that it is the one seen.
    const auto rankOf = [](const Cell& cell) {
        return !cell.error ? -1.0 : std::isnan(*cell.error) ? INFINITY : *cell.error;
    };
    std::stable_sort(cells_.begin(), cells_.end(),
                     [&](const Cell& a, const Cell& b) { return rankOf(a) < rankOf(b); });
}

RankGrid::Geometry RankGrid::geometry() const {
    Geometry g;
    const QFontMetrics fm = fontMetrics();
    double labelWidth = 0;
    for (const QString& label : rowLabels_) {
        labelWidth = std::max<double>(labelWidth, fm.horizontalAdvance(label));
    }
    if (labelWidth > 0) {
        labelWidth += 8;
    }
    const double headerHeight = columnLabels_.isEmpty() ? 0 : fm.height() + 4;
    const QRectF area = QRectF(rect()).adjusted(1 + labelWidth, 1 + headerHeight, -1, -1);
    if (rows_ <= 0 || columns_ <= 0 || area.width() <= 0 || area.height() <= 0) {
        return g;
    }
    g.cellWidth = std::min(kMaxCellWidth, area.width() / columns_);
    g.cellHeight = std::min(kMaxCellHeight, area.height() / rows_);
    g.grid = QRectF(area.topLeft(), QSizeF(g.cellWidth * columns_, g.cellHeight * rows_));
    // Thousands of ranks leave no room for words; colours alone still tell the story.
    g.labels =
        g.cellHeight >= fm.height() && g.cellWidth >= fm.horizontalAdvance(QStringLiteral("r000"));
    return g;
}

QSize RankGrid::sizeHint() const {
    const QFontMetrics fm = fontMetrics();
    int labelWidth = 0;
    for (const QString& label : rowLabels_) {
        labelWidth = std::max(labelWidth, fm.horizontalAdvance(label) + 8);
    }
    const int columns = std::min(std::max(columns_, 1), 16);
    const int rows = std::min(std::max(rows_, 1), 16);
    return {labelWidth + columns * 60 + 2, fm.height() + 6 + rows * 36};
}

QSize RankGrid::minimumSizeHint() const {
    return {80, 40};
}

void RankGrid::paintEvent(QPaintEvent*) {
    QPainter painter(this);
    const Geometry g = geometry();
    if (cells_.empty() || g.grid.isEmpty()) {
        painter.setPen(palette().color(QPalette::PlaceholderText));
        painter.drawText(rect(), Qt::AlignCenter | Qt::TextWordWrap,
                         QStringLiteral("Click a heatmap cell to see its ranks."));
        return;
    }
    painter.setPen(palette().color(QPalette::WindowText));
    for (int c = 0; c < columnLabels_.size(); ++c) {
        painter.drawText(QRectF(g.grid.left() + c * g.cellWidth, 0, g.cellWidth, g.grid.top()),
                         Qt::AlignCenter, columnLabels_[c]);
    }
    // Every k-th row label, so that they never overlap.
    const int step =
        std::max(1, static_cast<int>(std::ceil(fontMetrics().height() / g.cellHeight)));
    for (int r = 0; r < rowLabels_.size(); r += step) {
        painter.drawText(QRectF(0, g.grid.top() + r * g.cellHeight, g.grid.left() - 6,
                                std::max<double>(g.cellHeight, fontMetrics().height())),
                         Qt::AlignRight | Qt::AlignTop, rowLabels_[r]);
    }
    for (const Cell& cell : cells_) {
        const QRectF box(g.grid.left() + cell.column * g.cellWidth,
                         g.grid.top() + cell.row * g.cellHeight, g.cellWidth, g.cellHeight);
        const QColor fill = cellColor(cell.rank);
        // A gap between cells, where they are big enough to spare it.
        const double gap = std::min(g.cellWidth, g.cellHeight) >= 6 ? 1 : 0;
        painter.fillRect(box.adjusted(gap, gap, -gap, -gap), fill);
        if (g.labels) {
            painter.setPen(isDark(fill) ? Qt::white : Qt::black);
            QString text = QStringLiteral("r%1").arg(cell.rank);
            if (cell.error && g.cellHeight >= 2 * fontMetrics().height()) {
                text += QLatin1Char('\n') + report_text::formatNumber(*cell.error);
            }
            painter.drawText(box, Qt::AlignCenter, text);
        }
    }
    // Outlines last so that neighbours do not paint over them: black under white, visible on
    // every colour of the scale (as the heatmap's first-fault frame).
    for (const Cell& cell : cells_) {
        if (!cell.outlined) {
            continue;
        }
        const QRectF box(g.grid.left() + cell.column * g.cellWidth,
                         g.grid.top() + cell.row * g.cellHeight, g.cellWidth, g.cellHeight);
        painter.setBrush(Qt::NoBrush);
        painter.setPen(QPen(Qt::black, 4));
        painter.drawRect(box.adjusted(2, 2, -2, -2));
        painter.setPen(QPen(Qt::white, 2));
        painter.drawRect(box.adjusted(2, 2, -2, -2));
    }
    if (const Cell* cell = selectedRank_ ? cellOfRank(*selectedRank_) : nullptr) {
        const QRectF box(g.grid.left() + cell->column * g.cellWidth,
                         g.grid.top() + cell->row * g.cellHeight, g.cellWidth, g.cellHeight);
        painter.setBrush(Qt::NoBrush);
        painter.setPen(QPen(QColor(0xff, 0xe0, 0x00), 2.5, Qt::DashLine));
        painter.drawRect(box.adjusted(5, 5, -5, -5));
    }
}

std::optional<int> RankGrid::rankAt(const QPoint& pos) const {
    const Cell* cell = cellAt(pos);
    return cell ? std::optional(cell->rank) : std::nullopt;
}

void RankGrid::setSelectedRank(std::optional<int> rank) {
    selectedRank_ = rank;
    update();
}

void RankGrid::mouseReleaseEvent(QMouseEvent* event) {
    const Cell* cell = event->button() == Qt::LeftButton ? cellAt(event->pos()) : nullptr;
    if (cell && cell->error) {
        Q_EMIT rankClicked(cell->rank);
    }
    QWidget::mouseReleaseEvent(event);
}

bool RankGrid::event(QEvent* event) {
    if (event->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(event);
        if (const Cell* cell = cellAt(help->pos())) {
            QToolTip::showText(help->globalPos(), cellToolTip(cell->rank), this);
        } else {
            QToolTip::hideText();
            event->ignore();
        }
        return true;
    }
    return QWidget::event(event);
}

const RankGrid::Cell* RankGrid::cellAt(const QPoint& pos) const {
    const Geometry g = geometry();
    if (!g.grid.contains(pos)) {
        return nullptr;
    }
    return cellShownAt(static_cast<int>((pos.y() - g.grid.top()) / g.cellHeight),
                       static_cast<int>((pos.x() - g.grid.left()) / g.cellWidth));
}

const RankGrid::Cell* RankGrid::cellShownAt(int row, int column) const {
    // The one painted last: of a band of ranks, the worst.
    for (auto it = cells_.rbegin(); it != cells_.rend(); ++it) {
        if (it->row == row && it->column == column) {
            return &*it;
        }
    }
    return nullptr;
}

std::optional<int> RankGrid::rankShownAt(int row, int column) const {
    const Cell* cell = cellShownAt(row, column);
    return cell ? std::optional(cell->rank) : std::nullopt;
}

const RankGrid::Cell* RankGrid::cellOfRank(int rank) const {
    for (const Cell& cell : cells_) {
        if (cell.rank == rank) {
            return &cell;
        }
    }
    return nullptr;
}

QColor RankGrid::cellColor(int rank) const {
    const Cell* cell = cellOfRank(rank);
    return cell && cell->error ? QColor(errorColor(*cell->error)) : kNoData;
}

QString RankGrid::cellToolTip(int rank) const {
    const Cell* cell = cellOfRank(rank);
    if (!cell) {
        return {};
    }
    QString text;
    if (banded_) {
        text = rowLabels_.value(cell->row) + QStringLiteral(", ") +
               columnLabels_.value(cell->column) + QStringLiteral(": the worst of its ranks is\n");
    }
    text += QStringLiteral("rank %1").arg(rank);
    if (!cell->coords.isEmpty()) {
        text += QStringLiteral(" (") + cell->coords + QLatin1Char(')');
    }
    text += QLatin1Char('\n');
    text += cell->error ? QStringLiteral("normalized error %1 (worst of its pieces)")
                              .arg(report_text::formatNumber(*cell->error))
                        : QStringLiteral("holds no piece of this tensor");
    if (cell->outlined) {
        text += QStringLiteral("\nin the faulty shard");
    }
    return text;
}

bool RankGrid::isOutlined(int rank) const {
    const Cell* cell = cellOfRank(rank);
    return cell && cell->outlined;
}

}  // namespace ttrace

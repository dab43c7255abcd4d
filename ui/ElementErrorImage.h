#pragma once

#include <QImage>
#include <QWidget>

class QPainter;
#include <memory>
#include <optional>
#include <vector>

#include "compare/ElementErrorProfile.h"

namespace ttrace {

// The downsampled element-error image of one tensor (rows: leading dimensions flattened,
// columns: the last one), coloured like the heatmap by element error / threshold on the log
// scale, with the distributed run's shards drawn over it: thin lines for every shard, a
// black-and-white frame for shards above tolerance, a dashed yellow one for the selected rank,
// and a reference laid out over ranks in other pieces dash-dotted in blue.
// Shards too small to outline (thousands of data-parallel ones) are not, but for the selected
// rank's and a few faulty ones: their frames would hide the image.
class ElementErrorImage : public QWidget {
    Q_OBJECT

public:
    explicit ElementErrorImage(QWidget* parent = nullptr);

    // `faultyShards`: indices into profile->shards drawn as faulty.
    void showProfile(std::shared_ptr<const ElementErrorProfile> profile, double threshold,
                     std::vector<std::size_t> faultyShards);
    void setSelectedRank(std::optional<int> rank);
    void showMessage(const QString& message);

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

    // For tests: the profile shown, the faulty shards, the rendered image (one pixel per
    // profile pixel), the selected rank.
    std::shared_ptr<const ElementErrorProfile> profile() const { return profile_; }
    const std::vector<std::size_t>& faultyShards() const { return faulty_; }
    const QImage& image() const { return image_; }
    std::optional<int> selectedRank() const { return selectedRank_; }
    QString toolTipAt(const QPoint& pos) const;
    // The same drawing at `size`, for reports (the widget may be hidden or small).
    QImage toImage(const QSize& size) const;
    // Whether every shard is outlined when drawn at `size`.
    bool outlinesShardsAt(const QSize& size) const;

protected:
    void paintEvent(QPaintEvent* event) override;
    bool event(QEvent* event) override;

private:
    void paint(QPainter& painter, const QRect& bounds) const;
    QRectF imageRect(const QRect& bounds) const;
    QRectF toWidget(const ElementRect& rect, const QRectF& area) const;
    void drawShard(QPainter& painter, const ShardFootprint& shard, const QRectF& area,
                   const QPen& under, const QPen& over) const;
    // Whether every one of `shards` is drawn at least kSmallestOutlined pixels wide and high
    // in `area`.
    bool shardsFitOutlines(const std::vector<ShardFootprint>& shards, const QRectF& area) const;

    static constexpr double kSmallestOutlined = 6;
    // Faulty shards framed even when the shards are too small to outline.
    static constexpr std::size_t kMostFramesOverSmallShards = 8;

    std::shared_ptr<const ElementErrorProfile> profile_;
    double threshold_ = 0;
    std::vector<std::size_t> faulty_;
    std::optional<int> selectedRank_;
    QImage image_;
    QString message_;
};

}  // namespace ttrace

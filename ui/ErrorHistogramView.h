#pragma once

#include <QImage>
#include <QWidget>
#include <cstdint>
#include <memory>

#include "compare/ElementErrorProfile.h"

class QCustomPlot;
class QLabel;

namespace ttrace {

// Histogram of one tensor's element relative errors on log-spaced bins (log count axis),
// bins below the tensor's threshold in blue and at or above it in red, the threshold drawn
// as a line. Calls QCustomPlot (as HeatmapView does), nothing else of the UI does.
class ErrorHistogramView : public QWidget {
    Q_OBJECT

public:
    explicit ErrorHistogramView(QWidget* parent = nullptr);
    ~ErrorHistogramView() override;

    void showProfile(std::shared_ptr<const ElementErrorProfile> profile, double threshold);
    void showMessage(const QString& message);  // "computing…", an error, or nothing to show

    // For tests: elements counted in the bins at or above the threshold line, the caption.
    std::int64_t countAboveThreshold() const { return aboveThreshold_; }
    QString caption() const;
    void applyPalette();  // axis and text colours from the widget's palette
    // The plot drawn at `size` with its caption below, for reports.
    QImage toImage(const QSize& size) const;

protected:
    void changeEvent(QEvent* event) override;

private:
    QCustomPlot* plot_ = nullptr;
    QLabel* caption_ = nullptr;
    std::int64_t aboveThreshold_ = 0;
    std::shared_ptr<const ElementErrorProfile> profile_;  // shown, redrawn on palette changes
    double threshold_ = 0;
};

}  // namespace ttrace

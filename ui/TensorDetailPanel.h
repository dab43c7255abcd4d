#pragma once

#include <QWidget>
#include <cstddef>
#include <memory>
#include <optional>

#include "report/CheckReport.h"

class QLabel;
class QTableWidget;
class QTabWidget;

namespace ttrace {

class ElementErrorImage;
class ErrorHistogramView;
class RankGrid;
struct ElementErrorProfile;

// One tensor in detail. Summary tab: its statistics against the threshold, every shard and
// replica with its ranks and global ranges (those above tolerance highlighted), the ranks on
// the device mesh coloured by error, and replica mismatches. Elements tab: the histogram of
// its element errors against the threshold and the element-error image with the shard
// layout, from a profile computed elsewhere (showProfile).
class TensorDetailPanel : public QWidget {
    Q_OBJECT

public:
    explicit TensorDetailPanel(QWidget* parent = nullptr);

    void setReport(std::shared_ptr<const CheckReport> report);  // clears the tensor shown
    // Shows a tensor, `rank` selected (its shard rows and outline stand out); the element
    // views say "computing…" until showProfile.
    void showResult(std::size_t resultIndex, std::optional<int> rank = std::nullopt);
    // The element profile of the tensor shown; one of another tensor is ignored.
    void showProfile(std::shared_ptr<const ElementErrorProfile> profile);
    void showProfileError(const QString& message);

    std::optional<std::size_t> currentResult() const { return current_; }
    std::optional<int> selectedRank() const { return rank_; }
    QString titleText() const;
    RankGrid* rankGrid() const { return ranks_; }
    ErrorHistogramView* histogram() const { return histogram_; }
    ElementErrorImage* elementImage() const { return image_; }
    QTabWidget* tabs() const { return tabs_; }

Q_SIGNALS:
    // The user picked a rank of the tensor shown (a click on the Ranks grid).
    void rankChosen(int rank);

private:
    void clearTables();
    QWidget* makeSummaryTab();
    QWidget* makeElementsTab();

    QLabel* title_ = nullptr;
    QTabWidget* tabs_ = nullptr;
    ErrorHistogramView* histogram_ = nullptr;
    ElementErrorImage* image_ = nullptr;
    QTableWidget* statistics_ = nullptr;
    QTableWidget* shards_ = nullptr;
    RankGrid* ranks_ = nullptr;
    QLabel* mismatchesLabel_ = nullptr;
    QTableWidget* mismatches_ = nullptr;
    std::shared_ptr<const CheckReport> report_;
    std::optional<std::size_t> current_;
    std::shared_ptr<const std::vector<ShardResult>> currentShards_;  // those of current_
    std::optional<int> rank_;
};

}  // namespace ttrace

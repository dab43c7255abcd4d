#pragma once

#include <QWidget>
#include <cstddef>
#include <memory>
#include <optional>

#include "report/CheckReport.h"

class QLabel;
class QTableWidget;

namespace ttrace {

class RankGrid;

// One tensor in detail: its statistics against the threshold, every shard and replica with
// its ranks and global ranges (those above tolerance highlighted), the ranks on the device
// mesh coloured by error, and replica mismatches.
class TensorDetailPanel : public QWidget {
    Q_OBJECT

public:
    explicit TensorDetailPanel(QWidget* parent = nullptr);

    void setReport(std::shared_ptr<const CheckReport> report);  // clears the tensor shown
    void showResult(std::size_t resultIndex);

    std::optional<std::size_t> currentResult() const { return current_; }
    QString titleText() const;
    RankGrid* rankGrid() const { return ranks_; }

private:
    void clearTables();

    QLabel* title_ = nullptr;
    QTableWidget* statistics_ = nullptr;
    QTableWidget* shards_ = nullptr;
    RankGrid* ranks_ = nullptr;
    QLabel* mismatchesLabel_ = nullptr;
    QTableWidget* mismatches_ = nullptr;
    std::shared_ptr<const CheckReport> report_;
    std::optional<std::size_t> current_;
};

}  // namespace ttrace

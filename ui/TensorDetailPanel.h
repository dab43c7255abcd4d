#pragma once

#include <QWidget>
#include <cstddef>
#include <memory>
#include <optional>

#include "report/CheckReport.h"

class QLabel;
class QTableWidget;

namespace ttrace {

// One tensor in detail: its statistics against the threshold, every shard and replica with
// its ranks and global ranges (those above tolerance highlighted), and replica mismatches.
class TensorDetailPanel : public QWidget {
    Q_OBJECT

public:
    explicit TensorDetailPanel(QWidget* parent = nullptr);

    void setReport(std::shared_ptr<const CheckReport> report);  // clears the tensor shown
    void showResult(std::size_t resultIndex);

    std::optional<std::size_t> currentResult() const { return current_; }
    QString titleText() const;

private:
    void clearTables();

    QLabel* title_ = nullptr;
    QTableWidget* statistics_ = nullptr;
    QTableWidget* shards_ = nullptr;
    QLabel* mismatchesLabel_ = nullptr;
    QTableWidget* mismatches_ = nullptr;
    std::shared_ptr<const CheckReport> report_;
    std::optional<std::size_t> current_;
};

}  // namespace ttrace

#include "TensorDetailPanel.h"

#include <QBrush>
#include <QColor>
#include <QLabel>
#include <QVBoxLayout>

#include "RankGrid.h"
#include "ReadOnlyTable.h"
#include "report/ReportText.h"

namespace ttrace {

namespace {

using report_text::formatNumber;

QString position(const std::vector<std::int64_t>& index) {
    QStringList parts;
    for (const std::int64_t i : index) {
        parts << QString::number(i);
    }
    return QLatin1Char('[') + parts.join(QStringLiteral(", ")) + QLatin1Char(']');
}

QString shape(const std::vector<std::int64_t>& dims) {
    QStringList parts;
    for (const std::int64_t d : dims) {
        parts << QString::number(d);
    }
    return QLatin1Char('[') + parts.join(QStringLiteral(" x ")) + QLatin1Char(']');
}

QString atPosition(double value, const std::vector<std::int64_t>& index) {
    return index.empty() ? formatNumber(value)
                         : formatNumber(value) + QStringLiteral(" at ") + position(index);
}

std::vector<QStringList> statisticsRows(const TensorResult& r) {
    const ErrorMetrics& m = r.metrics;
    const Threshold& t = r.threshold;
    std::vector<QStringList> rows = {
        {QStringLiteral("Normalized error"),
         formatNumber(r.normalizedError) + (r.isFaulty() ? QStringLiteral("  (faulty)")
                                                         : QStringLiteral("  (within tolerance)"))},
        {QStringLiteral("Relative error"), formatNumber(m.relativeError)},
        {QStringLiteral("Threshold"),
         formatNumber(t.value) + QStringLiteral(" by ") + thresholdMethodName(t.method) +
             (t.overridePattern.isEmpty()
                  ? QString()
                  : QStringLiteral(" (") + t.overridePattern + QLatin1Char(')'))},
        {QStringLiteral("Theoretical threshold"), formatNumber(t.theoretical)},
        {QStringLiteral("Perturbation error e_pert"),
         t.perturbationError ? formatNumber(*t.perturbationError)
                             : QStringLiteral("(no perturbed reference)")},
        {QStringLiteral("Perturbation threshold"),
         t.perturbationThreshold ? formatNumber(*t.perturbationThreshold) : QStringLiteral("-")},
        {QStringLiteral("Threshold floor"), formatNumber(t.floor)},
        {QStringLiteral("Max absolute error"), atPosition(m.maxAbsError, m.maxAbsIndex)},
        {QStringLiteral("Max relative error"), atPosition(m.maxRelError, m.maxRelIndex)},
        {QStringLiteral("Cosine similarity"), QString::number(m.cosine, 'g', 8)},
        {QStringLiteral("NaN / Inf (distributed)"),
         QStringLiteral("%1 / %2").arg(m.nanDist).arg(m.infDist)},
        {QStringLiteral("NaN / Inf (reference)"),
         QStringLiteral("%1 / %2").arg(m.nanRef).arg(m.infRef)},
        {QStringLiteral("Non-zero where reference is 0"), QString::number(m.zeroRefMismatches)},
        {QStringLiteral("Elements"), QString::number(m.count)},
        {QStringLiteral("Shape"), shape(r.globalShape)},
        {QStringLiteral("Dtype"), dtypeName(r.dtype)},
        {QStringLiteral("Layer"), r.layer >= 0 ? QString::number(r.layer) : QStringLiteral("-")},
    };
    if (r.expert >= 0) {
        rows.push_back({QStringLiteral("Expert"), QString::number(r.expert)});
    }
    for (const Diagnostic& d : r.diagnostics) {
        rows.push_back({severityName(d.severity), d.message});
    }
    return rows;
}

}  // namespace

TensorDetailPanel::TensorDetailPanel(QWidget* parent) : QWidget(parent) {
    title_ = new QLabel(this);
    title_->setObjectName(QStringLiteral("tensorTitle"));
    title_->setWordWrap(true);
    title_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    statistics_ = makeReadOnlyTable({QStringLiteral("Statistic"), QStringLiteral("Value")}, this);
    statistics_->setObjectName(QStringLiteral("statistics"));
    shards_ = makeReadOnlyTable(
        {QStringLiteral("Ranks"), QStringLiteral("Global ranges"), QStringLiteral("Replica"),
         QStringLiteral("Norm. error"), QStringLiteral("Rel. error"), QStringLiteral("Max abs")},
        this);
    shards_->setObjectName(QStringLiteral("shardTable"));
    ranks_ = new RankGrid(this);
    mismatchesLabel_ = new QLabel(this);
    mismatches_ = makeReadOnlyTable(
        {QStringLiteral("Ranks A"), QStringLiteral("Ranks B"), QStringLiteral("Global ranges"),
         QStringLiteral("Elements differing"), QStringLiteral("Max abs diff")},
        this);
    mismatches_->setObjectName(QStringLiteral("replicaMismatches"));

    auto* layout = new QVBoxLayout(this);
    layout->addWidget(title_);
    layout->addWidget(statistics_, 4);
    layout->addWidget(new QLabel(QStringLiteral("<b>Shards and replicas</b>"), this));
    layout->addWidget(shards_, 3);
    layout->addWidget(new QLabel(QStringLiteral("<b>Ranks</b> (worst piece of each rank; "
                                                "grey: holds none; framed: faulty shard)"),
                                 this));
    layout->addWidget(ranks_, 2);
    layout->addWidget(mismatchesLabel_);
    layout->addWidget(mismatches_, 1);
    clearTables();
}

void TensorDetailPanel::clearTables() {
    current_.reset();
    title_->setText(QStringLiteral("Click a heatmap cell to see its tensor."));
    fillTable(statistics_, {});
    fillTable(shards_, {});
    ranks_->clear();
    fillTable(mismatches_, {});
    mismatchesLabel_->setText(QStringLiteral("<b>Replica mismatches</b>"));
    mismatches_->setVisible(false);
}

void TensorDetailPanel::setReport(std::shared_ptr<const CheckReport> report) {
    report_ = std::move(report);
    clearTables();
}

void TensorDetailPanel::showResult(std::size_t resultIndex) {
    if (!report_ || resultIndex >= report_->comparison.results.size()) {
        return;
    }
    current_ = resultIndex;
    const TensorResult& r = report_->comparison.results[resultIndex];
    title_->setText(
        QStringLiteral("<b>%1</b>%2")
            .arg(r.key.toString().toHtmlEscaped(), report_->localization.firstFaulty == resultIndex
                                                       ? QStringLiteral("<br>first faulty tensor")
                                                       : QString()));
    fillTable(statistics_, statisticsRows(r));

    std::vector<QStringList> shardRows;
    for (const ShardResult& s : r.shards) {
        shardRows.push_back({report_text::formatRankList(s.ranks), s.ranges.toString(),
                             QString::number(s.replica), formatNumber(s.normalizedError),
                             formatNumber(s.metrics.relativeError),
                             formatNumber(s.metrics.maxAbsError)});
    }
    fillTable(shards_, shardRows);
    ranks_->showResult(*report_, resultIndex);
    // Shards above tolerance stand out in the light orange just above 1.0 on the heatmap.
    for (int row = 0; row < shards_->rowCount(); ++row) {
        const double error = r.shards[static_cast<std::size_t>(row)].normalizedError;
        if (!(error <= 1.0)) {
            for (int c = 0; c < shards_->columnCount(); ++c) {
                QTableWidgetItem* item = shards_->item(row, c);
                item->setBackground(QColor(0xfd, 0xdb, 0xc7));
                item->setForeground(QColor(0, 0, 0));
                QFont font = item->font();
                font.setBold(true);
                item->setFont(font);
            }
        }
    }

    std::vector<QStringList> mismatchRows;
    for (const ReplicaMismatch& m : r.replicaMismatches) {
        mismatchRows.push_back({report_text::formatRankList(m.ranksA),
                                report_text::formatRankList(m.ranksB), m.ranges.toString(),
                                QString::number(m.differingElements),
                                formatNumber(m.maxAbsDifference)});
    }
    fillTable(mismatches_, mismatchRows);
    mismatches_->setVisible(!mismatchRows.empty());
    mismatchesLabel_->setText(mismatchRows.empty()
                                  ? QStringLiteral("<b>Replica mismatches:</b> none")
                                  : QStringLiteral("<b>Replica mismatches</b>"));
}

QString TensorDetailPanel::titleText() const {
    return title_->text();
}

}  // namespace ttrace

#include "TensorDetailPanel.h"

#include <QBrush>
#include <QColor>
#include <QLabel>
#include <QTabWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "ElementErrorImage.h"
#include "ErrorHistogramView.h"
#include "RankGrid.h"
#include "ReadOnlyTable.h"
#include "compare/FaultDescription.h"
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

// How the tensor's stored values are scaled and what the scale check found: "E4M3 per block
// of [1 x 16] times a tensor scale (the reference's); largest difference 0.0476 of tolerance
// 1; 2 blocks not compared".
QString scalesText(const TensorResult& r) {
    const Fp8ScaleCheck& s = *r.fp8Scales;
    QString text = s.referenceFormat
                       ? scaleFormatName(*s.referenceFormat).toUpper() + QLatin1Char(' ')
                       : QString();
    text += s.referenceBlock.empty() ? QStringLiteral("per tensor")
                                     : QStringLiteral("per block of ") + shape(s.referenceBlock);
    if (s.referenceTensorScale) {
        text += QStringLiteral(" times a tensor scale");
    }
    text += QStringLiteral(" (the reference's); ");
    text += s.mismatches.empty()
                ? QStringLiteral("largest difference %1 of tolerance %2")
                      .arg(formatNumber(s.maxDifference), formatNumber(s.tolerance))
                : describeScaleMismatch(s, r.dtype);
    if (s.blocksNotCompared > 0) {
        text += QStringLiteral("; %1 blocks not compared").arg(s.blocksNotCompared);
    }
    if (s.dataParallelBlocks > 0) {
        text += QStringLiteral("; %1 blocks scaled by their data-parallel rank's own samples")
                    .arg(s.dataParallelBlocks);
    }
    return text;
}

std::vector<QStringList> statisticsRows(const TensorResult& r) {
    const ErrorMetrics& m = r.metrics;
    const Threshold& t = r.threshold;
    std::vector<QStringList> rows = {
        {QStringLiteral("Normalized error"),
         formatNumber(r.normalizedError) + (r.isFaulty() ? QStringLiteral("  (faulty)")
                                                         : QStringLiteral("  (within tolerance)"))},
        {QStringLiteral("Relative error"),
         r.commonFactor == 1
             ? formatNumber(m.relativeError)
             : formatNumber(r.judgedError()) +
                   QStringLiteral(" beyond a factor %1 common to the iteration's gradients "
                                  "(measured: %2)")
                       .arg(QString::number(r.commonFactor, 'g', 8),
                            formatNumber(m.relativeError))},
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
    if (r.fp8Scales) {
        rows.push_back(
            {scaleRecipe(*r.fp8Scales, r.dtype) + QStringLiteral(" scales"), scalesText(r)});
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
    tabs_ = new QTabWidget(this);
    tabs_->setObjectName(QStringLiteral("detailTabs"));
    tabs_->addTab(makeSummaryTab(), QStringLiteral("&Summary"));
    tabs_->addTab(makeElementsTab(), QStringLiteral("E&lements"));

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(title_);
    layout->addWidget(tabs_, 1);
    clearTables();
}

QWidget* TensorDetailPanel::makeSummaryTab() {
    auto* tab = new QWidget(this);
    statistics_ = makeReadOnlyTable({QStringLiteral("Statistic"), QStringLiteral("Value")}, tab);
    statistics_->setObjectName(QStringLiteral("statistics"));
    shards_ = makeReadOnlyTable(
        {QStringLiteral("Ranks"), QStringLiteral("Global ranges"), QStringLiteral("Replica"),
         QStringLiteral("Norm. error"), QStringLiteral("Rel. error"), QStringLiteral("Max abs")},
        tab);
    shards_->setObjectName(QStringLiteral("shardTable"));
    ranks_ = new RankGrid(tab);
    connect(ranks_, &RankGrid::rankClicked, this, &TensorDetailPanel::rankChosen);
    mismatchesLabel_ = new QLabel(tab);
    mismatches_ = makeReadOnlyTable(
        {QStringLiteral("Ranks A"), QStringLiteral("Ranks B"), QStringLiteral("Global ranges"),
         QStringLiteral("Elements differing"), QStringLiteral("Max abs diff")},
        tab);
    mismatches_->setObjectName(QStringLiteral("replicaMismatches"));

    auto* layout = new QVBoxLayout(tab);
    layout->addWidget(statistics_, 4);
    layout->addWidget(new QLabel(QStringLiteral("<b>Shards and replicas</b>"), tab));
    layout->addWidget(shards_, 3);
    layout->addWidget(new QLabel(QStringLiteral("<b>Ranks</b> (worst piece of each rank; "
                                                "grey: holds none; framed: faulty shard)"),
                                 tab));
    layout->addWidget(ranks_, 2);
    layout->addWidget(mismatchesLabel_);
    layout->addWidget(mismatches_, 1);
    return tab;
}

QWidget* TensorDetailPanel::makeElementsTab() {
    auto* tab = new QWidget(this);
    histogram_ = new ErrorHistogramView(tab);
    image_ = new ElementErrorImage(tab);
    auto* histogramLabel =
        new QLabel(QStringLiteral("<b>Element errors</b> against the threshold"), tab);
    auto* imageLabel =
        new QLabel(QStringLiteral("<b>Where they are</b> (colour: element error / threshold, "
                                  "as on the heatmap; framed: shards above tolerance; dashed: "
                                  "the selected rank's shard)"),
                   tab);
    imageLabel->setWordWrap(true);  // a long line must not widen the panel
    auto* layout = new QVBoxLayout(tab);
    layout->addWidget(histogramLabel);
    layout->addWidget(histogram_, 2);
    layout->addWidget(imageLabel);
    layout->addWidget(image_, 3);
    return tab;
}

void TensorDetailPanel::clearTables() {
    current_.reset();
    currentShards_.reset();
    rank_.reset();
    histogram_->showMessage(QString());
    image_->showMessage(QString());
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

void TensorDetailPanel::showResult(std::size_t resultIndex, std::optional<int> rank) {
    if (!report_ || resultIndex >= report_->comparison.results.size()) {
        return;
    }
    const bool sameTensor = current_ == resultIndex;
    current_ = resultIndex;
    rank_ = rank;
    image_->setSelectedRank(rank);
    if (!sameTensor) {
        histogram_->showMessage(QStringLiteral("computing…"));
        image_->showMessage(QStringLiteral("computing…"));
    }
    const TensorResult& r = report_->comparison.results[resultIndex];
    title_->setText(
        QStringLiteral("<b>%1</b>%2")
            .arg(r.key.toString().toHtmlEscaped(), report_->localization.firstFaulty == resultIndex
                                                       ? QStringLiteral("<br>first faulty tensor")
                                                       : QString()));
    fillTable(statistics_, statisticsRows(r));

    currentShards_ = report_->shardsOf(resultIndex);
    const std::vector<ShardResult>& shards = *currentShards_;
    std::vector<QStringList> shardRows;
    for (const ShardResult& s : shards) {
        shardRows.push_back({formatRankList(s.ranks), s.ranges.toString(),
                             QString::number(s.replica), formatNumber(s.normalizedError),
                             formatNumber(relativeErrorBeyondFactor(s.metrics, r.commonFactor)),
                             formatNumber(s.metrics.maxAbsError)});
    }
    fillTable(shards_, shardRows);
    ranks_->showResult(*report_, resultIndex, shards);
    ranks_->setSelectedRank(rank);
    // Shards above tolerance stand out in the light orange just above 1.0 on the heatmap.
    for (int row = 0; row < shards_->rowCount(); ++row) {
        const double error = shards[static_cast<std::size_t>(row)].normalizedError;
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
        mismatchRows.push_back({formatRankList(m.ranksA), formatRankList(m.ranksB),
                                m.ranges.toString(), QString::number(m.differingElements),
                                formatNumber(m.maxAbsDifference)});
    }
    // A forward and its recomputation under activation checkpointing must agree bit for bit
    // too; the trace holds the first, so no difference can be measured.
    for (const RecomputationMismatch& m : r.recomputationMismatches) {
        const QString rankText = formatRankList({m.rank});
        mismatchRows.push_back({rankText + QStringLiteral(" first forward"),
                                rankText + QStringLiteral(" recomputed"), m.ranges.toString(),
                                QStringLiteral("%1 of %2").arg(m.differingElements).arg(m.elements),
                                m.scalesDiffer ? QStringLiteral("quantization scales differ too")
                                               : QStringLiteral("not recorded")});
    }
    fillTable(mismatches_, mismatchRows);
    mismatches_->setVisible(!mismatchRows.empty());
    mismatchesLabel_->setText(
        mismatchRows.empty()
            ? QStringLiteral("<b>Replica and recomputation mismatches:</b> none")
            : QStringLiteral("<b>Replica and recomputation mismatches</b> (copies that must be "
                             "bitwise identical)"));
    if (rank) {
        for (int row = 0; row < shards_->rowCount(); ++row) {
            const auto& ranks = shards[static_cast<std::size_t>(row)].ranks;
            if (std::find(ranks.begin(), ranks.end(), *rank) != ranks.end()) {
                shards_->selectRow(row);
                break;
            }
        }
    }
}

void TensorDetailPanel::showProfile(std::shared_ptr<const ElementErrorProfile> profile) {
    if (!report_ || !current_ || !profile ||
        report_->comparison.results[*current_].key != profile->key) {
        return;
    }
    const TensorResult& r = report_->comparison.results[*current_];
    const std::vector<ShardResult>& shards = *currentShards_;
    // Shards above tolerance, matched to the profile's shards by their global ranges.
    std::vector<std::size_t> faulty;
    for (std::size_t s = 0; s < profile->shards.size(); ++s) {
        const bool above = std::any_of(shards.begin(), shards.end(), [&](const auto& shard) {
            return shard.ranges == profile->shards[s].ranges && !(shard.normalizedError <= 1.0);
        });
        if (above) {
            faulty.push_back(s);
        }
    }
    histogram_->showProfile(profile, r.threshold.value);
    image_->showProfile(std::move(profile), r.threshold.value, std::move(faulty));
}

void TensorDetailPanel::showProfileError(const QString& message) {
    histogram_->showMessage(QStringLiteral("The element errors could not be read: ") + message);
    image_->showMessage(QString());
}

QString TensorDetailPanel::titleText() const {
    return title_->text();
}

}  // namespace ttrace

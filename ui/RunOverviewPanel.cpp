#include "RunOverviewPanel.h"

#include <QEvent>
#include <QHeaderView>
#include <QLabel>
#include <QTableView>
#include <QTextDocumentFragment>
#include <QVBoxLayout>
#include <algorithm>

#include "DiagnosticsModel.h"
#include "ReadOnlyTable.h"
#include "report/ReportText.h"

namespace ttrace {

namespace {

QLabel* heading(const QString& text, QWidget* parent) {
    auto* label = new QLabel(QStringLiteral("<b>") + text + QStringLiteral("</b>"), parent);
    return label;
}

// The same blue / red as the heatmap's two sides of 1.0.
// Red for a bug, blue for none, orange when the check did not look at everything.
QString verdictStyle(Verdict verdict) {
    const auto style = [](const char* background, const char* border) {
        return QStringLiteral(
                   "QLabel { background: %1; border: 2px solid %2; padding: 6px; "
                   "color: #000000; }")
            .arg(QLatin1String(background), QLatin1String(border));
    };
    switch (verdict) {
        case Verdict::BugFound:
            return style("#fddbc7", "#b2182b");
        case Verdict::NoBug:
            return style("#d1e5f0", "#2166ac");
        case Verdict::NoBugInPart:
        case Verdict::NothingCompared:
            return style("#fee8c8", "#d95f0e");
    }
    return {};
}

}  // namespace

RunOverviewPanel::RunOverviewPanel(QWidget* parent) : QWidget(parent) {
    verdict_ = new QLabel(this);
    verdict_->setObjectName(QStringLiteral("verdict"));
    verdict_->setWordWrap(true);
    verdict_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    summary_ = makeReadOnlyTable({QStringLiteral("Finding"), QStringLiteral("Value")}, this);
    summary_->setObjectName(QStringLiteral("summary"));
    wrapText(summary_);
    runs_ = makeReadOnlyTable({}, this);
    runs_->setObjectName(QStringLiteral("runs"));
    diagnostics_ = new DiagnosticsModel(this);
    diagnosticsView_ = new QTableView(this);
    diagnosticsView_->setObjectName(QStringLiteral("diagnostics"));
    diagnosticsView_->setModel(diagnostics_);
    diagnosticsView_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    diagnosticsView_->setSelectionBehavior(QAbstractItemView::SelectRows);
    diagnosticsView_->verticalHeader()->setVisible(false);
    diagnosticsView_->setTextElideMode(Qt::ElideMiddle);
    QHeaderView* columns = diagnosticsView_->horizontalHeader();
    columns->setSectionResizeMode(DiagnosticsModel::SeverityColumn, QHeaderView::ResizeToContents);
    columns->setSectionResizeMode(DiagnosticsModel::MessageColumn, QHeaderView::Stretch);
    diagnosticsView_->viewport()->installEventFilter(this);  // refits at each new width

    layout_ = new QVBoxLayout(this);
    layout_->addWidget(verdict_);
    layout_->addWidget(summary_, 4);
    layout_->addWidget(heading(QStringLiteral("Runs"), this));
    layout_->addWidget(runs_, 3);
    layout_->addWidget(heading(QStringLiteral("Diagnostics"), this));
    layout_->addWidget(diagnosticsView_, 1);
    showMessage(QStringLiteral("Open trace folders (File > Open) to check a run."));
}

void RunOverviewPanel::showMessage(const QString& message) {
    verdict_->setStyleSheet(QString());
    verdict_->setText(message.toHtmlEscaped());
    fillTable(summary_, {});
    runs_->clear();
    runs_->setRowCount(0);
    runs_->setColumnCount(0);
    diagnostics_->setDiagnostics({});
}

void RunOverviewPanel::setReport(std::shared_ptr<const CheckReport> report) {
    if (!report) {
        showMessage(QString());
        return;
    }
    Diagnostics diagnostics = report_text::sortedDiagnostics(*report);
    verdict_->setStyleSheet(verdictStyle(report->verdict()));
    if (report->comparison.results.empty() && hasErrors(diagnostics)) {
        verdict_->setText(QStringLiteral("<b>The traces could not be compared:</b> errors in %1. "
                                         "The diagnostics below say what is wrong.")
                              .arg(report_text::erroneousParts(diagnostics).toHtmlEscaped()));
    } else {
        // The line starts with the verdict ("Bug found: ..."), so it needs no title.
        verdict_->setText(
            QStringLiteral("<b>%1</b>").arg(report_text::verdictLine(*report).toHtmlEscaped()));
    }

    std::vector<QStringList> summary;
    for (const auto& row : report_text::summaryRows(*report)) {
        summary.push_back(
            {row.item, row.detail.isEmpty() || row.detail == row.value
                           ? row.value
                           : row.value + QStringLiteral(" (") + row.detail + QLatin1Char(')')});
    }
    fillTable(summary_, summary);

    const report_text::ConfigTable config = report_text::runConfigTable(*report);
    runs_->clear();
    runs_->setColumnCount(static_cast<int>(config.titles.size()) + 1);
    runs_->setHorizontalHeaderLabels(QStringList{QStringLiteral("Setting")} + config.titles);
    std::vector<QStringList> rows;
    for (const auto& [setting, values] : config.rows) {
        rows.push_back(QStringList{setting} + values);
    }
    fillTable(runs_, rows);
    wrapText(runs_);  // after the columns exist: the modes are per column

    // Errors in the input are what the user must read first: their table takes the room.
    const bool errors = hasErrors(diagnostics);
    layout_->setStretchFactor(summary_, errors ? 2 : 4);
    layout_->setStretchFactor(diagnosticsView_, errors ? 4 : 1);
    // Wrapped rows cost a size computation each: a flood of diagnostics keeps a line a row.
    constexpr std::size_t kWrappedRows = 500;
    const bool wrap = diagnostics.size() <= kWrappedRows;
    diagnosticsView_->setWordWrap(wrap);
    diagnosticsView_->verticalHeader()->setSectionResizeMode(wrap ? QHeaderView::ResizeToContents
                                                                  : QHeaderView::Fixed);
    diagnostics_->setDiagnostics(std::move(diagnostics));
    fitDiagnosticsColumns();
}

// The message says what is wrong, so it gets the room: the file and tensor columns take their
// contents' width up to a quarter of the view each (elided in the middle, whole in the
// tooltip), and a long message wraps onto more lines instead of running off the edge.
void RunOverviewPanel::fitDiagnosticsColumns() {
    QHeaderView* columns = diagnosticsView_->horizontalHeader();
    const int cap = diagnosticsView_->viewport()->width() / 4;
    for (int column : {DiagnosticsModel::LocationColumn, DiagnosticsModel::TensorColumn}) {
        diagnosticsView_->resizeColumnToContents(column);
        columns->resizeSection(column, std::min(diagnosticsView_->columnWidth(column), cap));
    }
}

bool RunOverviewPanel::eventFilter(QObject* watched, QEvent* event) {
    if (watched == diagnosticsView_->viewport() && event->type() == QEvent::Resize) {
        fitDiagnosticsColumns();
    }
    return QWidget::eventFilter(watched, event);
}

QString RunOverviewPanel::verdictText() const {
    return QTextDocumentFragment::fromHtml(verdict_->text()).toPlainText();
}

QString RunOverviewPanel::finding(const QString& item) const {
    for (int r = 0; r < summary_->rowCount(); ++r) {
        if (summary_->item(r, 0) && summary_->item(r, 0)->text() == item) {
            return summary_->item(r, 1) ? summary_->item(r, 1)->text() : QString();
        }
    }
    return {};
}

}  // namespace ttrace

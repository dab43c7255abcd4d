#include "ReadOnlyTable.h"

#include <QHeaderView>

namespace ttrace {

QTableWidget* makeReadOnlyTable(const QStringList& headers, QWidget* parent) {
    auto* table = new QTableWidget(0, static_cast<int>(headers.size()), parent);
    table->setHorizontalHeaderLabels(headers);
    table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table->setSelectionBehavior(QAbstractItemView::SelectRows);
    table->setWordWrap(false);
    table->verticalHeader()->setVisible(false);
    table->verticalHeader()->setDefaultSectionSize(table->fontMetrics().height() + 6);
    // Figures fit their columns, the last one takes the rest; a few hundred rows are enough
    // to size a column, however many shards a tensor has.
    QHeaderView* header = table->horizontalHeader();
    header->setSectionResizeMode(QHeaderView::ResizeToContents);
    header->setStretchLastSection(true);
    header->setResizeContentsPrecision(200);
    table->setAlternatingRowColors(true);
    return table;
}

void fillTable(QTableWidget* table, const std::vector<QStringList>& rows) {
    table->clearContents();
    table->setRowCount(static_cast<int>(rows.size()));
    for (int r = 0; r < table->rowCount(); ++r) {
        const QStringList& row = rows[static_cast<std::size_t>(r)];
        for (int c = 0; c < table->columnCount() && c < row.size(); ++c) {
            auto* item = new QTableWidgetItem(row[c]);
            item->setToolTip(row[c]);
            table->setItem(r, c, item);
        }
    }
}

void wrapText(QTableWidget* table) {
    table->setWordWrap(true);
    table->setTextElideMode(Qt::ElideMiddle);
    QHeaderView* header = table->horizontalHeader();
    header->setSectionResizeMode(QHeaderView::Stretch);
    header->setSectionResizeMode(0, QHeaderView::ResizeToContents);
    table->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
}

}  // namespace ttrace

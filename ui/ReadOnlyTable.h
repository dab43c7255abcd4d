#pragma once

#include <QStringList>
#include <QTableWidget>

namespace ttrace {

// A read-only, row-selecting table of text, as every panel shows its figures.
QTableWidget* makeReadOnlyTable(const QStringList& headers, QWidget* parent);
// Replaces the contents with `rows` (one string per column) and fits the columns.
void fillTable(QTableWidget* table, const std::vector<QStringList>& rows);

}  // namespace ttrace

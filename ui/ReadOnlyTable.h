#pragma once

#include <QStringList>
#include <QTableWidget>

namespace ttrace {

// A read-only, row-selecting table of text, as every panel shows its figures.
QTableWidget* makeReadOnlyTable(const QStringList& headers, QWidget* parent);
// For short tables of sentences: the first column fits its contents, the others share the
// width and wrap (long paths elide in the middle; the tooltip has them whole).
void wrapText(QTableWidget* table);
// Replaces the contents with `rows` (one string per column).
void fillTable(QTableWidget* table, const std::vector<QStringList>& rows);

}  // namespace ttrace

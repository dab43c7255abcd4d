#pragma once

#include <QByteArray>
#include <QString>
#include <QStringList>
#include <optional>
#include <vector>

#include "compare/TensorResult.h"
#include "store/Sqlite.h"
#include "trace/Diagnostic.h"

// How results are laid out in the rows of the results store (ResultsSchema.cpp): shared by
// the store's reading and the RunWriter's writing.
namespace ttrace::result_rows {

template <typename Int>
QString intsToText(const std::vector<Int>& values) {
    QStringList parts;
    parts.reserve(static_cast<qsizetype>(values.size()));
    for (const auto value : values) {
        parts << QString::number(value);
    }
    return parts.join(QLatin1Char(','));
}

template <typename Int>
std::optional<std::vector<Int>> intsFromText(const QString& text) {
    std::vector<Int> values;
    if (text.isEmpty()) {
        return values;
    }
    for (const auto& part : text.split(QLatin1Char(','))) {
        bool ok = false;
        const qlonglong value = part.toLongLong(&ok);
        if (!ok) {
            return std::nullopt;
        }
        values.push_back(static_cast<Int>(value));
    }
    return values;
}

// ErrorMetrics as 15 consecutive columns, in the order of the schema's m_ / p_ columns.
inline constexpr int kMetricColumns = 15;
QString metricColumns(const QString& prefix);
void bindMetrics(sqlite::Statement& stmt, int first, const ErrorMetrics& m);
void bindNoMetrics(sqlite::Statement& stmt, int first);
std::optional<ErrorMetrics> readMetrics(const sqlite::Statement& stmt, int first);

// The columns of the tensors and shards tables, in the order saveTensor() binds and
// readTensor() / readShard() read them (tensor: idx first; shard: tensor_idx, idx first).
const QByteArray& tensorColumns();
inline constexpr int kTensorColumnCount = 11 + kMetricColumns + 1 + kMetricColumns + 9;
const QByteArray& shardColumns();
inline constexpr int kShardColumnCount = 5 + kMetricColumns + 1;

// INSERT INTO `table` (run_id, `columns`) with count + 1 placeholders.
QByteArray insertSql(const char* table, const QByteArray& columns, int count);
// SELECT `columns` FROM `table` WHERE run_id = ? ORDER BY `order`.
QByteArray selectSql(const QByteArray& columns, const char* table, const char* order);

// Inserts result `r` as the tensor `idx` of run `runId` with `stmt` (insertSql of tensors).
bool saveTensor(sqlite::Statement& stmt, qint64 runId, qint64 idx, const TensorResult& r);
std::optional<TensorResult> readTensor(const sqlite::Statement& stmt);
std::optional<ShardResult> readShard(const sqlite::Statement& row);

// Binds severity, file, dataset, tensor and message from column `first` on.
void bindDiagnostic(sqlite::Statement& stmt, int first, const Diagnostic& d);
std::optional<Diagnostic> readDiagnostic(const sqlite::Statement& stmt, int first);

}  // namespace ttrace::result_rows

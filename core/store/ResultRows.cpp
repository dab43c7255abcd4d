#include "store/ResultRows.h"

#include <QStringList>

namespace ttrace::result_rows {

using sqlite::Statement;

namespace {

// Stored names of enums: fixed here so that renaming a display name never breaks a cache.
QString methodToStored(ThresholdMethod method) {
    switch (method) {
        case ThresholdMethod::Perturbation:
            return QStringLiteral("perturbation");
        case ThresholdMethod::Theoretical:
            return QStringLiteral("theoretical");
        case ThresholdMethod::Override:
            return QStringLiteral("override");
        case ThresholdMethod::StepAllowance:
            return QStringLiteral("step_allowance");
    }
    return {};
}

std::optional<ThresholdMethod> methodFromStored(const QString& text) {
    for (const auto method : {ThresholdMethod::Perturbation, ThresholdMethod::Theoretical,
                              ThresholdMethod::Override, ThresholdMethod::StepAllowance}) {
        if (methodToStored(method) == text) {
            return method;
        }
    }
    return std::nullopt;
}

std::optional<Severity> severityFromStored(const QString& text) {
    for (const auto severity : {Severity::Info, Severity::Warning, Severity::Error}) {
        if (severityName(severity) == text) {
            return severity;
        }
    }
    return std::nullopt;
}

QByteArray placeholders(int count) {
    QByteArray text;
    for (int i = 0; i < count; ++i) {
        text += i == 0 ? "?" : ", ?";
    }
    return text;
}

}  // namespace

QString metricColumns(const QString& prefix) {
    static const char* const kNames[kMetricColumns] = {
        "count",         "rel_error", "max_abs",  "max_abs_index", "max_rel",
        "max_rel_index", "cosine",    "ref_norm", "dist_norm",     "zero_ref_mismatches",
        "nan_dist",      "inf_dist",  "nan_ref",  "inf_ref",       "bit_differences"};
    QStringList names;
    for (const char* name : kNames) {
        names << prefix + QLatin1String(name);
    }
    return names.join(QStringLiteral(", "));
}

void bindMetrics(Statement& stmt, int first, const ErrorMetrics& m) {
    stmt.bindInt(first, m.count);
    stmt.bindDouble(first + 1, m.relativeError);
    stmt.bindDouble(first + 2, m.maxAbsError);
    stmt.bindText(first + 3, intsToText(m.maxAbsIndex));
    stmt.bindDouble(first + 4, m.maxRelError);
    stmt.bindText(first + 5, intsToText(m.maxRelIndex));
    stmt.bindDouble(first + 6, m.cosine);
    stmt.bindDouble(first + 7, m.refNorm);
    stmt.bindDouble(first + 8, m.distNorm);
    stmt.bindInt(first + 9, m.zeroRefMismatches);
    stmt.bindInt(first + 10, m.nanDist);
    stmt.bindInt(first + 11, m.infDist);
    stmt.bindInt(first + 12, m.nanRef);
    stmt.bindInt(first + 13, m.infRef);
    stmt.bindInt(first + 14, m.bitDifferences);
}

void bindNoMetrics(Statement& stmt, int first) {
    for (int i = 0; i < kMetricColumns; ++i) {
        stmt.bindNull(first + i);
    }
}

std::optional<ErrorMetrics> readMetrics(const Statement& stmt, int first) {
    ErrorMetrics m;
    m.count = stmt.integer(first);
    m.relativeError = stmt.real(first + 1);
    m.maxAbsError = stmt.real(first + 2);
    auto absIndex = intsFromText<std::int64_t>(stmt.text(first + 3));
    m.maxRelError = stmt.real(first + 4);
    auto relIndex = intsFromText<std::int64_t>(stmt.text(first + 5));
    if (!absIndex || !relIndex) {
        return std::nullopt;
    }
    m.maxAbsIndex = std::move(*absIndex);
    m.maxRelIndex = std::move(*relIndex);
    m.cosine = stmt.real(first + 6);
    m.refNorm = stmt.real(first + 7);
    m.distNorm = stmt.real(first + 8);
    m.zeroRefMismatches = stmt.integer(first + 9);
    m.nanDist = stmt.integer(first + 10);
    m.infDist = stmt.integer(first + 11);
    m.nanRef = stmt.integer(first + 12);
    m.infRef = stmt.integer(first + 13);
    m.bitDifferences = stmt.integer(first + 14);
    return m;
}

const QByteArray& tensorColumns() {
    static const QByteArray columns =
        (QStringLiteral("idx, name, kind, tensor_index, iteration, micro_batch, layer, "
                        "expert, dtype, global_shape, bytes, ") +
         metricColumns(QStringLiteral("m_")) + QStringLiteral(", has_perturbation, ") +
         metricColumns(QStringLiteral("p_")) +
         QStringLiteral(", threshold, threshold_method, threshold_theoretical, "
                        "threshold_e_pert, threshold_perturbation, threshold_floor, "
                        "threshold_override, normalized_error, reference_seq"))
            .toUtf8();
    return columns;
}

const QByteArray& shardColumns() {
    static const QByteArray columns =
        (QStringLiteral("tensor_idx, idx, ranges, ranks, replica, ") +
         metricColumns(QStringLiteral("m_")) + QStringLiteral(", normalized_error"))
            .toUtf8();
    return columns;
}

// Inserts run_id first, then `columns`.
QByteArray insertSql(const char* table, const QByteArray& columns, int count) {
    return QByteArray("INSERT INTO ") + table + " (run_id, " + columns + ") VALUES (" +
           placeholders(count + 1) + ")";
}

bool saveTensor(Statement& stmt, qint64 runId, qint64 idx, const TensorResult& r) {
    int c = 1;
    stmt.bindInt(c++, runId);
    stmt.bindInt(c++, idx);
    stmt.bindText(c++, r.key.name);
    stmt.bindText(c++, tensorKindName(r.key.kind));
    stmt.bindInt(c++, r.key.index);
    stmt.bindInt(c++, r.key.iteration);
    stmt.bindInt(c++, r.key.microBatch);
    stmt.bindInt(c++, r.layer);
    stmt.bindInt(c++, r.expert);
    stmt.bindText(c++, dtypeName(r.dtype));
    stmt.bindText(c++, intsToText(r.globalShape));
    stmt.bindInt(c++, r.bytesCompared);
    bindMetrics(stmt, c, r.metrics);
    c += kMetricColumns;
    stmt.bindInt(c++, r.perturbation ? 1 : 0);
    if (r.perturbation) {
        bindMetrics(stmt, c, *r.perturbation);
    } else {
        bindNoMetrics(stmt, c);
    }
    c += kMetricColumns;
    stmt.bindDouble(c++, r.threshold.value);
    stmt.bindText(c++, methodToStored(r.threshold.method));
    stmt.bindDouble(c++, r.threshold.theoretical);
    stmt.bindOptionalDouble(c++, r.threshold.perturbationError);
    stmt.bindOptionalDouble(c++, r.threshold.perturbationThreshold);
    stmt.bindDouble(c++, r.threshold.floor);
    stmt.bindText(c++, r.threshold.overridePattern);
    stmt.bindDouble(c++, r.normalizedError);
    stmt.bindInt(c++, r.referenceSeq);
    return stmt.run();
}

std::optional<TensorResult> readTensor(const Statement& stmt) {
    TensorResult r;
    int c = 1;  // after idx
    r.key.name = stmt.text(c++);
    const auto kind = tensorKindFromName(stmt.text(c++));
    r.key.index = static_cast<int>(stmt.integer(c++));
    r.key.iteration = static_cast<int>(stmt.integer(c++));
    r.key.microBatch = static_cast<int>(stmt.integer(c++));
    r.layer = static_cast<int>(stmt.integer(c++));
    r.expert = static_cast<int>(stmt.integer(c++));
    const auto dtype = dtypeFromName(stmt.text(c++));
    auto shape = intsFromText<std::int64_t>(stmt.text(c++));
    r.bytesCompared = stmt.integer(c++);
    auto metrics = readMetrics(stmt, c);
    c += kMetricColumns;
    const bool hasPerturbation = stmt.integer(c++) != 0;
    if (hasPerturbation) {
        r.perturbation = readMetrics(stmt, c);
        if (!r.perturbation) {
            return std::nullopt;
        }
    }
    c += kMetricColumns;
    r.threshold.value = stmt.real(c++);
    const auto method = methodFromStored(stmt.text(c++));
    r.threshold.theoretical = stmt.real(c++);
    r.threshold.perturbationError = stmt.optionalReal(c++);
    r.threshold.perturbationThreshold = stmt.optionalReal(c++);
    r.threshold.floor = stmt.real(c++);
    r.threshold.overridePattern = stmt.text(c++);
    r.normalizedError = stmt.real(c++);
    r.referenceSeq = stmt.integer(c++);
    if (!kind || !dtype || !shape || !metrics || !method) {
        return std::nullopt;
    }
    r.key.kind = *kind;
    r.dtype = *dtype;
    r.globalShape = std::move(*shape);
    r.metrics = std::move(*metrics);
    r.threshold.method = *method;
    return r;
}

QByteArray selectSql(const QByteArray& columns, const char* table, const char* order) {
    return QByteArray("SELECT ") + columns + " FROM " + table + " WHERE run_id = ? ORDER BY " +
           order;
}

// Binds severity, file, dataset, tensor, message, details and code from column `first` on.
void bindDiagnostic(Statement& stmt, int first, const Diagnostic& d) {
    stmt.bindText(first, severityName(d.severity));
    stmt.bindText(first + 1, d.file);
    stmt.bindText(first + 2, d.dataset);
    stmt.bindText(first + 3, d.tensor);
    stmt.bindText(first + 4, d.message);
    stmt.bindText(first + 5, d.details);
    stmt.bindText(first + 6, d.code);
}

std::optional<Diagnostic> readDiagnostic(const Statement& stmt, int first) {
    const auto severity = severityFromStored(stmt.text(first));
    if (!severity) {
        return std::nullopt;
    }
    return Diagnostic{*severity,
                      stmt.text(first + 1),
                      stmt.text(first + 2),
                      stmt.text(first + 3),
                      stmt.text(first + 4),
                      stmt.text(first + 5),
                      stmt.text(first + 6)};
}

// A row of shardColumns(): tensor_idx, idx, then the shard.
std::optional<ShardResult> readShard(const Statement& row) {
    auto ranges = ShardRanges::fromJson(row.text(2));
    auto ranks = intsFromText<int>(row.text(3));
    auto metrics = readMetrics(row, 5);
    if (!ranges || !ranks || !metrics) {
        return std::nullopt;
    }
    ShardResult shard;
    shard.ranges = std::move(*ranges);
    shard.ranks = std::move(*ranks);
    shard.replica = static_cast<int>(row.integer(4));
    shard.metrics = std::move(*metrics);
    shard.normalizedError = row.real(5 + kMetricColumns);
    return shard;
}

// The shards and rank sequence numbers of one stored run, read one tensor at a time on a
// connection of their own, so that they outlive the store that made them. Several threads

}  // namespace ttrace::result_rows

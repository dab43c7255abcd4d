#include "store/RunWriter.h"

#include <sqlite3.h>

#include <iterator>
#include <utility>

#include "store/ResultRows.h"

namespace ttrace {

using namespace result_rows;
using sqlite::Statement;

namespace {

// A batch is committed once it is this old.
constexpr qint64 kBatchMilliseconds = 500;

}  // namespace

struct RunWriter::Statements {
    explicit Statements(sqlite3* db)
        : tensor(db, insertSql("tensors", tensorColumns(), kTensorColumnCount).constData()),
          rankSeq(db,
                  "INSERT INTO tensor_rank_seq (run_id, tensor_idx, rank, seq) "
                  "VALUES (?, ?, ?, ?)"),
          shard(db, insertSql("shards", shardColumns(), kShardColumnCount).constData()),
          mismatch(db,
                   "INSERT INTO replica_mismatches (run_id, tensor_idx, idx, ranges, ranks_a, "
                   "ranks_b, differing_elements, max_abs_difference) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"),
          recomputation(db,
                        "INSERT INTO recomputation_mismatches (run_id, tensor_idx, idx, ranges, "
                        "rank, differing_elements, elements, scales_differ) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"),
          diagnostic(
              db,
              "INSERT INTO diagnostics (run_id, idx, tensor_idx, severity, file, "
              "dataset, tensor, message, details, code) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
          scales(db,
                 "INSERT INTO fp8_scales (run_id, tensor_idx, reference_scale_inv, "
                 "perturbed_scale_inv, tolerance, max_difference, copies_agree, "
                 "reference_block, blocks_not_compared, data_parallel_blocks, "
                 "reference_format, reference_tensor_scale) "
                 "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
          scaleMismatch(db,
                        "INSERT INTO fp8_scale_mismatches (run_id, tensor_idx, idx, ranges, "
                        "ranks, scale_inv, ratio, block, reference_scale_inv, blocks_beyond, "
                        "across_reference_blocks) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
          finishRun(db,
                    "UPDATE runs SET backend = ?, bytes = ?, cancelled = ?, reference_tensors = "
                    "?, not_captured = ?, not_in_reference = ? WHERE id = ?") {}

    // The first statement that could not be prepared, or null.
    const Statement* unprepared() const {
        for (const Statement* stmt : {&tensor, &rankSeq, &shard, &mismatch, &recomputation,
                                      &diagnostic, &scales, &scaleMismatch, &finishRun}) {
            if (!stmt->ok()) {
                return stmt;
            }
        }
        return nullptr;
    }

    Statement tensor, rankSeq, shard, mismatch, recomputation, diagnostic, scales, scaleMismatch,
        finishRun;
};

RunWriter::RunWriter(sqlite3* db, std::int64_t runId)
    : db_(db), runId_(runId), statements_(std::make_unique<Statements>(db)) {
    if (const Statement* stmt = statements_->unprepared()) {
        fail(stmt->error());
    }
}

RunWriter::~RunWriter() = default;

QString RunWriter::error() const {
    const std::lock_guard lock(mutex_);
    return error_;
}

bool RunWriter::fail(const QString& why) {
    if (error_.isEmpty()) {
        error_ = QStringLiteral("Cannot save results to %1: %2")
                     .arg(QString::fromUtf8(sqlite3_db_filename(db_, "main")), why);
    }
    batch_.reset();  // rolls the batch back: the run stays incomplete
    std::move(inBatch_.begin(), inBatch_.end(), std::back_inserter(unstored_));
    inBatch_.clear();
    return false;
}

std::vector<std::pair<std::int64_t, TensorResult>> RunWriter::takeUnstored() {
    const std::lock_guard lock(mutex_);
    return std::exchange(unstored_, {});
}

bool RunWriter::inBatch() {
    if (batch_) {
        return true;
    }
    batch_ = std::make_unique<sqlite::Transaction>(db_);
    if (!batch_->ok()) {
        return fail(batch_->error());
    }
    batchAge_.start();
    return true;
}

bool RunWriter::add(std::int64_t position, const TensorResult& r) {
    const std::lock_guard lock(mutex_);
    if (!error_.isEmpty() || !inBatch()) {
        return false;
    }
    Statements& s = *statements_;
    const auto idx = static_cast<qint64>(position);
    if (!saveTensor(s.tensor, runId_, idx, r)) {
        return fail(s.tensor.error());
    }
    for (const auto& [rank, seq] : r.rankSeq) {
        s.rankSeq.bindInt(1, runId_);
        s.rankSeq.bindInt(2, idx);
        s.rankSeq.bindInt(3, rank);
        s.rankSeq.bindInt(4, seq);
        if (!s.rankSeq.run()) {
            return fail(s.rankSeq.error());
        }
    }
    for (std::size_t i = 0; i < r.shards.size(); ++i) {
        const ShardResult& sr = r.shards[i];
        s.shard.bindInt(1, runId_);
        s.shard.bindInt(2, idx);
        s.shard.bindInt(3, static_cast<qint64>(i));
        s.shard.bindText(4, sr.ranges.toJson());
        s.shard.bindText(5, intsToText(sr.ranks));
        s.shard.bindInt(6, sr.replica);
        bindMetrics(s.shard, 7, sr.metrics);
        s.shard.bindDouble(7 + kMetricColumns, sr.normalizedError);
        if (!s.shard.run()) {
            return fail(s.shard.error());
        }
    }
    for (std::size_t i = 0; i < r.replicaMismatches.size(); ++i) {
        const ReplicaMismatch& rm = r.replicaMismatches[i];
        s.mismatch.bindInt(1, runId_);
        s.mismatch.bindInt(2, idx);
        s.mismatch.bindInt(3, static_cast<qint64>(i));
        s.mismatch.bindText(4, rm.ranges.toJson());
        s.mismatch.bindText(5, intsToText(rm.ranksA));
        s.mismatch.bindText(6, intsToText(rm.ranksB));
        s.mismatch.bindInt(7, rm.differingElements);
        s.mismatch.bindDouble(8, rm.maxAbsDifference);
        if (!s.mismatch.run()) {
            return fail(s.mismatch.error());
        }
    }
    for (std::size_t i = 0; i < r.recomputationMismatches.size(); ++i) {
        const RecomputationMismatch& rm = r.recomputationMismatches[i];
        s.recomputation.bindInt(1, runId_);
        s.recomputation.bindInt(2, idx);
        s.recomputation.bindInt(3, static_cast<qint64>(i));
        s.recomputation.bindText(4, rm.ranges.toJson());
        s.recomputation.bindInt(5, rm.rank);
        s.recomputation.bindInt(6, rm.differingElements);
        s.recomputation.bindInt(7, rm.elements);
        s.recomputation.bindInt(8, rm.scalesDiffer ? 1 : 0);
        if (!s.recomputation.run()) {
            return fail(s.recomputation.error());
        }
    }
    if (r.fp8Scales) {
        const Fp8ScaleCheck& check = *r.fp8Scales;
        s.scales.bindInt(1, runId_);
        s.scales.bindInt(2, idx);
        s.scales.bindDouble(3, check.referenceScaleInv);
        s.scales.bindOptionalDouble(4, check.perturbedScaleInv);
        s.scales.bindDouble(5, check.tolerance);
        s.scales.bindDouble(6, check.maxDifference);
        s.scales.bindInt(7, check.copiesAgree ? 1 : 0);
        s.scales.bindText(8, intsToText(check.referenceBlock));
        s.scales.bindInt(9, check.blocksNotCompared);
        s.scales.bindInt(10, check.dataParallelBlocks);
        s.scales.bindText(
            11, check.referenceFormat ? scaleFormatName(*check.referenceFormat) : QString());
        s.scales.bindInt(12, check.referenceTensorScale ? 1 : 0);
        if (!s.scales.run()) {
            return fail(s.scales.error());
        }
        for (std::size_t i = 0; i < check.mismatches.size(); ++i) {
            const ScaleMismatch& sm = check.mismatches[i];
            s.scaleMismatch.bindInt(1, runId_);
            s.scaleMismatch.bindInt(2, idx);
            s.scaleMismatch.bindInt(3, static_cast<qint64>(i));
            s.scaleMismatch.bindText(4, sm.ranges.toJson());
            s.scaleMismatch.bindText(5, intsToText(sm.ranks));
            s.scaleMismatch.bindDouble(6, sm.scaleInv);
            s.scaleMismatch.bindDouble(7, sm.ratio);
            s.scaleMismatch.bindText(8, sm.block.toJson());
            s.scaleMismatch.bindDouble(9, sm.referenceScaleInv);
            s.scaleMismatch.bindInt(10, sm.blocksBeyond);
            s.scaleMismatch.bindInt(11, sm.acrossReferenceBlocks ? 1 : 0);
            if (!s.scaleMismatch.run()) {
                return fail(s.scaleMismatch.error());
            }
        }
    }
    for (const Diagnostic& d : r.diagnostics) {
        s.diagnostic.bindInt(1, runId_);
        s.diagnostic.bindInt(2, diagnosticIdx_++);
        s.diagnostic.bindInt(3, idx);
        bindDiagnostic(s.diagnostic, 4, d);
        if (!s.diagnostic.run()) {
            return fail(s.diagnostic.error());
        }
    }
    bytes_ += r.bytesCompared;
    if (batchAge_.elapsed() >= kBatchMilliseconds) {
        if (!batch_->commit()) {
            return fail(batch_->error());  // `r` stays with the caller, who was told no
        }
        batch_.reset();
        inBatch_.clear();
    } else {
        inBatch_.emplace_back(position, r);
    }
    return true;
}

bool RunWriter::finish(const ComparisonOutput& run) {
    const std::lock_guard lock(mutex_);
    if (!error_.isEmpty() || !inBatch()) {
        return false;
    }
    Statements& s = *statements_;
    for (const Diagnostic& d : run.diagnostics) {
        s.diagnostic.bindInt(1, runId_);
        s.diagnostic.bindInt(2, diagnosticIdx_++);
        s.diagnostic.bindNull(3);
        bindDiagnostic(s.diagnostic, 4, d);
        if (!s.diagnostic.run()) {
            return fail(s.diagnostic.error());
        }
    }
    s.finishRun.bindText(1, run.backendName);
    s.finishRun.bindInt(2, bytes_);
    // Incomplete runs are kept for the record but never reused (load() skips them).
    s.finishRun.bindInt(3, run.complete() ? 0 : 1);
    s.finishRun.bindInt(4, run.coverage.referenceTensors);
    s.finishRun.bindInt(5, run.coverage.notCaptured);
    s.finishRun.bindInt(6, run.coverage.notInReference);
    s.finishRun.bindInt(7, runId_);
    if (!s.finishRun.run()) {
        return fail(s.finishRun.error());
    }
    if (!batch_->commit()) {
        return fail(batch_->error());
    }
    batch_.reset();
    inBatch_.clear();
    return true;
}

}  // namespace ttrace

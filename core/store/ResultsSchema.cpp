#include "store/ResultsSchema.h"

#include <array>

namespace ttrace::results_schema {

namespace {

// Columns that hold doubles have no declared type: with REAL affinity SQLite would store
// -0.0 as the integer 0, and NaN is written as its bit pattern (see sqlite::Statement).
// Metric columns (prefix m_ or p_) follow ErrorMetrics field by field; index columns are
// comma-separated coordinates; ranges are the trace format's JSON list of [start, stop) pairs.
constexpr const char* kVersion1 = R"sql(
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    fingerprint TEXT NOT NULL UNIQUE,
    description TEXT NOT NULL,
    backend TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    cancelled INTEGER NOT NULL,
    created TEXT NOT NULL
);
CREATE TABLE tensors (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    tensor_index INTEGER NOT NULL,
    iteration INTEGER NOT NULL,
    micro_batch INTEGER NOT NULL,
    layer INTEGER NOT NULL,
    expert INTEGER NOT NULL,
    dtype TEXT NOT NULL,
    global_shape TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    m_count INTEGER NOT NULL, m_rel_error, m_max_abs, m_max_abs_index TEXT NOT NULL, m_max_rel,
    m_max_rel_index TEXT NOT NULL, m_cosine, m_ref_norm, m_dist_norm,
    m_zero_ref_mismatches INTEGER NOT NULL, m_nan_dist INTEGER NOT NULL,
    m_inf_dist INTEGER NOT NULL, m_nan_ref INTEGER NOT NULL, m_inf_ref INTEGER NOT NULL,
    m_bit_differences INTEGER NOT NULL,
    has_perturbation INTEGER NOT NULL,
    p_count INTEGER, p_rel_error, p_max_abs, p_max_abs_index TEXT, p_max_rel,
    p_max_rel_index TEXT, p_cosine, p_ref_norm, p_dist_norm,
    p_zero_ref_mismatches INTEGER, p_nan_dist INTEGER, p_inf_dist INTEGER,
    p_nan_ref INTEGER, p_inf_ref INTEGER, p_bit_differences INTEGER,
    threshold,
    threshold_method TEXT NOT NULL,
    threshold_theoretical,
    threshold_e_pert,
    threshold_perturbation,
    threshold_floor,
    threshold_override TEXT NOT NULL,
    normalized_error,
    reference_seq INTEGER NOT NULL,
    PRIMARY KEY (run_id, idx)
);
CREATE INDEX tensors_by_name ON tensors (run_id, name);
CREATE TABLE tensor_rank_seq (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    tensor_idx INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (run_id, tensor_idx, rank)
);
CREATE TABLE shards (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    tensor_idx INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    ranges TEXT NOT NULL,
    ranks TEXT NOT NULL,
    replica INTEGER NOT NULL,
    m_count INTEGER NOT NULL, m_rel_error, m_max_abs, m_max_abs_index TEXT NOT NULL, m_max_rel,
    m_max_rel_index TEXT NOT NULL, m_cosine, m_ref_norm, m_dist_norm,
    m_zero_ref_mismatches INTEGER NOT NULL, m_nan_dist INTEGER NOT NULL,
    m_inf_dist INTEGER NOT NULL, m_nan_ref INTEGER NOT NULL, m_inf_ref INTEGER NOT NULL,
    m_bit_differences INTEGER NOT NULL,
    normalized_error,
    PRIMARY KEY (run_id, tensor_idx, idx)
);
CREATE TABLE replica_mismatches (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    tensor_idx INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    ranges TEXT NOT NULL,
    ranks_a TEXT NOT NULL,
    ranks_b TEXT NOT NULL,
    differing_elements INTEGER NOT NULL,
    max_abs_difference,
    PRIMARY KEY (run_id, tensor_idx, idx)
);
CREATE TABLE diagnostics (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    tensor_idx INTEGER,
    severity TEXT NOT NULL,
    file TEXT NOT NULL,
    dataset TEXT NOT NULL,
    tensor TEXT NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (run_id, idx)
);
)sql";

// The fp8 scale check (docs/thresholds.md): one row per fp8 tensor, one per copy beyond the
// tolerance. Runs saved before it were compared without the check and are dropped, so that
// they are compared again rather than reused without it.
constexpr const char* kVersion2 = R"sql(
DELETE FROM runs;
CREATE TABLE fp8_scales (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    tensor_idx INTEGER NOT NULL,
    reference_scale_inv,
    perturbed_scale_inv,
    tolerance,
    max_difference,
    copies_agree INTEGER NOT NULL,
    PRIMARY KEY (run_id, tensor_idx)
);
CREATE TABLE fp8_scale_mismatches (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    tensor_idx INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    ranges TEXT NOT NULL,
    ranks TEXT NOT NULL,
    scale_inv,
    ratio,
    PRIMARY KEY (run_id, tensor_idx, idx)
);
)sql";

// What opening a run's trace sets found (each set's dataset count, the problems reported
// while indexing), so that an unchanged run is shown again from the store alone, without
// indexing its traces. Runs saved before have none and are shown after indexing, as before.
constexpr const char* kVersion3 = R"sql(
CREATE TABLE run_traces (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    role TEXT NOT NULL,
    datasets INTEGER NOT NULL,
    PRIMARY KEY (run_id, role)
);
CREATE TABLE opening_diagnostics (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    severity TEXT NOT NULL,
    file TEXT NOT NULL,
    dataset TEXT NOT NULL,
    tensor TEXT NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (run_id, idx)
);
)sql";

// fp8 scales per row or block: the reference's block shape, and per mismatching copy its
// worst block, the reference scale it was held to and how many of its blocks were beyond.
// And each run's coverage: the reference's tensors, those the distributed run lacks and the
// distributed ones the reference lacks. Runs saved before were checked per tensor only and
// had no coverage: they are dropped, to be compared again.
constexpr const char* kVersion4 = R"sql(
DELETE FROM runs;
ALTER TABLE runs ADD COLUMN reference_tensors INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN not_captured INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN not_in_reference INTEGER NOT NULL DEFAULT 0;
ALTER TABLE fp8_scales ADD COLUMN reference_block TEXT NOT NULL DEFAULT '';
ALTER TABLE fp8_scales ADD COLUMN blocks_not_compared INTEGER NOT NULL DEFAULT 0;
ALTER TABLE fp8_scale_mismatches ADD COLUMN block TEXT NOT NULL DEFAULT '';
ALTER TABLE fp8_scale_mismatches ADD COLUMN reference_scale_inv;
ALTER TABLE fp8_scale_mismatches ADD COLUMN blocks_beyond INTEGER NOT NULL DEFAULT 1;
)sql";

// Forwards that activation checkpointing recomputed differently (the rank files'
// `recomputations`), one row per piece. Runs saved before did not read them: dropped, to be
// compared again.
constexpr const char* kVersion5 = R"sql(
DELETE FROM runs;
CREATE TABLE recomputation_mismatches (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    tensor_idx INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    ranges TEXT NOT NULL,
    rank INTEGER NOT NULL,
    differing_elements INTEGER NOT NULL,
    elements INTEGER NOT NULL,
    scales_differ INTEGER NOT NULL,
    PRIMARY KEY (run_id, tensor_idx, idx)
);
)sql";

// A diagnostic's details: the words of the library that failed (libhdf5's), kept apart from
// the message. Rows saved before have none.
constexpr const char* kVersion6 = R"sql(
ALTER TABLE diagnostics ADD COLUMN details TEXT NOT NULL DEFAULT '';
ALTER TABLE opening_diagnostics ADD COLUMN details TEXT NOT NULL DEFAULT '';
)sql";

// A diagnostic's code, the kind of problem it is for the JSON report. Rows saved before have
// none.
constexpr const char* kVersion7 = R"sql(
ALTER TABLE diagnostics ADD COLUMN code TEXT NOT NULL DEFAULT '';
ALTER TABLE opening_diagnostics ADD COLUMN code TEXT NOT NULL DEFAULT '';
)sql";

// fp8 copies whose scale blocks lie across the reference's (their scales laid along another
// axis). Rows saved before have none: their checker counted such blocks as not compared (a
// check by this one has another fingerprint, so it never reuses them).
constexpr const char* kVersion8 = R"sql(
ALTER TABLE fp8_scale_mismatches ADD COLUMN across_reference_blocks INTEGER NOT NULL DEFAULT 0;
)sql";

// fp8 blocks that data-parallel ranks scaled each with their own amax. Rows saved before have
// none (a check by this one has another fingerprint, so it never reuses them).
constexpr const char* kVersion9 = R"sql(
ALTER TABLE fp8_scales ADD COLUMN data_parallel_blocks INTEGER NOT NULL DEFAULT 0;
)sql";

// What the reference's scales are (their scale_format, a tensor scale folded into them), which
// names the recipe: MXFP8, NVFP4. Rows saved before have none.
constexpr const char* kVersion10 = R"sql(
ALTER TABLE fp8_scales ADD COLUMN reference_format TEXT NOT NULL DEFAULT '';
ALTER TABLE fp8_scales ADD COLUMN reference_tensor_scale INTEGER NOT NULL DEFAULT 0;
)sql";

constexpr std::array<Migration, 10> kMigrations = {{{1, kVersion1},
                                                    {2, kVersion2},
                                                    {3, kVersion3},
                                                    {4, kVersion4},
                                                    {5, kVersion5},
                                                    {6, kVersion6},
                                                    {7, kVersion7},
                                                    {8, kVersion8},
                                                    {9, kVersion9},
                                                    {10, kVersion10}}};

}  // namespace

std::span<const Migration> migrations() {
    return kMigrations;
}

int latestVersion() {
    return kMigrations.back().version;
}

}  // namespace ttrace::results_schema

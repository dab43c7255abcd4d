#pragma once

#include <QDateTime>
#include <cmath>
#include <limits>

#include "report/CheckReport.h"

// A realistic comparison built in memory, shaped like the bug_shard fixture: pp=2 dp=2 tp=2,
// a 5% error injected on rank 5 in layers.1.fc1 forward_output it0 mb1, its cascade, a
// diverging replica and a NaN. Used by the store and report tests, which must not depend on
// the comparison or localization code.
namespace ttrace::test {

inline ErrorMetrics makeMetrics(double relativeError, std::int64_t count) {
    ErrorMetrics m;
    m.count = count;
    m.relativeError = relativeError;
    m.maxAbsError = relativeError * 3.25;
    m.maxAbsIndex = {1, 2};
    m.maxRelError = relativeError * 7.5;
    m.maxRelIndex = {0, 5};
    m.cosine = 1.0 - relativeError * relativeError / 2;
    m.refNorm = 11.3137084989847603904;
    m.distNorm = m.refNorm * (1 + relativeError / 3);
    m.zeroRefMismatches = relativeError > 0.01 ? 2 : 0;
    m.bitDifferences = relativeError > 0 ? count / 2 : 0;
    return m;
}

struct FaultIndices {
    std::size_t firstFault = 0;  // layers.1.fc1 forward_output it0 mb1
    std::size_t rootInput = 0;   // layers.1.fc1 forward_input it0 mb1
    std::size_t cascade = 0;     // layers.1.fc2 forward_output it0 mb1 (ranks 4 and 5)
    std::size_t replicaBug = 0;  // layers.0.fc1.weight param_grad it0
    std::size_t nanTensor = 0;   // layers.1.fc2 forward_input it0 mb1
};

// `bug` false: every error is round-off sized and no tensor is faulty.
inline ComparisonOutput makeComparison(bool bug, FaultIndices* faults = nullptr) {
    ComparisonOutput out;
    out.backendName = QStringLiteral("cpu");
    FaultIndices f;
    std::int64_t seq = 0;
    const auto add = [&](const QString& name, TensorKind kind, int iteration, int microBatch,
                         int layer, double relativeError) -> TensorResult& {
        TensorResult& r = out.results.emplace_back();
        r.key = {name, kind, 0, iteration, microBatch};
        r.layer = layer;
        r.dtype = DType::BF16;
        r.globalShape = {4, 16};
        r.bytesCompared = 4 * 16 * 2 * 3;
        r.metrics = makeMetrics(relativeError, 64);
        r.referenceSeq = seq++;
        // Alternate how thresholds were set, perturbation present or not.
        if (out.results.size() % 3 != 0) {
            r.perturbation = makeMetrics(2e-4, 64);
            r.threshold.method = ThresholdMethod::Perturbation;
            r.threshold.perturbationError = r.perturbation->relativeError;
            r.threshold.perturbationThreshold = 8 * r.perturbation->relativeError;
            r.threshold.value = *r.threshold.perturbationThreshold;
        } else {
            r.threshold.method = ThresholdMethod::Theoretical;
            r.threshold.value = 4 * std::pow(1.03, layer + 1) * 0.0078125;
        }
        r.threshold.theoretical = 4 * std::pow(1.03, layer + 1) * 0.0078125;
        r.threshold.floor = 0.0078125;
        r.normalizedError = r.metrics.relativeError / r.threshold.value;
        // Two tensor-parallel shards, each on two data-parallel replicas.
        const int stage = layer < 0 ? 0 : layer;
        for (int shard = 0; shard < 2; ++shard) {
            for (int replica = 0; replica < 2; ++replica) {
                ShardResult s;
                s.ranges.dims = {{{0, 4}}, {{8 * shard, 8 * shard + 8}}};
                s.ranks = {stage * 4 + replica * 2 + shard};
                s.replica = replica;
                s.metrics = makeMetrics(relativeError * (shard + 1) / 2, 32);
                s.normalizedError = s.metrics.relativeError / r.threshold.value;
                r.shards.push_back(s);
            }
        }
        for (int rank = stage * 4; rank < stage * 4 + 4; ++rank) {
            r.rankSeq[rank] = r.referenceSeq / 2 + rank;
        }
        return r;
    };

    const double roundOff = 0.0012;
    for (int mb = 0; mb < 2; ++mb) {
        for (int layer = 0; layer < 2; ++layer) {
            const QString prefix = QStringLiteral("layers.%1.").arg(layer);
            const bool faultyMb = bug && layer == 1 && mb == 1;
            add(prefix + QStringLiteral("fc1"), TensorKind::ForwardInput, 0, mb, layer, roundOff);
            if (faultyMb) {
                f.rootInput = out.results.size() - 1;
            }
            TensorResult& fc1 = add(prefix + QStringLiteral("fc1"), TensorKind::ForwardOutput, 0,
                                    mb, layer, faultyMb ? 0.354 : roundOff);
            if (faultyMb) {
                f.firstFault = out.results.size() - 1;
                fc1.shards[2].metrics = makeMetrics(0.5, 32);  // rank 5
                fc1.shards[2].normalizedError = 0.5 / fc1.threshold.value;
            }
            TensorResult& fc2in = add(prefix + QStringLiteral("fc2"), TensorKind::ForwardInput, 0,
                                      mb, layer, faultyMb ? 0.351 : roundOff);
            if (faultyMb) {
                f.nanTensor = out.results.size() - 1;
                fc2in.metrics.nanDist = 3;
                fc2in.metrics.infDist = 1;
                fc2in.metrics.relativeError = std::numeric_limits<double>::quiet_NaN();
                fc2in.normalizedError = std::numeric_limits<double>::quiet_NaN();
                fc2in.metrics.maxAbsError = std::numeric_limits<double>::infinity();
            }
            add(prefix + QStringLiteral("fc2"), TensorKind::ForwardOutput, 0, mb, layer,
                faultyMb ? 0.349 : roundOff);
            if (faultyMb) {
                f.cascade = out.results.size() - 1;
            }
        }
    }
    for (int layer = 0; layer < 2; ++layer) {
        const QString prefix = QStringLiteral("layers.%1.").arg(layer);
        TensorResult& grad = add(prefix + QStringLiteral("fc1.weight"), TensorKind::ParamGrad, 0,
                                 -1, layer, roundOff);
        if (layer == 0) {
            f.replicaBug = out.results.size() - 1;
            grad.threshold.method = ThresholdMethod::Override;
            grad.threshold.overridePattern = QStringLiteral("layers.*.fc1.weight");
            grad.threshold.value = 0.5;
            grad.threshold.perturbationError.reset();
            grad.threshold.perturbationThreshold.reset();
            grad.perturbation.reset();
            grad.normalizedError = grad.metrics.relativeError / grad.threshold.value;
            grad.metrics.cosine = -0.0;  // sign of zero must survive the store
            if (bug) {
                ReplicaMismatch m;
                m.ranges = grad.shards[0].ranges;
                m.ranksA = {0};
                m.ranksB = {2};
                m.differingElements = 1;
                m.maxAbsDifference = 0.5;
                grad.replicaMismatches.push_back(m);
            }
            grad.diagnostics.push_back({Severity::Info, QStringLiteral("/traces/dist/rank00002.h5"),
                                        QStringLiteral("/tensors/000117"), grad.key.toString(),
                                        QStringLiteral("replica compared bit for bit"), QString(),
                                        QString()});
        }
    }
    out.results.back().globalShape = {};  // a scalar
    out.results.back().shards.back().ranges.dims = {};
    out.results.back().rankSeq.clear();
    out.diagnostics.push_back({Severity::Warning, QStringLiteral("/traces/dist"), QString(),
                               QString(), QStringLiteral("capture tool version differs"), QString(),
                               QString()});
    out.diagnostics.push_back(
        {Severity::Error, QStringLiteral("/traces/dist/rank00003.h5"),
         QStringLiteral("/tensors/000009"), QStringLiteral("layers.0.fc2 output_grad[0] it0 mb0"),
         QStringLiteral("dataset cannot be read: truncated"), QString(), QString()});
    for (const auto& r : out.results) {
        out.bytesCompared += r.bytesCompared;
    }
    if (faults) {
        *faults = f;
    }
    // Every reference tensor captured and compared.
    out.coverage.referenceTensors = static_cast<std::int64_t>(out.results.size());
    return out;
}

inline Manifest makeManifest(RunRole role, int worldSize) {
    Manifest m;
    m.path = QStringLiteral("/traces/%1/manifest.json").arg(runRoleName(role));
    m.role = role;
    m.toolName = QStringLiteral("ttrace-python");
    m.toolVersion = QStringLiteral("0.1.0");
    m.worldSize = worldSize;
    if (worldSize > 1) {
        m.parallel.pp = 2;
        m.parallel.dp = 2;
        m.parallel.tp = 2;
        m.meshAxes = {QStringLiteral("pp"), QStringLiteral("dp"), QStringLiteral("tp")};
        m.meshShape = {2, 2, 2};
    }
    for (int rank = 0; rank < worldSize; ++rank) {
        m.ranks.push_back(
            {rank, QStringLiteral("rank%1.h5").arg(rank, 5, 10, QLatin1Char('0')), {}});
    }
    m.recipe = QStringLiteral("bf16");
    m.computeDtype = DType::BF16;
    m.model = {{QStringLiteral("name"), QStringLiteral("tiny-gpt")},
               {QStringLiteral("num_layers"), 2}};
    m.numLayers = 2;
    m.iterations = {0};
    m.microBatches = 2;
    if (role == RunRole::PerturbedReference) {
        m.perturbation = 0.00390625;
    }
    return m;
}

inline CheckReport makeReport(bool bug) {
    CheckReport report;
    report.toolVersion = QStringLiteral("0.1.0");
    report.created = QDateTime(QDate(2024, 5, 1), QTime(12, 30), Qt::UTC);
    report.distributed = {QStringLiteral("/traces/dist"), makeManifest(RunRole::Distributed, 8),
                          160};
    report.reference = {QStringLiteral("/traces/ref"), makeManifest(RunRole::Reference, 1), 20};
    report.perturbed =
        RunInfo{QStringLiteral("/traces/pert"), makeManifest(RunRole::PerturbedReference, 1), 20};
    report.thresholds.overrides.push_back(
        {QStringLiteral("layers.*.fc1.weight"), TensorKind::ParamGrad, 0.5, std::nullopt});
    report.configPath = QStringLiteral("/work/thresholds.json");
    FaultIndices f;
    report.comparison = makeComparison(bug, &f);
    report.seconds = 1.25;
    if (bug) {
        Localization& loc = report.localization;
        loc.firstFaulty = f.firstFault;
        const auto& results = report.comparison.results;
        for (int rank = 0; rank < 8; ++rank) {
            const std::size_t result =
                rank < 4 ? f.replicaBug : (rank < 6 ? f.firstFault : f.cascade);
            loc.perRank.push_back(
                {rank, result,
                 results[result].rankSeq.count(rank) ? results[result].rankSeq.at(rank) : 0});
        }
        loc.rootCause = RootCause{
            QStringLiteral("layers.1.fc1"), f.firstFault, f.rootInput,
            QStringLiteral("inputs within tolerance (0.15), output 3.5x over"), std::nullopt};
        loc.faultyShard = FaultyShard{f.firstFault,
                                      2,
                                      {5},
                                      true,
                                      QStringLiteral("normalized error 5.0 vs at most 0.15 on the "
                                                     "other shards")};
        std::size_t faulty = 0;
        for (const auto& r : results) {
            faulty += r.isFaulty() ? 1 : 0;
        }
        loc.faultyCount = faulty;
    }
    report.diagnostics = report.comparison.diagnostics;
    return report;
}

}  // namespace ttrace::test

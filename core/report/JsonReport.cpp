#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <cmath>
#include <numeric>
#include <vector>

#include "report/ReportText.h"
#include "report/ReportWriters.h"

namespace ttrace {

namespace {

constexpr int kSchemaVersion = 3;  // 3: tensors[].fp8_scales

// JSON has no NaN or infinity: they are written as the strings "NaN", "Infinity", "-Infinity".
QJsonValue number(double value) {
    if (std::isnan(value)) {
        return QStringLiteral("NaN");
    }
    if (std::isinf(value)) {
        return value > 0 ? QStringLiteral("Infinity") : QStringLiteral("-Infinity");
    }
    return value;
}

QJsonValue optionalNumber(const std::optional<double>& value) {
    return value ? number(*value) : QJsonValue(QJsonValue::Null);
}

template <typename Int>
QJsonArray ints(const std::vector<Int>& values) {
    QJsonArray array;
    for (const auto v : values) {
        array.append(static_cast<qint64>(v));
    }
    return array;
}

QJsonObject metricsJson(const ErrorMetrics& m) {
    return {
        {QStringLiteral("count"), static_cast<qint64>(m.count)},
        {QStringLiteral("relative_error"), number(m.relativeError)},
        {QStringLiteral("max_abs_error"), number(m.maxAbsError)},
        {QStringLiteral("max_abs_index"), ints(m.maxAbsIndex)},
        {QStringLiteral("max_rel_error"), number(m.maxRelError)},
        {QStringLiteral("max_rel_index"), ints(m.maxRelIndex)},
        {QStringLiteral("cosine"), number(m.cosine)},
        {QStringLiteral("ref_norm"), number(m.refNorm)},
        {QStringLiteral("dist_norm"), number(m.distNorm)},
        {QStringLiteral("zero_ref_mismatches"), static_cast<qint64>(m.zeroRefMismatches)},
        {QStringLiteral("nan_dist"), static_cast<qint64>(m.nanDist)},
        {QStringLiteral("inf_dist"), static_cast<qint64>(m.infDist)},
        {QStringLiteral("nan_ref"), static_cast<qint64>(m.nanRef)},
        {QStringLiteral("inf_ref"), static_cast<qint64>(m.infRef)},
        {QStringLiteral("bit_differences"), static_cast<qint64>(m.bitDifferences)},
    };
}

QJsonObject diagnosticJson(const Diagnostic& d) {
    return {
        {QStringLiteral("severity"), severityName(d.severity)},
        {QStringLiteral("file"), d.file},
        {QStringLiteral("dataset"), d.dataset},
        {QStringLiteral("tensor"), d.tensor},
        {QStringLiteral("message"), d.message},
    };
}

QJsonArray diagnosticsJson(const Diagnostics& diagnostics) {
    QJsonArray array;
    for (const auto& d : diagnostics) {
        array.append(diagnosticJson(d));
    }
    return array;
}

QJsonObject keyJson(const TensorKey& key) {
    return {
        {QStringLiteral("name"), key.name},
        {QStringLiteral("kind"), tensorKindName(key.kind)},
        {QStringLiteral("index"), key.index},
        {QStringLiteral("iteration"), key.iteration},
        {QStringLiteral("micro_batch"), key.microBatch},
    };
}

// A pointer to one tensor result: its position in "tensors" and its readable identity.
QJsonValue tensorRef(const std::vector<TensorResult>& results, std::size_t index) {
    QJsonObject ref{{QStringLiteral("result"), static_cast<qint64>(index)}};
    if (index < results.size()) {
        ref.insert(QStringLiteral("tensor"), results[index].key.toString());
    }
    return ref;
}

QJsonObject thresholdJson(const Threshold& t) {
    return {
        {QStringLiteral("value"), number(t.value)},
        {QStringLiteral("method"), thresholdMethodName(t.method)},
        {QStringLiteral("theoretical"), number(t.theoretical)},
        {QStringLiteral("perturbation_error"), optionalNumber(t.perturbationError)},
        {QStringLiteral("perturbation_threshold"), optionalNumber(t.perturbationThreshold)},
        {QStringLiteral("floor"), number(t.floor)},
        {QStringLiteral("override_pattern"), t.overridePattern},
    };
}

// Every copy of a faulty tensor's shards; of the others, the worst copy of each shard. A job
// with hundreds of data-parallel replicas would otherwise write every replica of every
// tensor, a report of gigabytes; every copy stays in the results store.
std::vector<std::size_t> listedShards(const TensorResult& r,
                                      const std::vector<ShardResult>& copies) {
    if (r.isFaulty()) {
        std::vector<std::size_t> all(copies.size());
        std::iota(all.begin(), all.end(), std::size_t{0});
        return all;
    }
    return worstCopies(copies);
}

QJsonValue fp8ScalesJson(const std::optional<Fp8ScaleCheck>& check) {
    if (!check) {
        return {};
    }
    QJsonArray mismatches;
    for (const ScaleMismatch& m : check->mismatches) {
        mismatches.append(QJsonObject{
            {QStringLiteral("ranges"), m.ranges.toJsonArray()},
            {QStringLiteral("ranges_text"), m.ranges.toString()},
            {QStringLiteral("ranks"), ints(m.ranks)},
            {QStringLiteral("scale_inv"), number(m.scaleInv)},
            {QStringLiteral("ratio"), number(m.ratio)},
        });
    }
    return QJsonObject{
        {QStringLiteral("reference_scale_inv"), number(check->referenceScaleInv)},
        {QStringLiteral("perturbed_scale_inv"), optionalNumber(check->perturbedScaleInv)},
        {QStringLiteral("tolerance"), number(check->tolerance)},
        {QStringLiteral("max_difference"), number(check->maxDifference)},
        {QStringLiteral("copies_agree"), check->copiesAgree},
        {QStringLiteral("mismatches"), mismatches},
    };
}

// `copies`, `rankSeqs`: the result's shards and sequence numbers, read from the store when it
// was loaded without them.
QJsonObject tensorJson(const TensorResult& r, const std::vector<ShardResult>& copies,
                       const std::map<int, std::int64_t>& rankSeqs, std::size_t index) {
    QJsonArray shards;
    for (const std::size_t i : listedShards(r, copies)) {
        const ShardResult& s = copies[i];
        shards.append(QJsonObject{
            {QStringLiteral("ranges"), s.ranges.toJsonArray()},
            {QStringLiteral("ranges_text"), s.ranges.toString()},
            {QStringLiteral("ranks"), ints(s.ranks)},
            {QStringLiteral("replica"), s.replica},
            {QStringLiteral("normalized_error"), number(s.normalizedError)},
            {QStringLiteral("metrics"), metricsJson(s.metrics)},
        });
    }
    QJsonArray mismatches;
    for (const ReplicaMismatch& m : r.replicaMismatches) {
        mismatches.append(QJsonObject{
            {QStringLiteral("ranges"), m.ranges.toJsonArray()},
            {QStringLiteral("ranges_text"), m.ranges.toString()},
            {QStringLiteral("ranks_a"), ints(m.ranksA)},
            {QStringLiteral("ranks_b"), ints(m.ranksB)},
            {QStringLiteral("differing_elements"), static_cast<qint64>(m.differingElements)},
            {QStringLiteral("max_abs_difference"), number(m.maxAbsDifference)},
        });
    }
    QJsonArray rankSeq;
    for (const auto& [rank, seq] : rankSeqs) {
        rankSeq.append(QJsonObject{{QStringLiteral("rank"), rank},
                                   {QStringLiteral("seq"), static_cast<qint64>(seq)}});
    }
    return {
        {QStringLiteral("result"), static_cast<qint64>(index)},
        {QStringLiteral("tensor"), r.key.toString()},
        {QStringLiteral("key"), keyJson(r.key)},
        {QStringLiteral("module"), r.key.module()},
        {QStringLiteral("layer"), r.layer},
        {QStringLiteral("expert"), r.expert},
        {QStringLiteral("dtype"), dtypeName(r.dtype)},
        {QStringLiteral("global_shape"), ints(r.globalShape)},
        {QStringLiteral("bytes_compared"), static_cast<qint64>(r.bytesCompared)},
        {QStringLiteral("reference_seq"), static_cast<qint64>(r.referenceSeq)},
        {QStringLiteral("rank_seq"), rankSeq},
        {QStringLiteral("faulty"), r.isFaulty()},
        {QStringLiteral("normalized_error"), number(r.normalizedError)},
        {QStringLiteral("metrics"), metricsJson(r.metrics)},
        {QStringLiteral("perturbation"),
         r.perturbation ? QJsonValue(metricsJson(*r.perturbation)) : QJsonValue()},
        {QStringLiteral("threshold"), thresholdJson(r.threshold)},
        {QStringLiteral("shards"), shards},
        {QStringLiteral("shard_copies"), static_cast<qint64>(copies.size())},
        {QStringLiteral("replica_mismatches"), mismatches},
        {QStringLiteral("fp8_scales"), fp8ScalesJson(r.fp8Scales)},
        {QStringLiteral("diagnostics"), diagnosticsJson(r.diagnostics)},
    };
}

QJsonObject runJson(const RunInfo& run) {
    const Manifest& m = run.manifest;
    QJsonArray axes;
    for (const auto& axis : m.meshAxes) {
        axes.append(axis);
    }
    const ParallelConfig& p = m.parallel;
    return {
        {QStringLiteral("folder"), run.folder},
        {QStringLiteral("manifest"), m.path},
        {QStringLiteral("role"), runRoleName(m.role)},
        {QStringLiteral("format_version"),
         QStringLiteral("%1.%2").arg(m.versionMajor).arg(m.versionMinor)},
        {QStringLiteral("capture_tool"), QJsonObject{{QStringLiteral("name"), m.toolName},
                                                     {QStringLiteral("version"), m.toolVersion}}},
        {QStringLiteral("world_size"), m.worldSize},
        {QStringLiteral("parallel"), QJsonObject{{QStringLiteral("tp"), p.tp},
                                                 {QStringLiteral("pp"), p.pp},
                                                 {QStringLiteral("vpp"), p.vpp},
                                                 {QStringLiteral("dp"), p.dp},
                                                 {QStringLiteral("cp"), p.cp},
                                                 {QStringLiteral("ep"), p.ep},
                                                 {QStringLiteral("sp"), p.sp},
                                                 {QStringLiteral("text"), p.toString()}}},
        {QStringLiteral("mesh"),
         QJsonObject{{QStringLiteral("axes"), axes}, {QStringLiteral("shape"), ints(m.meshShape)}}},
        {QStringLiteral("dtype"),
         QJsonObject{{QStringLiteral("recipe"), m.recipe},
                     {QStringLiteral("compute"), dtypeName(m.computeDtype)}}},
        {QStringLiteral("model"), m.model},
        {QStringLiteral("num_layers"), m.numLayers},
        {QStringLiteral("capture"), QJsonObject{{QStringLiteral("iterations"), ints(m.iterations)},
                                                {QStringLiteral("micro_batches"), m.microBatches}}},
        {QStringLiteral("perturbation"), optionalNumber(m.perturbation)},
        {QStringLiteral("tensor_count"), run.tensorCount},
    };
}

QJsonObject thresholdConfigJson(const CheckReport& report) {
    const ThresholdConfig& c = report.thresholds;
    QJsonArray overrides;
    for (const ThresholdOverride& o : c.overrides) {
        overrides.append(QJsonObject{
            {QStringLiteral("pattern"), o.pattern},
            {QStringLiteral("kind"), o.kind ? QJsonValue(tensorKindName(*o.kind)) : QJsonValue()},
            {QStringLiteral("threshold"), optionalNumber(o.threshold)},
            {QStringLiteral("safety_factor"), optionalNumber(o.safetyFactor)},
        });
    }
    QJsonArray methods;
    for (const auto& count : report_text::thresholdMethodCounts(report.comparison.results)) {
        methods.append(count);
    }
    return {
        {QStringLiteral("config_path"), report.configPath},
        {QStringLiteral("safety_factor"), number(c.safetyFactor)},
        {QStringLiteral("floor_factor"), number(c.floorFactor)},
        {QStringLiteral("theory_k"), number(c.theoryK)},
        {QStringLiteral("theory_c"), number(c.theoryC)},
        {QStringLiteral("overrides"), overrides},
        {QStringLiteral("method_counts"), methods},
    };
}

QJsonObject localizationJson(const CheckReport& report) {
    const Localization& loc = report.localization;
    const auto& results = report.comparison.results;
    QJsonArray perRank;
    for (const RankFirstFault& f : loc.perRank) {
        QJsonObject entry = tensorRef(results, f.result).toObject();
        entry.insert(QStringLiteral("rank"), f.rank);
        entry.insert(QStringLiteral("seq"), static_cast<qint64>(f.seq));
        perRank.append(entry);
    }
    QJsonValue rootCause;
    if (loc.rootCause) {
        const RootCause& rc = *loc.rootCause;
        rootCause = QJsonObject{
            {QStringLiteral("module"), rc.module},
            {QStringLiteral("output"), tensorRef(results, rc.result)},
            {QStringLiteral("input"), rc.input ? tensorRef(results, *rc.input) : QJsonValue()},
            {QStringLiteral("reason"), rc.reason},
        };
    }
    QJsonValue faultyShard;
    if (loc.faultyShard) {
        const FaultyShard& fs = *loc.faultyShard;
        QJsonObject shard{
            {QStringLiteral("tensor"), tensorRef(results, fs.result)},
            {QStringLiteral("shard"), static_cast<qint64>(fs.shard)},
            {QStringLiteral("ranks"), ints(fs.ranks)},
            {QStringLiteral("stands_out"), fs.standsOut},
            {QStringLiteral("reason"), fs.reason},
        };
        if (fs.result < results.size() && fs.shard < results[fs.result].shards.size()) {
            const auto& ranges = results[fs.result].shards[fs.shard].ranges;
            shard.insert(QStringLiteral("ranges"), ranges.toJsonArray());
            shard.insert(QStringLiteral("ranges_text"), ranges.toString());
        }
        faultyShard = shard;
    }
    return {
        {QStringLiteral("first_faulty"),
         loc.firstFaulty ? tensorRef(results, *loc.firstFaulty) : QJsonValue()},
        {QStringLiteral("per_rank"), perRank},
        {QStringLiteral("root_cause"), rootCause},
        {QStringLiteral("faulty_shard"), faultyShard},
        {QStringLiteral("faulty_count"), static_cast<qint64>(loc.faultyCount)},
    };
}

}  // namespace

QByteArray reportToJson(const CheckReport& report) {
    const auto& results = report.comparison.results;
    QJsonObject runs{
        {QStringLiteral("distributed"), runJson(report.distributed)},
        {QStringLiteral("reference"), runJson(report.reference)},
        {QStringLiteral("perturbed"),
         report.perturbed ? QJsonValue(runJson(*report.perturbed)) : QJsonValue()},
    };
    QJsonArray tensors;
    for (std::size_t i = 0; i < results.size(); ++i) {
        tensors.append(tensorJson(results[i], *report.shardsOf(i), *report.rankSeqOf(i), i));
    }
    const QJsonObject root{
        {QStringLiteral("schema"), QStringLiteral("ttrace-report")},
        {QStringLiteral("schema_version"), kSchemaVersion},
        {QStringLiteral("tool"), QJsonObject{{QStringLiteral("name"), QStringLiteral("ttrace")},
                                             {QStringLiteral("version"), report.toolVersion}}},
        {QStringLiteral("created"), report.created.toString(Qt::ISODate)},
        {QStringLiteral("verdict"),
         report.bugFound() ? QStringLiteral("bug") : QStringLiteral("no bug")},
        {QStringLiteral("summary"), report_text::verdictLine(report)},
        {QStringLiteral("runs"), runs},
        {QStringLiteral("thresholds"), thresholdConfigJson(report)},
        {QStringLiteral("comparison"),
         QJsonObject{{QStringLiteral("backend"), report.comparison.backendName},
                     {QStringLiteral("bytes_compared"),
                      static_cast<qint64>(report.comparison.bytesCompared)},
                     {QStringLiteral("seconds"), number(report.seconds)},
                     {QStringLiteral("from_cache"), report.fromCache},
                     {QStringLiteral("cancelled"), report.comparison.cancelled},
                     {QStringLiteral("tensor_count"), static_cast<qint64>(results.size())}}},
        {QStringLiteral("localization"), localizationJson(report)},
        {QStringLiteral("tensors"), tensors},
        {QStringLiteral("diagnostics"), diagnosticsJson(report_text::allDiagnostics(report))},
    };
    return QJsonDocument(root).toJson(QJsonDocument::Indented);
}

}  // namespace ttrace

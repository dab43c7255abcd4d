#include <QBuffer>
#include <QHash>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <vector>

#include "report/ReportText.h"
#include "report/ReportWriters.h"

namespace ttrace {

namespace {

// 3: tensors[].fp8_scales; 4: rank_seq and per_rank by rank runs, at most kCleanShards
// shards of a tensor within tolerance; 7: tensors[].recomputation_mismatches; 10: each run's
// own diagnostics, each diagnostic's code; 11: fp8 scale mismatches' across_reference_blocks;
// 12: fp8_scales.data_parallel_blocks; 13: fp8_scales.reference_scale_format and
// reference_tensor_scale.
constexpr int kSchemaVersion = 13;
// Shards listed for a tensor within tolerance: its worst ones. A 10,000-rank job shards an
// activation over thousands of data-parallel ranks; every shard stays in the results store.
constexpr std::size_t kCleanShards = 16;

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
        {QStringLiteral("details"), d.details},
        {QStringLiteral("code"), d.code},
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

// Where a faulty output gradient came from: {"source": "module" (the backward of `module`
// handed it over) or "enclosing_module" (made inside `module`), "module", "upstream": the
// tensor it was computed from} or {"source": "loss"}; null when the root cause is not an
// output gradient.
QJsonValue gradientFrom(const std::vector<TensorResult>& results,
                        const std::optional<GradientSource>& gradient) {
    if (!gradient) {
        return QJsonValue();
    }
    if (!gradient->upstream) {
        return QJsonObject{{QStringLiteral("source"), QStringLiteral("loss")}};
    }
    const std::size_t upstream = *gradient->upstream;
    return QJsonObject{
        {QStringLiteral("source"), gradient->from == GradientSource::From::Module
                                       ? QStringLiteral("module")
                                       : QStringLiteral("enclosing_module")},
        {QStringLiteral("module"),
         upstream < results.size() ? results[upstream].key.module() : QString()},
        {QStringLiteral("upstream"), tensorRef(results, upstream)},
    };
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
        {QStringLiteral("step_allowance"), optionalNumber(t.stepAllowance)},
        {QStringLiteral("perturbation_rejected"), t.perturbationRejected()},
        {QStringLiteral("blind"), t.blind()},
    };
}

// Every copy of a faulty tensor's shards; of the others, the worst copy of each shard, at most
// kCleanShards of them (the worst), in shard order.
std::vector<std::size_t> listedShards(const TensorResult& r,
                                      const std::vector<ShardResult>& copies) {
    if (r.isFaulty()) {
        std::vector<std::size_t> all(copies.size());
        std::iota(all.begin(), all.end(), std::size_t{0});
        return all;
    }
    std::vector<std::size_t> worst = worstCopies(copies);
    if (worst.size() > kCleanShards) {
        std::stable_sort(worst.begin(), worst.end(), [&copies](std::size_t a, std::size_t b) {
            return copies[a].normalizedError > copies[b].normalizedError;
        });
        worst.resize(kCleanShards);
        std::sort(worst.begin(), worst.end());
    }
    return worst;
}

// Ranks as ascending runs of [start, stop): thousands of ranks in a few pairs.
QJsonArray rankRuns(std::vector<int> ranks) {
    std::sort(ranks.begin(), ranks.end());
    QJsonArray runs;
    for (std::size_t i = 0; i < ranks.size();) {
        std::size_t j = i;
        while (j + 1 < ranks.size() && ranks[j + 1] <= ranks[j] + 1) {
            ++j;
        }
        runs.append(QJsonArray{ranks[i], ranks[j] + 1});
        i = j + 1;
    }
    return runs;
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
            {QStringLiteral("block"), m.block.toJsonArray()},
            {QStringLiteral("block_text"), m.block.toString()},
            {QStringLiteral("scale_inv"), number(m.scaleInv)},
            {QStringLiteral("reference_scale_inv"), number(m.referenceScaleInv)},
            {QStringLiteral("ratio"), number(m.ratio)},
            {QStringLiteral("blocks_beyond"), static_cast<qint64>(m.blocksBeyond)},
            {QStringLiteral("across_reference_blocks"), m.acrossReferenceBlocks},
        });
    }
    return QJsonObject{
        {QStringLiteral("reference_block"),
         check->referenceBlock.empty() ? QJsonValue() : QJsonValue(ints(check->referenceBlock))},
        {QStringLiteral("reference_scale_format"),
         check->referenceFormat ? QJsonValue(scaleFormatName(*check->referenceFormat))
                                : QJsonValue()},
        {QStringLiteral("reference_tensor_scale"), check->referenceTensorScale},
        {QStringLiteral("reference_scale_inv"), number(check->referenceScaleInv)},
        {QStringLiteral("perturbed_scale_inv"), optionalNumber(check->perturbedScaleInv)},
        {QStringLiteral("tolerance"), number(check->tolerance)},
        {QStringLiteral("max_difference"), number(check->maxDifference)},
        {QStringLiteral("copies_agree"), check->copiesAgree},
        {QStringLiteral("blocks_not_compared"), static_cast<qint64>(check->blocksNotCompared)},
        {QStringLiteral("data_parallel_blocks"), static_cast<qint64>(check->dataParallelBlocks)},
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
    QJsonArray recomputations;
    for (const RecomputationMismatch& m : r.recomputationMismatches) {
        recomputations.append(QJsonObject{
            {QStringLiteral("ranges"), m.ranges.toJsonArray()},
            {QStringLiteral("ranges_text"), m.ranges.toString()},
            {QStringLiteral("rank"), m.rank},
            {QStringLiteral("differing_elements"), static_cast<qint64>(m.differingElements)},
            {QStringLiteral("elements"), static_cast<qint64>(m.elements)},
            {QStringLiteral("scales_differ"), m.scalesDiffer},
        });
    }
    std::map<std::int64_t, std::vector<int>> ranksBySeq;
    for (const auto& [rank, seq] : rankSeqs) {
        ranksBySeq[seq].push_back(rank);
    }
    QJsonArray rankSeq;
    for (const auto& [seq, ranks] : ranksBySeq) {
        rankSeq.append(QJsonObject{{QStringLiteral("ranks"), rankRuns(ranks)},
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
        {QStringLiteral("common_factor"), number(r.commonFactor)},
        {QStringLiteral("judged_error"), number(r.judgedError())},
        {QStringLiteral("metrics"), metricsJson(r.metrics)},
        {QStringLiteral("perturbation"),
         r.perturbation ? QJsonValue(metricsJson(*r.perturbation)) : QJsonValue()},
        {QStringLiteral("threshold"), thresholdJson(r.threshold)},
        {QStringLiteral("shards"), shards},
        {QStringLiteral("shard_copies"), static_cast<qint64>(copies.size())},
        {QStringLiteral("replica_mismatches"), mismatches},
        {QStringLiteral("recomputation_mismatches"), recomputations},
        {QStringLiteral("fp8_scales"), fp8ScalesJson(r.fp8Scales)},
        {QStringLiteral("diagnostics"), diagnosticsJson(r.diagnostics)},
    };
}

QJsonArray gradientFactorsJson(const std::vector<CommonGradientFactor>& fits) {
    QJsonArray array;
    for (const auto& fit : fits) {
        array.append(QJsonObject{
            {QStringLiteral("iteration"), fit.iteration},
            {QStringLiteral("kind"), tensorKindName(fit.kind)},
            {QStringLiteral("factor"), number(fit.factor)},
            {QStringLiteral("bound"), number(fit.bound)},
            {QStringLiteral("scatter"), number(fit.scatter)},
            {QStringLiteral("elements"), static_cast<qint64>(fit.elements)},
            {QStringLiteral("tensors"), fit.tensors},
            {QStringLiteral("removed"), fit.removed()},
            {QStringLiteral("accepted_beyond"), fit.acceptedBeyond},
            {QStringLiteral("updates_accepted"), fit.updatesAccepted},
        });
    }
    return array;
}

// The diagnostics about a run's own files (its manifest and rank files), each with the rank
// whose file it names (null for the manifest or the folder): what the check found wrong in a
// trusted run is told apart from the distributed run's problems.
QJsonArray ownDiagnosticsJson(const RunInfo& run, const Diagnostics& all) {
    const QString inside = run.folder + QLatin1Char('/');
    QHash<QString, int> rankOfFile;  // looked up once per diagnostic: 10,000 ranks are common
    for (const RankEntry& r : run.manifest.ranks) {
        rankOfFile.insert(inside + r.file, r.rank);
    }
    QJsonArray own;
    for (const Diagnostic& d : all) {
        if (d.file != run.folder && !d.file.startsWith(inside)) {
            continue;
        }
        QJsonObject entry = diagnosticJson(d);
        const auto rank = rankOfFile.constFind(d.file);
        entry[QStringLiteral("rank")] =
            rank != rankOfFile.cend() ? QJsonValue(*rank) : QJsonValue();
        own.append(entry);
    }
    return own;
}

QJsonObject runJson(const RunInfo& run, const Diagnostics& diagnostics) {
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
        {QStringLiteral("diagnostics"), ownDiagnosticsJson(run, diagnostics)},
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
    // Ranks whose first fault is the same tensor at the same place in their order share an
    // entry, ordered by their lowest rank.
    std::map<std::pair<std::size_t, std::int64_t>, std::vector<int>> ranksByFault;
    for (const RankFirstFault& f : loc.perRank) {
        ranksByFault[{f.result, f.seq}].push_back(f.rank);
    }
    std::vector<std::pair<int, QJsonObject>> entries;
    for (const auto& [fault, ranks] : ranksByFault) {
        QJsonObject entry = tensorRef(results, fault.first).toObject();
        entry.insert(QStringLiteral("ranks"), rankRuns(ranks));
        entry.insert(QStringLiteral("seq"), static_cast<qint64>(fault.second));
        entries.emplace_back(*std::min_element(ranks.begin(), ranks.end()), entry);
    }
    std::sort(entries.begin(), entries.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    QJsonArray perRank;
    for (const auto& [lowest, entry] : entries) {
        perRank.append(entry);
    }
    QJsonValue rootCause;
    if (loc.rootCause) {
        const RootCause& rc = *loc.rootCause;
        rootCause = QJsonObject{
            {QStringLiteral("module"), rc.module},
            {QStringLiteral("output"), tensorRef(results, rc.result)},
            {QStringLiteral("input"), rc.input ? tensorRef(results, *rc.input) : QJsonValue()},
            {QStringLiteral("gradient_from"), gradientFrom(results, rc.gradient)},
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

// `value` as QJsonDocument::Indented writes it `depth` levels deep, without a line end: so
// that the report, written piece by piece, reads as if written whole.
QByteArray indented(const QJsonValue& value, int depth) {
    QByteArray text;
    if (value.isObject()) {
        text = QJsonDocument(value.toObject()).toJson(QJsonDocument::Indented);
    } else if (value.isArray()) {
        text = QJsonDocument(value.toArray()).toJson(QJsonDocument::Indented);
    } else {
        text = QJsonDocument(QJsonArray{value}).toJson(QJsonDocument::Compact);
        return text.mid(1, text.size() - 2);  // without the array's brackets
    }
    text.chop(1);  // the document's own line end
    const QByteArray lineStart = QByteArray("\n") + QByteArray(4 * depth, ' ');
    return text.replace(QByteArrayView("\n"), lineStart);
}

QString verdictName(Verdict verdict) {
    switch (verdict) {
        case Verdict::BugFound:
            return QStringLiteral("bug");
        case Verdict::NoBug:
            return QStringLiteral("no bug");
        case Verdict::NoBugInPart:
            return QStringLiteral("no bug in part");
        case Verdict::NothingCompared:
            return QStringLiteral("nothing compared");
    }
    return {};
}

QJsonObject coverageJson(const CheckReport& report) {
    const Coverage& c = report.comparison.coverage;
    const std::int64_t compared = report.comparedCount();
    return QJsonObject{
        {QStringLiteral("reference_tensors"), static_cast<qint64>(c.referenceTensors)},
        {QStringLiteral("compared"), static_cast<qint64>(compared)},
        {QStringLiteral("not_captured"), static_cast<qint64>(c.notCaptured)},
        {QStringLiteral("not_comparable"), static_cast<qint64>(c.notCompared(compared))},
        {QStringLiteral("not_in_reference"), static_cast<qint64>(c.notInReference)},
        {QStringLiteral("blind"), static_cast<qint64>(c.blind)},
        {QStringLiteral("complete"), c.complete(compared)},
        {QStringLiteral("text"), c.describe(compared)},
    };
}

}  // namespace

bool writeJsonReport(const CheckReport& report, QIODevice& out) {
    const auto& results = report.comparison.results;
    const Diagnostics diagnostics = report_text::allDiagnostics(report);
    QJsonObject runs{
        {QStringLiteral("distributed"), runJson(report.distributed, diagnostics)},
        {QStringLiteral("reference"), runJson(report.reference, diagnostics)},
        {QStringLiteral("perturbed"),
         report.perturbed ? QJsonValue(runJson(*report.perturbed, diagnostics)) : QJsonValue()},
    };
    const QString tensorsKey = QStringLiteral("tensors");
    // Keys sorted, as QJsonObject sorts them; the tensors are written one at a time.
    const std::map<QString, QJsonValue> fields{
        {QStringLiteral("schema"), QStringLiteral("ttrace-report")},
        {QStringLiteral("schema_version"), kSchemaVersion},
        {QStringLiteral("tool"), QJsonObject{{QStringLiteral("name"), QStringLiteral("ttrace")},
                                             {QStringLiteral("version"), report.toolVersion}}},
        {QStringLiteral("created"), report.created.toString(Qt::ISODate)},
        {QStringLiteral("verdict"), verdictName(report.verdict())},
        {QStringLiteral("coverage"), coverageJson(report)},
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
        {QStringLiteral("gradient_factors"), gradientFactorsJson(report.gradientFactors)},
        {tensorsKey, QJsonValue()},
        {QStringLiteral("diagnostics"), diagnosticsJson(diagnostics)},
    };
    bool ok = out.write("{\n") == 2;
    const auto write = [&](const QByteArray& bytes) {
        ok = ok && out.write(bytes) == bytes.size();
    };
    std::size_t written = 0;
    for (const auto& [key, value] : fields) {
        write(QByteArray("    ") + indented(key, 1) + QByteArray(": "));
        if (key != tensorsKey) {
            write(indented(value, 1));
        } else if (results.empty()) {
            write("[\n    ]");
        } else {
            write("[\n");
            for (std::size_t i = 0; ok && i < results.size(); ++i) {
                write(QByteArray("        ") +
                      indented(tensorJson(results[i], *report.shardsOf(i), *report.rankSeqOf(i), i),
                               2) +
                      QByteArray(i + 1 < results.size() ? ",\n" : "\n"));
            }
            write("    ]");
        }
        write(++written < fields.size() ? ",\n" : "\n");
    }
    write("}\n");
    return ok;
}

QByteArray reportToJson(const CheckReport& report) {
    QBuffer buffer;
    buffer.open(QIODevice::WriteOnly);
    static_cast<void>(writeJsonReport(report, buffer));  // a buffer takes every write
    return buffer.data();
}

}  // namespace ttrace

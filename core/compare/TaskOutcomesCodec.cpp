#include "compare/TaskOutcomesCodec.h"

#include <QDataStream>
#include <QIODevice>
#include <limits>

namespace ttrace {

namespace {

// Changes whenever the layout below changes; processes of one job run the same binary, the
// check only turns a mix-up into a clear error.
constexpr quint32 kMagic = 0x74744f34;  // "ttO4"

// Enums travel by name, so that a bad byte can never become an out-of-range enum.
template <typename Enum, typename NameFn>
std::optional<Enum> enumFromName(const QString& name, NameFn nameOf,
                                 std::initializer_list<Enum> all) {
    for (const Enum value : all) {
        if (nameOf(value) == name) {
            return value;
        }
    }
    return std::nullopt;
}

class Writer {
public:
    explicit Writer(QByteArray* bytes) : stream_(bytes, QIODevice::WriteOnly) {
        stream_.setVersion(QDataStream::Qt_6_4);
    }

    void size(std::size_t n) { stream_ << static_cast<quint64>(n); }
    void integer(std::int64_t v) { stream_ << static_cast<qint64>(v); }
    void real(double v) { stream_ << v; }
    void flag(bool v) { stream_ << v; }
    void text(const QString& v) { stream_ << v; }
    template <typename Int>
    void integers(const std::vector<Int>& values) {
        size(values.size());
        for (const auto v : values) {
            integer(v);
        }
    }
    void optionalReal(const std::optional<double>& v) {
        flag(v.has_value());
        real(v.value_or(0));
    }

    void diagnostic(const Diagnostic& d) {
        text(severityName(d.severity));
        text(d.file);
        text(d.dataset);
        text(d.tensor);
        text(d.message);
        text(d.details);
        text(d.code);
    }
    void diagnostics(const Diagnostics& all) {
        size(all.size());
        for (const auto& d : all) {
            diagnostic(d);
        }
    }
    void ranges(const ShardRanges& r) {
        size(r.dims.size());
        for (const auto& dim : r.dims) {
            size(dim.size());
            for (const auto& range : dim) {
                integer(range.start);
                integer(range.stop);
            }
        }
    }
    void metrics(const ErrorMetrics& m) {
        integer(m.count);
        real(m.relativeError);
        real(m.maxAbsError);
        integers(m.maxAbsIndex);
        real(m.maxRelError);
        integers(m.maxRelIndex);
        real(m.cosine);
        real(m.refNorm);
        real(m.distNorm);
        for (const auto v :
             {m.zeroRefMismatches, m.nanDist, m.infDist, m.nanRef, m.infRef, m.bitDifferences}) {
            integer(v);
        }
    }
    void result(const TensorResult& r) {
        text(r.key.name);
        text(tensorKindName(r.key.kind));
        for (const int v : {r.key.index, r.key.iteration, r.key.microBatch, r.layer, r.expert}) {
            integer(v);
        }
        text(dtypeName(r.dtype));
        integers(r.globalShape);
        integer(r.bytesCompared);
        metrics(r.metrics);
        flag(r.perturbation.has_value());
        if (r.perturbation) {
            metrics(*r.perturbation);
        }
        real(r.threshold.value);
        text(thresholdMethodName(r.threshold.method));
        real(r.threshold.theoretical);
        optionalReal(r.threshold.perturbationError);
        optionalReal(r.threshold.perturbationThreshold);
        real(r.threshold.floor);
        text(r.threshold.overridePattern);
        real(r.normalizedError);
        size(r.shards.size());
        for (const auto& shard : r.shards) {
            ranges(shard.ranges);
            integers(shard.ranks);
            integer(shard.replica);
            metrics(shard.metrics);
            real(shard.normalizedError);
        }
        size(r.replicaMismatches.size());
        for (const auto& m : r.replicaMismatches) {
            ranges(m.ranges);
            integers(m.ranksA);
            integers(m.ranksB);
            integer(m.differingElements);
            real(m.maxAbsDifference);
        }
        size(r.recomputationMismatches.size());
        for (const auto& m : r.recomputationMismatches) {
            ranges(m.ranges);
            integer(m.rank);
            integer(m.differingElements);
            integer(m.elements);
            flag(m.scalesDiffer);
        }
        integer(r.referenceSeq);
        size(r.rankSeq.size());
        for (const auto& [rank, seq] : r.rankSeq) {
            integer(rank);
            integer(seq);
        }
        diagnostics(r.diagnostics);
        flag(r.fp8Scales.has_value());
        if (r.fp8Scales) {
            integers(r.fp8Scales->referenceBlock);
            real(r.fp8Scales->referenceScaleInv);
            optionalReal(r.fp8Scales->perturbedScaleInv);
            real(r.fp8Scales->tolerance);
            real(r.fp8Scales->maxDifference);
            flag(r.fp8Scales->copiesAgree);
            integer(r.fp8Scales->blocksNotCompared);
            integer(r.fp8Scales->dataParallelBlocks);
            // -1: no format of its own; else ScaleFormat's value
            integer(r.fp8Scales->referenceFormat ? static_cast<int>(*r.fp8Scales->referenceFormat)
                                                 : -1);
            flag(r.fp8Scales->referenceTensorScale);
            size(r.fp8Scales->mismatches.size());
            for (const auto& m : r.fp8Scales->mismatches) {
                ranges(m.ranges);
                integers(m.ranks);
                ranges(m.block);
                real(m.scaleInv);
                real(m.referenceScaleInv);
                real(m.ratio);
                integer(m.blocksBeyond);
                flag(m.acrossReferenceBlocks);
            }
        }
    }

private:
    QDataStream stream_;
};

// Reads what Writer wrote; any inconsistency sets ok() to false and later reads return zeros.
class Reader {
public:
    explicit Reader(const QByteArray& bytes) : stream_(bytes) {
        stream_.setVersion(QDataStream::Qt_6_4);
    }

    bool ok() const { return ok_ && stream_.status() == QDataStream::Ok; }
    bool atEnd() const { return stream_.atEnd(); }
    void fail() { ok_ = false; }

    // A count, refused when larger than what the remaining bytes could hold.
    std::size_t size() {
        quint64 n = 0;
        stream_ >> n;
        if (!ok() || n > static_cast<quint64>(stream_.device()->bytesAvailable())) {
            fail();
            return 0;
        }
        return static_cast<std::size_t>(n);
    }
    std::int64_t integer() {
        qint64 v = 0;
        stream_ >> v;
        return v;
    }
    int smallInteger() {
        const std::int64_t v = integer();
        if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
            fail();
            return 0;
        }
        return static_cast<int>(v);
    }
    double real() {
        double v = 0;
        stream_ >> v;
        return v;
    }
    bool flag() {
        bool v = false;
        stream_ >> v;
        return v;
    }
    QString text() {
        QString v;
        stream_ >> v;
        return v;
    }
    template <typename Int>
    std::vector<Int> integers() {
        std::vector<Int> values(size());
        for (auto& v : values) {
            v = static_cast<Int>(integer());
        }
        return values;
    }
    std::optional<double> optionalReal() {
        const bool present = flag();
        const double v = real();
        return present ? std::optional<double>(v) : std::nullopt;
    }
    template <typename Enum>
    Enum checked(const std::optional<Enum>& value) {
        if (!value) {
            fail();
            return Enum{};
        }
        return *value;
    }

    Diagnostic diagnostic() {
        Diagnostic d;
        d.severity = checked(enumFromName(text(), severityName,
                                          {Severity::Info, Severity::Warning, Severity::Error}));
        d.file = text();
        d.dataset = text();
        d.tensor = text();
        d.message = text();
        d.details = text();
        d.code = text();
        return d;
    }
    Diagnostics diagnostics() {
        Diagnostics all(size());
        for (auto& d : all) {
            d = diagnostic();
        }
        return all;
    }
    ShardRanges ranges() {
        ShardRanges r;
        r.dims.resize(size());
        for (auto& dim : r.dims) {
            dim.resize(size());
            for (auto& range : dim) {
                range.start = integer();
                range.stop = integer();
            }
        }
        return r;
    }
    ErrorMetrics metrics() {
        ErrorMetrics m;
        m.count = integer();
        m.relativeError = real();
        m.maxAbsError = real();
        m.maxAbsIndex = integers<std::int64_t>();
        m.maxRelError = real();
        m.maxRelIndex = integers<std::int64_t>();
        m.cosine = real();
        m.refNorm = real();
        m.distNorm = real();
        for (auto* v : {&m.zeroRefMismatches, &m.nanDist, &m.infDist, &m.nanRef, &m.infRef,
                        &m.bitDifferences}) {
            *v = integer();
        }
        return m;
    }
    TensorResult result() {
        TensorResult r;
        r.key.name = text();
        r.key.kind = checked(tensorKindFromName(text()));
        for (int* v : {&r.key.index, &r.key.iteration, &r.key.microBatch, &r.layer, &r.expert}) {
            *v = smallInteger();
        }
        r.dtype = checked(dtypeFromName(text()));
        r.globalShape = integers<std::int64_t>();
        r.bytesCompared = integer();
        r.metrics = metrics();
        if (flag()) {
            r.perturbation = metrics();
        }
        r.threshold.value = real();
        r.threshold.method =
            checked(enumFromName(text(), thresholdMethodName,
                                 {ThresholdMethod::Perturbation, ThresholdMethod::Theoretical,
                                  ThresholdMethod::Override, ThresholdMethod::StepAllowance}));
        r.threshold.theoretical = real();
        r.threshold.perturbationError = optionalReal();
        r.threshold.perturbationThreshold = optionalReal();
        r.threshold.floor = real();
        r.threshold.overridePattern = text();
        r.normalizedError = real();
        r.shards.resize(size());
        for (auto& shard : r.shards) {
            shard.ranges = ranges();
            shard.ranks = integers<int>();
            shard.replica = smallInteger();
            shard.metrics = metrics();
            shard.normalizedError = real();
        }
        r.replicaMismatches.resize(size());
        for (auto& m : r.replicaMismatches) {
            m.ranges = ranges();
            m.ranksA = integers<int>();
            m.ranksB = integers<int>();
            m.differingElements = integer();
            m.maxAbsDifference = real();
        }
        r.recomputationMismatches.resize(size());
        for (auto& m : r.recomputationMismatches) {
            m.ranges = ranges();
            m.rank = smallInteger();
            m.differingElements = integer();
            m.elements = integer();
            m.scalesDiffer = flag();
        }
        r.referenceSeq = integer();
        const std::size_t seqs = size();
        for (std::size_t i = 0; i < seqs && ok(); ++i) {
            const int rank = smallInteger();
            r.rankSeq[rank] = integer();
        }
        r.diagnostics = diagnostics();
        if (flag()) {
            Fp8ScaleCheck check;
            check.referenceBlock = integers<std::int64_t>();
            check.referenceScaleInv = real();
            check.perturbedScaleInv = optionalReal();
            check.tolerance = real();
            check.maxDifference = real();
            check.copiesAgree = flag();
            check.blocksNotCompared = integer();
            check.dataParallelBlocks = integer();
            const std::int64_t format = integer();
            if (format == static_cast<int>(ScaleFormat::E8M0) ||
                format == static_cast<int>(ScaleFormat::E4M3)) {
                check.referenceFormat = static_cast<ScaleFormat>(format);
            } else if (format != -1) {
                fail();
            }
            check.referenceTensorScale = flag();
            check.mismatches.resize(size());
            for (auto& m : check.mismatches) {
                m.ranges = ranges();
                m.ranks = integers<int>();
                m.block = ranges();
                m.scaleInv = real();
                m.referenceScaleInv = real();
                m.ratio = real();
                m.blocksBeyond = integer();
                m.acrossReferenceBlocks = flag();
            }
            r.fp8Scales = std::move(check);
        }
        return r;
    }

private:
    QDataStream stream_;
    bool ok_ = true;
};

}  // namespace

QByteArray encodeTaskOutcomes(const TaskOutcomes& outcomes) {
    QByteArray bytes;
    Writer w(&bytes);
    w.integer(kMagic);
    w.text(outcomes.backendName);
    w.text(outcomes.failure);
    w.flag(outcomes.cancelled);
    w.integers(outcomes.journaled);
    w.integers(outcomes.unchecked);
    w.size(outcomes.finished.size());
    for (const auto& outcome : outcomes.finished) {
        w.integer(static_cast<std::int64_t>(outcome.task));
        w.flag(outcome.result.has_value());
        if (outcome.result) {
            w.result(*outcome.result);
        } else {
            w.diagnostics(outcome.failures);
        }
    }
    return bytes;
}

std::optional<TaskOutcomes> decodeTaskOutcomes(const QByteArray& bytes) {
    Reader r(bytes);
    if (r.integer() != kMagic) {
        return std::nullopt;
    }
    TaskOutcomes outcomes;
    outcomes.backendName = r.text();
    outcomes.failure = r.text();
    outcomes.cancelled = r.flag();
    outcomes.journaled = r.integers<std::size_t>();
    outcomes.unchecked = r.integers<std::size_t>();
    const std::size_t count = r.size();
    for (std::size_t i = 0; i < count && r.ok(); ++i) {
        TaskOutcome outcome;
        const std::int64_t task = r.integer();
        if (task < 0) {
            return std::nullopt;
        }
        outcome.task = static_cast<std::size_t>(task);
        if (r.flag()) {
            outcome.result = r.result();
        } else {
            outcome.failures = r.diagnostics();
        }
        outcomes.finished.push_back(std::move(outcome));
    }
    if (!r.ok() || !r.atEnd()) {
        return std::nullopt;
    }
    return outcomes;
}

}  // namespace ttrace

// Canonical mapping: every layout of the fixtures assembles into the right shards, replicas
// and partial sums; bad layouts are refused with a diagnostic that says why; block plans
// cover a shard exactly once.
#include <QTest>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <set>

#include "TestPaths.h"
#include "mapping/BlockPlan.h"
#include "mapping/CanonicalMapping.h"
#include "mapping/TilingCheck.h"
#include "trace/BoxCopy.h"
#include "trace/TraceSet.h"

using namespace ttrace;
using ttrace::test::fixture;

namespace {

using Shape = std::vector<std::int64_t>;
using Ranges = std::vector<std::vector<IndexRange>>;

TensorRecord makeRecord(int rank, const QString& name, TensorKind kind, const Shape& global,
                        const Ranges& ranges, std::vector<AxisPlacement> placements,
                        std::vector<int> coords, DType dtype = DType::F32) {
    TensorRecord r;
    r.rank = rank;
    r.file = QStringLiteral("/traces/rank%1.h5").arg(rank);
    r.dataset = QStringLiteral("/tensors/%1").arg(rank, 6, 10, QLatin1Char('0'));
    r.key.name = name;
    r.key.kind = kind;
    r.key.microBatch = isParameterKind(kind) ? -1 : 0;
    r.seq = rank;
    r.dtype = dtype;
    r.globalShape = global;
    r.ranges.dims = ranges.empty() ? ShardRanges::whole(global).dims : ranges;
    r.localShape = r.ranges.localShape();
    r.placements = std::move(placements);
    r.coords = std::move(coords);
    return r;
}

AxisPlacement on(const char* axis, const char* placement) {
    return AxisPlacement{QString::fromUtf8(axis), *Placement::parse(QString::fromUtf8(placement))};
}

TraceSet makeSet(std::vector<QString> axes, std::vector<int> shape,
                 std::vector<TensorRecord> records) {
    TraceSet set;
    set.folder = QStringLiteral("/traces");
    set.manifest.meshAxes = std::move(axes);
    set.manifest.meshShape = std::move(shape);
    set.records = std::move(records);
    return set;
}

QString allMessages(const Diagnostics& diagnostics) {
    QStringList lines;
    for (const auto& d : diagnostics) {
        lines << d.toString();
    }
    return lines.join(QLatin1Char('\n'));
}

// A trace set opened from the fixtures together with its mapping (which points into it).
struct Mapped {
    std::unique_ptr<TraceSet> set;
    MappingResult mapping;

    const LogicalTensor* find(const char* name, TensorKind kind, int iteration = 0,
                              int microBatch = 0) const {
        for (const auto& t : mapping.tensors) {
            if (t.key.name == QString::fromUtf8(name) && t.key.kind == kind &&
                t.key.iteration == iteration &&
                (isParameterKind(kind) || t.key.microBatch == microBatch)) {
                return &t;
            }
        }
        return nullptr;
    }
};

Mapped mapFixture(const QString& caseName, const QString& role) {
    Mapped m;
    m.set = std::make_unique<TraceSet>(openTraceSet(fixture(caseName, role)));
    m.mapping = buildLogicalTensors(*m.set);
    return m;
}

std::size_t replicaCount(const LogicalTensor& t) {
    std::size_t n = 0;
    for (const auto& s : t.shards) {
        n += s.replicas.size();
    }
    return n;
}

struct Box {
    std::vector<std::int64_t> shape, start, count;

    std::int64_t elements() const {
        return std::accumulate(count.begin(), count.end(), std::int64_t{1}, std::multiplies<>());
    }
    // copyBox of an array that holds each element's own linear index.
    std::vector<std::int32_t> packedIndices() const {
        std::vector<std::int32_t> array(static_cast<std::size_t>(
            std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>())));
        std::iota(array.begin(), array.end(), 0);
        std::vector<std::int32_t> out(static_cast<std::size_t>(elements()), -1);
        copyBox(reinterpret_cast<const std::byte*>(array.data()), shape, start, count,
                sizeof(std::int32_t), reinterpret_cast<std::byte*>(out.data()));
        return out;
    }
};

// A random box of a random array of 1 to 4 dimensions; a third of the dimensions are taken
// whole, so that trailing ones merge into longer runs.
Box randomBox(std::mt19937& rng) {
    const std::size_t nd = 1 + rng() % 4;
    Box box{std::vector<std::int64_t>(nd), std::vector<std::int64_t>(nd),
            std::vector<std::int64_t>(nd)};
    for (std::size_t d = 0; d < nd; ++d) {
        box.shape[d] = 1 + static_cast<std::int64_t>(rng() % 6);
        box.start[d] = static_cast<std::int64_t>(rng() % static_cast<std::uint32_t>(box.shape[d]));
        box.count[d] = 1 + static_cast<std::int64_t>(
                               rng() % static_cast<std::uint32_t>(box.shape[d] - box.start[d]));
        if (rng() % 3 == 0) {
            box.start[d] = 0;
            box.count[d] = box.shape[d];
        }
    }
    return box;
}

}  // namespace

class TestMapping : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() {
        QVERIFY2(!ttrace::test::fixturesRoot().isEmpty(), "TTRACE_FIXTURES is not set");
    }

    // ---------------------------------------------------------------- synthetic records

    void columnParallelAssembles() {
        auto set = makeSet({QStringLiteral("tp")}, {2},
                           {makeRecord(0, QStringLiteral("fc1"), TensorKind::ForwardOutput, {4, 16},
                                       {{{0, 4}}, {{0, 8}}}, {on("tp", "Shard(1)")}, {0}),
                            makeRecord(1, QStringLiteral("fc1"), TensorKind::ForwardOutput, {4, 16},
                                       {{{0, 4}}, {{8, 16}}}, {on("tp", "Shard(1)")}, {1}),
                            makeRecord(0, QStringLiteral("fc1"), TensorKind::ForwardInput, {4, 8},
                                       {}, {on("tp", "Replicate")}, {0}),
                            makeRecord(1, QStringLiteral("fc1"), TensorKind::ForwardInput, {4, 8},
                                       {}, {on("tp", "Replicate")}, {1})});
        const auto m = buildLogicalTensors(set);
        QVERIFY2(m.diagnostics.empty(), qPrintable(allMessages(m.diagnostics)));
        QCOMPARE(m.tensors.size(), std::size_t(2));
        const auto& input = m.tensors[0];  // ordered by key: forward_input first
        QCOMPARE(input.key.kind, TensorKind::ForwardInput);
        QCOMPARE(input.shards.size(), std::size_t(1));
        QCOMPARE(input.shards[0].replicas.size(), std::size_t(2));
        QCOMPARE(input.shards[0].replicas[1].ranks(), std::vector<int>{1});
        const auto& output = m.tensors[1];
        QCOMPARE(output.shards.size(), std::size_t(2));
        QCOMPARE(output.shards[1].ranges.dims[1][0], (IndexRange{8, 16}));
        QCOMPARE(output.ranks(), (std::vector<int>{0, 1}));
        QCOMPARE(output.seqOnRank(1), 1);
        QCOMPARE(output.seqOnRank(2), -1);
        QCOMPARE(output.elementCount(), 64);
    }

    void stridedAndEmptyShardsFromDTensor() {
        // FSDP2 over tensor parallelism, 5 rows on dp x tp = 2 x 2: dp's _StridedShard keeps
        // rows {0, 1, 3} and {2, 4}, tp then splits those as torch.chunk does.
        const auto strided = on("dp", "_StridedShard(dim=0, sf=2)");
        QCOMPARE(strided.placement, (Placement{Placement::Type::Shard, 0, 2}));
        QCOMPARE(strided.placement.toString(), QStringLiteral("_StridedShard(dim=0, sf=2)"));
        const Ranges rows[] = {
            {{{0, 2}}, {{0, 3}}}, {{{3, 4}}, {{0, 3}}}, {{{2, 3}}, {{0, 3}}}, {{{4, 5}}, {{0, 3}}}};
        std::vector<TensorRecord> records;
        for (int rank = 0; rank < 4; ++rank) {
            records.push_back(makeRecord(rank, QStringLiteral("w"), TensorKind::Param, {5, 3},
                                         rows[rank], {strided, on("tp", "Shard(0)")},
                                         {rank / 2, rank % 2}));
        }
        // 3 rows over 4 ranks: torch.chunk leaves the last rank an empty shard
        for (int rank = 0; rank < 4; ++rank) {
            const Ranges ranges = {
                rank < 3 ? std::vector<IndexRange>{{rank, rank + 1}} : std::vector<IndexRange>{},
                {{0, 2}}};
            records.push_back(makeRecord(rank, QStringLiteral("v"), TensorKind::Param, {3, 2},
                                         ranges, {on("dp", "Shard(0)"), on("tp", "Shard(0)")},
                                         {rank / 2, rank % 2}));
        }
        // The mapping points into the set's records: the set must outlive it.
        const TraceSet set =
            makeSet({QStringLiteral("dp"), QStringLiteral("tp")}, {2, 2}, std::move(records));
        const auto m = buildLogicalTensors(set);
        QVERIFY2(m.diagnostics.empty(), qPrintable(allMessages(m.diagnostics)));
        QCOMPARE(m.tensors.size(), std::size_t(2));
        QCOMPARE(m.tensors[1].key.name, QStringLiteral("w"));
        QCOMPARE(m.tensors[1].shards.size(), std::size_t(4));
        QCOMPARE(m.tensors[1].elementCount(), 15);
        QCOMPARE(m.tensors[0].elementCount(), 6);
        QCOMPARE(m.tensors[0].shards.size(), std::size_t(3));  // the empty shard holds nothing
        QCOMPARE(m.tensors[0].ranks(), (std::vector<int>{0, 1, 2}));
        // the tiling check itself takes an empty shard too
        const ShardRanges rows0{{{{0, 3}}, {{0, 2}}}}, none{{{}, {{0, 2}}}};
        QVERIFY(checkTiling({3, 2},
                            {TilingShard{&rows0, {0}, nullptr}, TilingShard{&none, {1}, nullptr}})
                    .empty());
    }

    void unsupportedPlacementsSayWhy() {
        QVERIFY(!Placement::parse(u"Partial(avg)"));
        QVERIFY(Placement::unsupportedReason(u"Partial(avg)").contains(u"does not support"));
        QVERIFY(Placement::unsupportedReason(u"Sharded").contains(u"is not Shard(d)"));
        QVERIFY(!Placement::parse(u"_StridedShard(dim=0, sf=0)"));
    }

    void partialSumsGroupByOtherAxes() {
        // dp x tp = 2 x 2, Partial(sum) over tp, Replicate over dp: two replicas of two summands
        std::vector<TensorRecord> records;
        for (int rank : {3, 1, 2, 0}) {
            records.push_back(makeRecord(
                rank, QStringLiteral("fc2"), TensorKind::ForwardOutput, {4, 8}, {},
                {on("dp", "Replicate"), on("tp", "Partial(sum)")}, {rank / 2, rank % 2}));
        }
        const auto set = makeSet({QStringLiteral("dp"), QStringLiteral("tp")}, {2, 2}, records);
        const auto m = buildLogicalTensors(set);
        QVERIFY2(m.diagnostics.empty(), qPrintable(allMessages(m.diagnostics)));
        QCOMPARE(m.tensors.size(), std::size_t(1));
        const auto& shard = m.tensors[0].shards.at(0);
        QCOMPARE(shard.replicas.size(), std::size_t(2));
        QCOMPARE(shard.replicas[0].ranks(), (std::vector<int>{0, 1}));  // summands by rank
        QCOMPARE(shard.replicas[1].ranks(), (std::vector<int>{2, 3}));
    }

    void incompletePartialIsAnError() {
        std::vector<TensorRecord> records;
        for (int rank : {0, 1, 2}) {
            records.push_back(makeRecord(
                rank, QStringLiteral("fc2"), TensorKind::ForwardOutput, {4, 8}, {},
                {on("dp", "Replicate"), on("tp", "Partial(sum)")}, {rank / 2, rank % 2}));
        }
        const auto set = makeSet({QStringLiteral("dp"), QStringLiteral("tp")}, {2, 2}, records);
        const auto m = buildLogicalTensors(set);
        QVERIFY(m.tensors.empty());
        QCOMPARE(m.diagnostics.size(), std::size_t(1));
        const auto& d = m.diagnostics[0];
        QCOMPARE(d.severity, Severity::Error);
        QCOMPARE(d.tensor, set.records[0].key.toString());
        QVERIFY2(d.message.contains(QStringLiteral("Partial(sum)")) &&
                     d.message.contains(QStringLiteral("incomplete")) &&
                     d.message.contains(QStringLiteral("1 summand on rank 2,")),
                 qPrintable(d.message));
    }

    void dtypeDisagreement() {
        const auto set =
            makeSet({QStringLiteral("tp")}, {2},
                    {makeRecord(0, QStringLiteral("fc1"), TensorKind::ForwardOutput, {4, 16},
                                {{{0, 4}}, {{0, 8}}}, {on("tp", "Shard(1)")}, {0}),
                     makeRecord(1, QStringLiteral("fc1"), TensorKind::ForwardOutput, {4, 16},
                                {{{0, 4}}, {{8, 16}}}, {on("tp", "Shard(1)")}, {1}, DType::BF16)});
        const auto m = buildLogicalTensors(set);
        QVERIFY(m.tensors.empty());
        QCOMPARE(m.diagnostics.size(), std::size_t(1));
        QCOMPARE(m.diagnostics[0].message,
                 QStringLiteral("shards disagree on dtype: fp32 on rank 0, bf16 on rank 1"));
        QCOMPARE(m.diagnostics[0].file, set.records[1].file);
        QCOMPARE(m.diagnostics[0].dataset, set.records[1].dataset);
    }

    void globalShapeDisagreement() {
        const auto set = makeSet({QStringLiteral("tp")}, {2},
                                 {makeRecord(0, QStringLiteral("x"), TensorKind::ForwardOutput,
                                             {4, 16}, {}, {on("tp", "Replicate")}, {0}),
                                  makeRecord(1, QStringLiteral("x"), TensorKind::ForwardOutput,
                                             {4, 8}, {}, {on("tp", "Replicate")}, {1})});
        const auto m = buildLogicalTensors(set);
        QVERIFY(m.tensors.empty());
        QCOMPARE(m.diagnostics.size(), std::size_t(1));
        QCOMPARE(m.diagnostics[0].message,
                 QStringLiteral("shards disagree on global shape: [4, 16] on rank 0, [4, 8] on "
                                "rank 1"));
    }

    // A rank holding one tensor twice (a forward recomputed under activation checkpointing and
    // captured again) is an error naming the rank and both datasets, not a replica: on the
    // distributed side and in a reference alike.
    void tensorTwiceOnOneRankIsAnError() {
        auto first = makeRecord(0, QStringLiteral("fc1"), TensorKind::ForwardOutput, {4, 16},
                                {{{0, 4}}, {{0, 8}}}, {on("tp", "Shard(1)")}, {0});
        first.dataset = QStringLiteral("/tensors/000010");
        auto again = first;
        again.dataset = QStringLiteral("/tensors/000042");
        again.seq = 42;
        const auto other = makeRecord(1, QStringLiteral("fc1"), TensorKind::ForwardOutput, {4, 16},
                                      {{{0, 4}}, {{8, 16}}}, {on("tp", "Shard(1)")}, {1});
        const auto set = makeSet({QStringLiteral("tp")}, {2}, {first, other, again});
        const auto m = buildLogicalTensors(set);
        QVERIFY(m.tensors.empty());
        QVERIFY(m.refused == std::vector<TensorKey>{first.key});
        QCOMPARE(m.diagnostics.size(), std::size_t(1));
        const auto& d = m.diagnostics[0];
        QCOMPARE(d.severity, Severity::Error);
        QCOMPARE(d.file, first.file);
        QCOMPARE(d.dataset, again.dataset);
        QCOMPARE(d.tensor, first.key.toString());
        QCOMPARE(d.message,
                 QStringLiteral("rank 0 holds this tensor twice (datasets /tensors/000010 and "
                                "/tensors/000042): each rank writes a tensor once; was a forward "
                                "recomputed under activation checkpointing captured again?"));

        // A reference: every tensor whole on rank 0, this one three times.
        std::vector<TensorRecord> whole;
        for (int n : {7, 3, 12}) {
            auto r =
                makeRecord(0, QStringLiteral("fc2"), TensorKind::InputGrad, {4, 8}, {}, {}, {});
            r.dataset = QStringLiteral("/tensors/%1").arg(n, 6, 10, QLatin1Char('0'));
            whole.push_back(std::move(r));
        }
        whole.push_back(
            makeRecord(0, QStringLiteral("fc3"), TensorKind::InputGrad, {4}, {}, {}, {}));
        const auto reference = makeSet({}, {}, whole);
        const auto r = buildLogicalTensors(reference);
        QCOMPARE(r.tensors.size(), std::size_t(1));  // fc3, held once
        QVERIFY(r.refused == std::vector<TensorKey>{whole[0].key});
        QCOMPARE(r.diagnostics.size(), std::size_t(1));
        QCOMPARE(r.diagnostics[0].message,
                 QStringLiteral("rank 0 holds this tensor 3 times (datasets /tensors/000007, "
                                "/tensors/000003 and /tensors/000012): each rank writes a tensor "
                                "once; was a forward recomputed under activation checkpointing "
                                "captured again?"));
    }

    void rangesOutsideShapeAndLocalShape() {
        auto outside = makeRecord(0, QStringLiteral("x"), TensorKind::ForwardOutput, {4, 8},
                                  {{{0, 4}}, {{4, 12}}}, {}, {});
        auto wrongLocal =
            makeRecord(0, QStringLiteral("y"), TensorKind::ForwardOutput, {4, 8}, {}, {}, {});
        wrongLocal.localShape = {4, 6};
        const auto set = makeSet({}, {}, {outside, wrongLocal});
        const auto m = buildLogicalTensors(set);
        QVERIFY(m.tensors.empty());
        QCOMPARE(m.diagnostics.size(), std::size_t(2));
        QVERIFY(m.diagnostics[0].message.contains(QStringLiteral("outside the global shape")));
        QVERIFY(m.diagnostics[1].message.contains(QStringLiteral("local shape [4, 6]")));
    }

    void gapAndOverlapNameCoordinateAndRanks() {
        // rank 1 holds rows [6, 14) of 16: rows 6-7 twice, rows 14-15 never
        const auto set = makeSet({QStringLiteral("tp")}, {2},
                                 {makeRecord(0, QStringLiteral("w"), TensorKind::Param, {16, 8},
                                             {{{0, 8}}, {{0, 8}}}, {on("tp", "Shard(0)")}, {0}),
                                  makeRecord(1, QStringLiteral("w"), TensorKind::Param, {16, 8},
                                             {{{6, 14}}, {{0, 8}}}, {on("tp", "Shard(0)")}, {1})});
        const auto m = buildLogicalTensors(set);
        QVERIFY(m.tensors.empty());
        QCOMPARE(m.diagnostics.size(), std::size_t(2));
        const auto& overlap = m.diagnostics[0];
        QVERIFY2(overlap.message.startsWith(QStringLiteral("shards overlap: 16 elements")),
                 qPrintable(overlap.message));
        QVERIFY(overlap.message.contains(QStringLiteral("global [6, 0]")));
        QVERIFY(overlap.message.contains(QStringLiteral("rank 0 (")));
        QVERIFY(overlap.message.contains(QStringLiteral("rank 1 (")));
        QCOMPARE(overlap.file, set.records[1].file);
        const auto& gap = m.diagnostics[1];
        QVERIFY2(gap.message.startsWith(QStringLiteral("shards leave a gap: 16 elements")),
                 qPrintable(gap.message));
        QVERIFY(gap.message.contains(QStringLiteral("global [14, 0]")));
    }

    void overlapInsideOneShard() {
        const auto set = makeSet({}, {},
                                 {makeRecord(0, QStringLiteral("x"), TensorKind::ForwardOutput, {8},
                                             {{{0, 5}, {3, 8}}}, {}, {})});
        const auto m = buildLogicalTensors(set);
        QVERIFY(m.tensors.empty());
        QVERIFY(allMessages(m.diagnostics).contains(QStringLiteral("shards overlap")));
    }

    void tilingFallbackForHugeGrids() {
        ShardRanges a, b, c;
        a.dims = {{{0, 8}}, {{0, 8}}};
        b.dims = {{{8, 16}}, {{0, 8}}};
        c.dims = {{{6, 14}}, {{0, 8}}};
        const Shape shape = {16, 8};
        const auto shards = [](std::vector<const ShardRanges*> ranges) {
            std::vector<TilingShard> result;
            int rank = 0;
            for (const auto* r : ranges) {
                result.push_back(TilingShard{r, {rank++}, nullptr});
            }
            return result;
        };
        // maxCells = 1 forces the volume + pairwise check
        QVERIFY(checkTiling(shape, shards({&a, &b}), 1).empty());
        auto problems = checkTiling(shape, shards({&a, &c}), 1);
        QCOMPARE(problems.size(), std::size_t(1));
        QVERIFY(problems[0].message.contains(QStringLiteral("overlap")));
        QVERIFY2(problems[0].message.contains(QStringLiteral("global [6, 0]")),
                 qPrintable(problems[0].message));
        problems = checkTiling(shape, shards({&a}), 1);
        QCOMPARE(problems.size(), std::size_t(1));
        QVERIFY(problems[0].message.contains(QStringLiteral("gap: 64 elements")));
        // the exact check agrees
        QVERIFY(checkTiling(shape, shards({&a, &b})).empty());
        QCOMPARE(checkTiling(shape, shards({&a})).size(), std::size_t(1));
    }

    void tilingRandomGrids() {
        // Random grid partitions tile exactly; dropping or growing one shard breaks it.
        std::mt19937 rng(42);
        for (int trial = 0; trial < 200; ++trial) {
            const std::size_t nd = 1 + rng() % 3;
            Shape shape;
            std::vector<std::vector<IndexRange>> cuts(nd);
            for (std::size_t d = 0; d < nd; ++d) {
                shape.push_back(1 + static_cast<std::int64_t>(rng() % 12));
                std::int64_t at = 0;
                while (at < shape[d]) {
                    const auto len = 1 + static_cast<std::int64_t>(rng() % 4);
                    cuts[d].push_back({at, std::min(shape[d], at + len)});
                    at += len;
                }
            }
            std::vector<ShardRanges> boxes(1);
            for (std::size_t d = 0; d < nd; ++d) {
                std::vector<ShardRanges> next;
                for (const auto& box : boxes) {
                    for (const auto& cut : cuts[d]) {
                        auto b = box;
                        b.dims.push_back({cut});
                        next.push_back(b);
                    }
                }
                boxes = next;
            }
            std::vector<TilingShard> shards;
            for (const auto& box : boxes) {
                shards.push_back(TilingShard{&box, {0}, nullptr});
            }
            QVERIFY(checkTiling(shape, shards).empty());
            QVERIFY(checkTiling(shape, shards, 1).empty());
            if (shards.size() > 1) {
                auto fewer = shards;
                fewer.erase(fewer.begin() + static_cast<std::ptrdiff_t>(rng() % fewer.size()));
                QCOMPARE(checkTiling(shape, fewer).size(), std::size_t(1));
                QCOMPARE(checkTiling(shape, fewer, 1).size(), std::size_t(1));
                auto twice = shards;
                twice.push_back(shards[rng() % shards.size()]);
                QCOMPARE(checkTiling(shape, twice).size(), std::size_t(1));
                QCOMPARE(checkTiling(shape, twice, 1).size(), std::size_t(1));
            }
        }
    }

    // ---------------------------------------------------------------- block plans

    void planWholeAndRows() {
        const auto whole = ShardRanges::whole({4, 16});
        auto blocks = planBlocks(whole, 1 << 20);
        QCOMPARE(blocks.size(), std::size_t(1));
        QCOMPARE(blocks[0].count, (Shape{4, 16}));
        blocks = planBlocks(whole, 32);  // two rows at a time
        QCOMPARE(blocks.size(), std::size_t(2));
        QCOMPARE(blocks[1].localStart, (Shape{2, 0}));
        QCOMPARE(blocks[1].count, (Shape{2, 16}));
        blocks = planBlocks(whole, 20);  // one row fits, two do not
        QCOMPARE(blocks.size(), std::size_t(4));
        blocks = planBlocks(whole, 7);  // a row is split: 7 + 7 + 2
        QCOMPARE(blocks.size(), std::size_t(12));
        QCOMPARE(blocks[2].localStart, (Shape{0, 14}));
        QCOMPARE(blocks[2].count, (Shape{1, 2}));
        blocks = planBlocks(whole, 0);  // at least one element per block
        QCOMPARE(blocks.size(), std::size_t(64));
    }

    void planMultiRangeDimension() {
        ShardRanges strided;
        strided.dims = {{{4, 8}, {12, 16}, {20, 24}}, {{0, 8}}};
        const auto blocks = planBlocks(strided, 1 << 20);
        QCOMPARE(blocks.size(), std::size_t(3));  // never straddles two ranges
        QCOMPARE(blocks[1].localStart, (Shape{4, 0}));
        QCOMPARE(blocks[1].globalStart, (Shape{12, 0}));
        QCOMPARE(blocks[2].localStart, (Shape{8, 0}));
        QCOMPARE(blocks[2].globalStart, (Shape{20, 0}));
        QCOMPARE(blocks[2].count, (Shape{4, 8}));

        ShardRanges zigzag;
        zigzag.dims = {{{0, 2}}, {{0, 4}, {12, 16}}, {{0, 8}}};
        const auto chunks = planBlocks(zigzag, 16);
        // 2 batch rows x 2 chunks x 2 blocks of 2 x 8 elements
        QCOMPARE(chunks.size(), std::size_t(8));
        QCOMPARE(chunks[1].localStart, (Shape{0, 2, 0}));
        QCOMPARE(chunks[1].globalStart, (Shape{0, 2, 0}));
        QCOMPARE(chunks[2].localStart, (Shape{1, 0, 0}));
        QCOMPARE(chunks[4].localStart, (Shape{0, 4, 0}));
        QCOMPARE(chunks[4].globalStart, (Shape{0, 12, 0}));
        QCOMPARE(chunks[4].count, (Shape{1, 2, 8}));
    }

    void planScalarAndEmpty() {
        auto blocks = planBlocks(ShardRanges{}, 5);
        QCOMPARE(blocks.size(), std::size_t(1));
        QCOMPARE(blocks[0].elementCount(), 1);
        QCOMPARE(blocks[0].count.size(), std::size_t(0));
        QVERIFY(planBlocks(ShardRanges::whole({3, 0}), 5).empty());
    }

    void linearIndexAndCoordinates() {
        QCOMPARE(linearIndex({1, 2, 3}, {2, 3, 4}), 1 * 12 + 2 * 4 + 3);
        QCOMPARE(linearIndex({}, {}), 0);
        Block block;
        block.localStart = {0, 0};
        block.globalStart = {5, 12};
        block.count = {2, 3};
        QCOMPARE(blockElementCoord(block, 0), (Shape{5, 12}));
        QCOMPARE(blockElementCoord(block, 4), (Shape{6, 13}));
    }

    // A shard's pieces inside a box of the global tensor: each piece lies in the box and in one
    // range per dimension with matching local offsets, and together they hold exactly the
    // shard's elements inside the box.
    void shardPiecesInBoxCoverTheIntersection() {
        std::mt19937 rng(11);
        for (int trial = 0; trial < 300; ++trial) {
            const std::size_t nd = 1 + rng() % 3;
            ShardRanges ranges;
            Block box;
            for (std::size_t d = 0; d < nd; ++d) {
                std::vector<IndexRange> dim;
                std::int64_t at = rng() % 3;
                for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n; ++k) {
                    const auto len = 1 + static_cast<std::int64_t>(rng() % 4);
                    dim.push_back({at, at + len});
                    at += len + static_cast<std::int64_t>(rng() % 3);
                }
                ranges.dims.push_back(dim);
                box.globalStart.push_back(static_cast<std::int64_t>(rng() % 6));
                box.count.push_back(1 + static_cast<std::int64_t>(rng() % 8));
            }
            // global coordinate -> local linear index, for every element of the shard
            const auto local = ranges.localShape();
            std::map<std::vector<std::int64_t>, std::int64_t> expected;
            for (std::int64_t e = 0; e < ranges.elementCount(); ++e) {
                std::int64_t rest = e;
                std::vector<std::int64_t> localCoord(nd), globalCoord(nd);
                for (std::size_t d = nd; d-- > 0;) {
                    localCoord[d] = rest % local[d];
                    rest /= local[d];
                    std::int64_t offset = localCoord[d];
                    for (const auto& r : ranges.dims[d]) {
                        if (offset < r.size()) {
                            globalCoord[d] = r.start + offset;
                            break;
                        }
                        offset -= r.size();
                    }
                }
                bool inBox = true;
                for (std::size_t d = 0; d < nd; ++d) {
                    inBox = inBox && globalCoord[d] >= box.globalStart[d] &&
                            globalCoord[d] < box.globalStart[d] + box.count[d];
                }
                if (inBox) {
                    expected[globalCoord] = linearIndex(localCoord, local);
                }
            }
            std::map<std::vector<std::int64_t>, std::int64_t> got;
            for (const auto& piece : shardPiecesInBox(ranges, box)) {
                for (std::int64_t e = 0; e < piece.elementCount(); ++e) {
                    const auto globalCoord = blockElementCoord(piece, e);
                    std::vector<std::int64_t> localCoord(nd);
                    for (std::size_t d = 0; d < nd; ++d) {
                        localCoord[d] = piece.localStart[d] + globalCoord[d] - piece.globalStart[d];
                    }
                    QVERIFY2(got.emplace(globalCoord, linearIndex(localCoord, local)).second,
                             "an element appears in two pieces");
                }
            }
            QCOMPARE(got, expected);
        }
    }

    // The on-demand plan of a whole tensor lists exactly planBlocks' blocks, in order.
    void tensorBlocksMatchThePlan() {
        std::mt19937 rng(3);
        for (int trial = 0; trial < 300; ++trial) {
            std::vector<std::int64_t> shape(rng() % 4);
            for (auto& extent : shape) {
                extent = static_cast<std::int64_t>(rng() % 7);  // 0 makes an empty tensor
            }
            const auto maxElements = 1 + static_cast<std::int64_t>(rng() % 50);
            const auto planned = planBlocks(ShardRanges::whole(shape), maxElements);
            const TensorBlocks blocks(shape, maxElements);
            QCOMPARE(blocks.size(), planned.size());
            for (std::size_t i = 0; i < planned.size(); ++i) {
                const Block block = blocks.at(i);
                QCOMPARE(block.globalStart, planned[i].globalStart);
                QCOMPARE(block.localStart, planned[i].localStart);
                QCOMPARE(block.count, planned[i].count);
            }
        }
    }

    // copyBox against element-by-element indexing, on random shapes and boxes.
    void copyBoxMatchesIndexing() {
        std::mt19937 rng(5);
        for (int trial = 0; trial < 300; ++trial) {
            const Box random = randomBox(rng);
            const auto& [shape, start, count] = random;
            const std::int64_t boxElements = random.elements();
            const auto out = random.packedIndices();
            const Block box{start, start, count};
            for (std::int64_t e = 0; e < boxElements; ++e) {
                QCOMPARE(out[static_cast<std::size_t>(e)],
                         static_cast<std::int32_t>(linearIndex(blockElementCoord(box, e), shape)));
            }
        }
    }

    // pasteBox undoes copyBox: the packed box written back lands on the box's elements and
    // nowhere else.
    void pasteBoxUndoesCopyBox() {
        std::mt19937 rng(7);
        for (int trial = 0; trial < 300; ++trial) {
            const Box random = randomBox(rng);
            const auto packed = random.packedIndices();
            std::vector<std::int32_t> array(
                static_cast<std::size_t>(std::accumulate(random.shape.begin(), random.shape.end(),
                                                         std::int64_t{1}, std::multiplies<>())),
                -1);
            pasteBox(reinterpret_cast<const std::byte*>(packed.data()), random.shape, random.start,
                     random.count, sizeof(std::int32_t),
                     reinterpret_cast<std::byte*>(array.data()));
            std::int64_t written = 0;
            for (std::size_t i = 0; i < array.size(); ++i) {
                if (array[i] >= 0) {
                    QCOMPARE(array[i], static_cast<std::int32_t>(i));  // its own index
                    ++written;
                }
            }
            QCOMPARE(written, random.elements());
        }
    }

    // boxRows against copyBox: where it sees equally spaced runs, reading them gives what
    // copyBox packs; column ranges of matrices are such runs, boxes cut in two outer
    // dimensions are not.
    void boxRowsMatchCopyBox() {
        std::mt19937 rng(6);
        int asRows = 0;
        for (int trial = 0; trial < 300; ++trial) {
            const Box random = randomBox(rng);
            const auto packed = random.packedIndices();
            const auto rows = boxRows(random.shape, random.start, random.count);
            if (!rows) {
                continue;
            }
            ++asRows;
            QCOMPARE(rows->rows * rows->runLength, random.elements());
            std::vector<std::int32_t> read;  // the linear indices the runs cover
            for (std::int64_t k = 0; k < rows->rows; ++k) {
                for (std::int64_t i = 0; i < rows->runLength; ++i) {
                    read.push_back(static_cast<std::int32_t>(rows->offset + k * rows->stride + i));
                }
            }
            QCOMPARE(read, packed);
        }
        QVERIFY(asRows > 150);  // most random boxes are runs

        const std::vector<std::int64_t> matrix{6, 8};
        const std::vector<std::int64_t> columnsStart{0, 2}, columns{6, 4};
        const auto columnRange = boxRows(matrix, columnsStart, columns);
        QVERIFY(columnRange);
        QCOMPARE(columnRange->offset, 2);
        QCOMPARE(columnRange->stride, 8);
        QCOMPARE(columnRange->runLength, 4);
        QCOMPARE(columnRange->rows, 6);
        const std::vector<std::int64_t> cube{4, 4, 4}, cutStart{0, 1, 1}, cut{2, 2, 2};
        QVERIFY(!boxRows(cube, cutStart, cut));
    }

    void planCoversShardExactlyOnce() {
        std::mt19937 rng(7);
        for (int trial = 0; trial < 300; ++trial) {
            const std::size_t nd = 1 + rng() % 4;
            ShardRanges ranges;
            for (std::size_t d = 0; d < nd; ++d) {
                std::vector<IndexRange> dim;
                std::int64_t at = rng() % 3;
                const int n = 1 + static_cast<int>(rng() % 3);
                for (int k = 0; k < n; ++k) {
                    const auto len = 1 + static_cast<std::int64_t>(rng() % 5);
                    dim.push_back({at, at + len});
                    at += len + static_cast<std::int64_t>(rng() % 4);
                }
                if (rng() % 2) {
                    std::reverse(dim.begin(), dim.end());  // local order need not be sorted
                }
                ranges.dims.push_back(dim);
            }
            const auto maxElements = 1 + static_cast<std::int64_t>(rng() % 40);
            const auto local = ranges.localShape();
            std::vector<int> seen(static_cast<std::size_t>(ranges.elementCount()), 0);
            for (const auto& block : planBlocks(ranges, maxElements)) {
                QVERIFY(block.elementCount() >= 1);
                QVERIFY(block.elementCount() <= maxElements);
                // the global box lies inside one range per dimension, matching local offsets
                for (std::size_t d = 0; d < nd; ++d) {
                    std::int64_t offset = 0;
                    bool inside = false;
                    for (const auto& r : ranges.dims[d]) {
                        if (block.globalStart[d] >= r.start &&
                            block.globalStart[d] + block.count[d] <= r.stop) {
                            inside = block.localStart[d] == offset + block.globalStart[d] - r.start;
                        }
                        offset += r.size();
                    }
                    QVERIFY(inside);
                }
                for (std::int64_t e = 0; e < block.elementCount(); ++e) {
                    std::int64_t rest = e, index = 0;
                    Shape coord(nd);
                    for (std::size_t d = nd; d-- > 0;) {
                        coord[d] = block.localStart[d] + rest % block.count[d];
                        rest /= block.count[d];
                    }
                    index = linearIndex(coord, local);
                    ++seen[static_cast<std::size_t>(index)];
                }
            }
            QVERIFY(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
        }
    }

    // ---------------------------------------------------------------- fixtures

    void referencesAreWhole_data() {
        QTest::addColumn<QString>("caseName");
        for (const char* c : {"tp_column", "tp_row", "tp_strided", "sp", "cp_zigzag", "pp_vpp",
                              "dp_microbatch", "ep", "combined"}) {
            QTest::newRow(c) << QString::fromUtf8(c);
        }
    }
    void referencesAreWhole() {
        QFETCH(QString, caseName);
        for (const auto& role : {QStringLiteral("ref"), QStringLiteral("pert")}) {
            const auto m = mapFixture(caseName, role);
            QVERIFY2(m.set->usable(), qPrintable(allMessages(m.set->diagnostics)));
            QVERIFY2(m.mapping.diagnostics.empty(), qPrintable(allMessages(m.mapping.diagnostics)));
            QVERIFY(!m.mapping.tensors.empty());
            for (const auto& t : m.mapping.tensors) {
                QCOMPARE(t.shards.size(), std::size_t(1));
                QCOMPARE(t.shards[0].replicas.size(), std::size_t(1));
                QCOMPARE(t.shards[0].ranges, ShardRanges::whole(t.globalShape));
            }
        }
    }

    void tpColumn() {
        const auto m = mapFixture(QStringLiteral("tp_column"), QStringLiteral("dist"));
        QVERIFY2(m.mapping.diagnostics.empty(), qPrintable(allMessages(m.mapping.diagnostics)));
        QCOMPARE(m.mapping.tensors.size(), std::size_t(6));
        const auto* input = m.find("layers.0.fc1", TensorKind::ForwardInput);
        QVERIFY(input);
        QCOMPARE(input->shards.size(), std::size_t(1));
        QCOMPARE(input->shards[0].replicas.size(), std::size_t(2));
        const auto* weight = m.find("layers.0.fc1.weight", TensorKind::Param);
        QVERIFY(weight);
        QCOMPARE(weight->shards.size(), std::size_t(2));
        QCOMPARE(weight->shards[1].ranges.dims[0], (std::vector<IndexRange>{{8, 16}}));
        QCOMPARE(weight->shards[1].replicas[0].ranks(), std::vector<int>{1});
        const auto* output = m.find("layers.0.fc1", TensorKind::ForwardOutput);
        QVERIFY(output);
        QCOMPARE(output->globalShape, (Shape{4, 16}));
        QCOMPARE(output->shards.size(), std::size_t(2));
        QCOMPARE(output->shards[0].ranges.dims[1], (std::vector<IndexRange>{{0, 8}}));
        QCOMPARE(output->layer, 0);
        QCOMPARE(m.find("layers.0.fc1.weight", TensorKind::ParamGrad)->shards.size(),
                 std::size_t(2));
    }

    void tpRowPartial() {
        const auto m = mapFixture(QStringLiteral("tp_row"), QStringLiteral("dist"));
        QVERIFY2(m.mapping.diagnostics.empty(), qPrintable(allMessages(m.mapping.diagnostics)));
        QCOMPARE(m.mapping.tensors.size(), std::size_t(4));
        const auto* output = m.find("layers.0.fc2", TensorKind::ForwardOutput);
        QVERIFY(output);
        QCOMPARE(output->shards.size(), std::size_t(1));
        QCOMPARE(output->shards[0].replicas.size(), std::size_t(1));
        QCOMPARE(output->shards[0].replicas[0].ranks(), (std::vector<int>{0, 1}));
        QCOMPARE(m.find("layers.0.fc2.weight", TensorKind::Param)->shards.size(), std::size_t(2));
        const auto* bias = m.find("layers.0.fc2.bias", TensorKind::Param);
        QVERIFY(bias);
        QCOMPARE(bias->shards[0].replicas.size(), std::size_t(2));
    }

    void tpStrided() {
        const auto m = mapFixture(QStringLiteral("tp_strided"), QStringLiteral("dist"));
        QVERIFY2(m.mapping.diagnostics.empty(), qPrintable(allMessages(m.mapping.diagnostics)));
        QCOMPARE(m.mapping.tensors.size(), std::size_t(1));
        const auto& t = m.mapping.tensors[0];
        QCOMPARE(t.shards.size(), std::size_t(2));
        QCOMPARE(t.shards[0].ranges.dims[0], (std::vector<IndexRange>{{0, 4}, {8, 12}, {16, 20}}));
        QCOMPARE(t.shards[0].replicas[0].ranks(), std::vector<int>{0});
        QCOMPARE(t.shards[1].ranges.dims[0], (std::vector<IndexRange>{{4, 8}, {12, 16}, {20, 24}}));
    }

    void sequenceParallel() {
        const auto m = mapFixture(QStringLiteral("sp"), QStringLiteral("dist"));
        QVERIFY2(m.mapping.diagnostics.empty(), qPrintable(allMessages(m.mapping.diagnostics)));
        QCOMPARE(m.mapping.tensors.size(), std::size_t(3));
        const auto* norm = m.find("layers.0.norm", TensorKind::ForwardOutput);
        QVERIFY(norm);
        QCOMPARE(norm->shards.size(), std::size_t(2));
        QCOMPARE(norm->shards[1].ranges.dims[0], (std::vector<IndexRange>{{4, 8}}));
        for (const auto kind : {TensorKind::Param, TensorKind::ParamGrad}) {
            const auto* weight = m.find("layers.0.norm.weight", kind);
            QVERIFY(weight);
            QCOMPARE(weight->shards.size(), std::size_t(1));
            QCOMPARE(weight->shards[0].replicas.size(), std::size_t(2));
        }
    }

    void contextParallelZigzag() {
        const auto m = mapFixture(QStringLiteral("cp_zigzag"), QStringLiteral("dist"));
        QVERIFY2(m.mapping.diagnostics.empty(), qPrintable(allMessages(m.mapping.diagnostics)));
        QCOMPARE(m.mapping.tensors.size(), std::size_t(2));
        for (const auto& t : m.mapping.tensors) {
            QCOMPARE(t.shards.size(), std::size_t(2));
            // ordered by ranges: rank 0's [0,4)+[12,16) sorts first
            QCOMPARE(t.shards[0].ranges.dims[1], (std::vector<IndexRange>{{0, 4}, {12, 16}}));
            QCOMPARE(t.shards[0].replicas[0].ranks(), std::vector<int>{0});
            QCOMPARE(t.shards[1].ranges.dims[1], (std::vector<IndexRange>{{4, 8}, {8, 12}}));
        }
    }

    void pipelineVirtualStages() {
        const auto m = mapFixture(QStringLiteral("pp_vpp"), QStringLiteral("dist"));
        QVERIFY2(m.mapping.diagnostics.empty(), qPrintable(allMessages(m.mapping.diagnostics)));
        QCOMPARE(m.mapping.tensors.size(), std::size_t(8));
        for (int layer = 0; layer < 4; ++layer) {
            const auto name = QStringLiteral("layers.%1.mlp").arg(layer).toUtf8();
            for (const auto kind : {TensorKind::ForwardOutput, TensorKind::InputGrad}) {
                const auto* t = m.find(name.constData(), kind);
                QVERIFY(t);
                QCOMPARE(t->layer, layer);
                QCOMPARE(replicaCount(*t), std::size_t(1));
                QCOMPARE(t->ranks(), std::vector<int>{layer % 2});
            }
        }
        // backward runs in reverse layer order on each rank
        QVERIFY(m.find("layers.2.mlp", TensorKind::InputGrad)->seqOnRank(0) <
                m.find("layers.0.mlp", TensorKind::InputGrad)->seqOnRank(0));
        QVERIFY(m.find("layers.2.mlp", TensorKind::ForwardOutput)->seqOnRank(0) <
                m.find("layers.2.mlp", TensorKind::InputGrad)->seqOnRank(0));
    }

    void dataParallelMicroBatches() {
        const auto m = mapFixture(QStringLiteral("dp_microbatch"), QStringLiteral("dist"));
        QVERIFY2(m.mapping.diagnostics.empty(), qPrintable(allMessages(m.mapping.diagnostics)));
        QCOMPARE(m.mapping.tensors.size(), std::size_t(3));
        for (int mb = 0; mb < 2; ++mb) {
            const auto* t = m.find("layers.0.mlp", TensorKind::ForwardOutput, 0, mb);
            QVERIFY(t);
            QCOMPARE(t->shards.size(), std::size_t(2));
            QCOMPARE(t->shards[1].ranges.dims[0], (std::vector<IndexRange>{{2, 4}}));
        }
        const auto* grad = m.find("layers.0.mlp.weight", TensorKind::ParamGrad);
        QVERIFY(grad);
        QCOMPARE(grad->shards.size(), std::size_t(1));
        QCOMPARE(grad->shards[0].replicas.size(), std::size_t(2));
    }

    void expertParallel() {
        const auto m = mapFixture(QStringLiteral("ep"), QStringLiteral("dist"));
        QVERIFY2(m.mapping.diagnostics.empty(), qPrintable(allMessages(m.mapping.diagnostics)));
        QCOMPARE(m.mapping.tensors.size(), std::size_t(9));
        for (int e = 0; e < 4; ++e) {
            const auto name = QStringLiteral("layers.0.mlp.experts.%1.fc1").arg(e).toUtf8();
            const auto* t = m.find(name.constData(), TensorKind::ForwardOutput);
            QVERIFY(t);
            QCOMPARE(t->expert, e);
            QCOMPARE(t->ranks(), std::vector<int>{e / 2});
            QCOMPARE(replicaCount(*t), std::size_t(1));
        }
        const auto* router = m.find("layers.0.mlp.router.weight", TensorKind::Param);
        QVERIFY(router);
        QCOMPARE(router->shards[0].replicas.size(), std::size_t(2));
    }

    void combinedLayout() {
        const auto m = mapFixture(QStringLiteral("combined"), QStringLiteral("dist"));
        QVERIFY2(m.mapping.diagnostics.empty(), qPrintable(allMessages(m.mapping.diagnostics)));
        // per layer and module: 4 activation kinds x 2 iterations x 2 micro-batches + 3
        // parameter kinds x 2 iterations
        QCOMPARE(m.mapping.tensors.size(), std::size_t(2 * 2 * (16 + 6)));
        // fc1 output: dp rows x tp columns on stage 1 = ranks 4..7
        const auto* h = m.find("layers.1.fc1", TensorKind::ForwardOutput, 0, 1);
        QVERIFY(h);
        QCOMPARE(h->shards.size(), std::size_t(4));
        QCOMPARE(h->ranks(), (std::vector<int>{4, 5, 6, 7}));
        // fc2 output (all-reduced): dp rows, replicated over tp
        const auto* y = m.find("layers.0.fc2", TensorKind::ForwardOutput, 1, 0);
        QVERIFY(y);
        QCOMPARE(y->shards.size(), std::size_t(2));
        QCOMPARE(y->shards[0].replicas.size(), std::size_t(2));
        QCOMPARE(y->shards[0].replicas[1].ranks(), std::vector<int>{1});
        // weights: tp rows, replicated over dp
        const auto* w = m.find("layers.0.fc1.weight", TensorKind::ParamGrad, 1);
        QVERIFY(w);
        QCOMPARE(w->shards.size(), std::size_t(2));
        QCOMPARE(w->shards[1].replicas.size(), std::size_t(2));
        QCOMPARE(w->shards[1].replicas[1].ranks(), std::vector<int>{3});
    }

    void badGap() {
        const auto m = mapFixture(QStringLiteral("bad/gap"), {});
        QVERIFY(!m.find("layers.0.fc1", TensorKind::ForwardOutput));
        const auto text = allMessages(m.mapping.diagnostics);
        QVERIFY2(text.contains(QStringLiteral("tensor layers.0.fc1 forward_output[0] it0 mb0")) &&
                     text.contains(QStringLiteral("gap: 4 elements")) &&
                     text.contains(QStringLiteral("global [0, 8]")),
                 qPrintable(text));
        QCOMPARE(m.mapping.tensors.size(), std::size_t(5));  // the others are fine
    }

    void badOverlap() {
        const auto m = mapFixture(QStringLiteral("bad/overlap"), {});
        QVERIFY(!m.find("layers.0.fc1.weight", TensorKind::Param));
        const auto text = allMessages(m.mapping.diagnostics);
        QVERIFY2(text.contains(QStringLiteral("tensor layers.0.fc1.weight param it0")) &&
                     text.contains(QStringLiteral("shards overlap")) &&
                     text.contains(QStringLiteral("global [6, 0]")),
                 qPrintable(text));
        for (const auto& d : m.mapping.diagnostics) {
            QCOMPARE(d.severity, Severity::Error);
            QVERIFY(!d.file.isEmpty());
            QVERIFY(!d.dataset.isEmpty());
        }
    }

    void badDtypeMixed() {
        const auto m = mapFixture(QStringLiteral("bad/dtype_mixed"), {});
        QVERIFY(!m.find("layers.0.fc1", TensorKind::ForwardOutput));
        QCOMPARE(m.mapping.diagnostics.size(), std::size_t(1));
        const auto& d = m.mapping.diagnostics[0];
        QCOMPARE(d.severity, Severity::Error);
        QCOMPARE(d.tensor, QStringLiteral("layers.0.fc1 forward_output[0] it0 mb0"));
        QCOMPARE(d.message,
                 QStringLiteral("shards disagree on dtype: fp32 on rank 0, bf16 on rank 1"));
        QVERIFY(d.file.endsWith(QStringLiteral("rank00001.h5")));
    }
};

QTEST_GUILESS_MAIN(TestMapping)
#include "test_mapping.moc"

// outlineTrustedRun: a trusted run planned from its catalog, one tensor at a time, says what
// assembling the whole set at once says (tensors, refusals, problems, execution order), with
// its index in memory or in the cache; and a check whose three runs all stay in the index
// cache gives the report the same check gives with every record in memory.
#include <QTemporaryDir>
#include <QTest>
#include <numeric>

#include "ComparisonBytes.h"
#include "DiagnosticText.h"
#include "TestPaths.h"
#include "compare/ComparisonJob.h"
#include "compare/TrustedRun.h"
#include "mapping/CanonicalMapping.h"
#include "mapping/ExecutionOrder.h"
#include "store/IndexCache.h"
#include "trace/TraceSet.h"

using namespace ttrace;
using test::comparisonBytes;
using test::diagnosticTexts;

namespace {

enum class CacheUse { None, Filling, Reading };

// An index cache in a folder of its own, and how a catalog is opened with it.
class Cache {
public:
    explicit Cache(CacheUse use) : use_(use) {
        if (use != CacheUse::None) {
            QString error;
            cache_ = IndexCache::open(dir_.filePath(QStringLiteral("index.sqlite")), &error);
            if (!cache_) {
                qFatal("cannot open an index cache: %s", qPrintable(error));
            }
        }
    }

    TraceCatalog open(const QString& folder) const {
        OpenOptions options;
        options.cache = cache_.get();
        if (use_ == CacheUse::Reading) {
            static_cast<void>(TraceCatalog::open(folder, options));  // indexed by an earlier check
        }
        return TraceCatalog::open(folder, options);
    }

private:
    CacheUse use_;
    QTemporaryDir dir_;
    std::unique_ptr<IndexCache> cache_;
};

const std::pair<const char*, CacheUse> kUses[] = {
    {"no cache", CacheUse::None}, {"filling", CacheUse::Filling}, {"reading", CacheUse::Reading}};

}  // namespace

class TestTrustedRun : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void outlineIsTheAssembledSet_data() {
        QTest::addColumn<QString>("folder");
        QTest::addColumn<int>("use");
        QTest::addColumn<bool>("refuses");  // holds a tensor that does not assemble
        QStringList folders;
        for (const char* name : {"tp_strided", "cp_zigzag", "pp_vpp", "dp_microbatch", "ep",
                                 "combined", "bug_replica"}) {
            folders << test::fixture(QString::fromLatin1(name), QStringLiteral("dist"));
        }
        folders << test::fixture(QStringLiteral("combined"), QStringLiteral("ref"));
        // Sets with tensors that do not assemble: refused, with their errors.
        for (const char* name : {"gap", "overlap", "shape_mismatch", "dtype_mixed"}) {
            folders << test::fixture(QStringLiteral("bad/") + QString::fromLatin1(name));
        }
        for (const QString& folder : folders) {
            for (const auto& [name, use] : kUses) {
                QTest::addRow("%s, %s", qPrintable(folder.section(QLatin1Char('/'), -2)), name)
                    << folder << static_cast<int>(use) << folder.contains(QStringLiteral("/bad/"));
            }
        }
    }
    void outlineIsTheAssembledSet() {
        QFETCH(QString, folder);
        QFETCH(int, use);
        QFETCH(bool, refuses);
        const TraceSet set = openTraceSet(folder);
        QVERIFY(set.usable());
        const MappingResult mapping = buildLogicalTensors(set);
        QCOMPARE(!mapping.refused.empty(), refuses);
        std::vector<OrderedTensor> ordered;
        for (const auto& tensor : mapping.tensors) {
            ordered.push_back(orderedTensor(tensor));
        }
        const auto order = executionOrder(ordered);

        const Cache cache(static_cast<CacheUse>(use));
        const TraceCatalog catalog = cache.open(folder);
        const TrustedRun run = outlineTrustedRun(catalog);
        QCOMPARE(run.catalog, &catalog);
        QCOMPARE(diagnosticTexts(run.diagnostics), diagnosticTexts(mapping.diagnostics));
        QCOMPARE(run.refused, mapping.refused);
        QCOMPARE(run.tensors.size(), mapping.tensors.size());
        for (std::size_t i = 0; i < run.tensors.size(); ++i) {
            const TrustedTensor& outlined = run.tensors[i];
            const LogicalTensor& assembled = mapping.tensors[i];
            QCOMPARE(outlined.key, assembled.key);
            QCOMPARE(outlined.globalShape, assembled.globalShape);
            QCOMPARE(outlined.dtype, assembled.dtype);
            QCOMPARE(outlined.layer, assembled.layer);
            QCOMPARE(outlined.storedBytes, assembled.storedBytes());
            QCOMPARE(outlined.order, order[i]);
            QCOMPARE(run.find(assembled.key), &outlined);
        }
        for (const TensorKey& key : run.refused) {
            QVERIFY(!run.find(key));
        }
    }

    // The run itself as its own laid-out reference (a "trusted commit" of the same layout):
    // every record of all three runs read from the cache as the check goes, and the same
    // report as with every record held.
    void checkThroughTheCacheIsTheCheckInMemory_data() {
        QTest::addColumn<QString>("name");
        QTest::addColumn<int>("use");
        for (const char* name : {"combined", "pp_vpp", "cp_zigzag", "bug_shard"}) {
            for (const auto& [label, use] : kUses) {
                QTest::addRow("%s, %s", name, label)
                    << QString::fromLatin1(name) << static_cast<int>(use);
            }
        }
    }
    void checkThroughTheCacheIsTheCheckInMemory() {
        QFETCH(QString, name);
        QFETCH(int, use);
        const QString dist = test::fixture(name, QStringLiteral("dist"));
        const QString pert = test::fixture(name, QStringLiteral("pert"));
        ComparisonOptions options;
        options.threads = 2;
        const TraceSet distSet = openTraceSet(dist);
        const TraceSet pertSet = openTraceSet(pert);
        const ComparisonOutput held = compareTraceSets(distSet, distSet, &pertSet, options);
        QVERIFY(held.complete());
        QVERIFY(!held.results.empty());
        for (const auto& result : held.results) {
            QCOMPARE(result.metrics.relativeError, 0.0);  // the run is its own reference
        }

        const Cache cache(static_cast<CacheUse>(use));
        const TraceCatalog distributed = cache.open(dist);
        const TraceCatalog reference = cache.open(dist);
        const TraceCatalog perturbed = cache.open(pert);
        const ComparisonPlan plan = planComparison(distributed, reference, &perturbed);
        std::vector<std::size_t> all(plan.tasks.size());
        std::iota(all.begin(), all.end(), std::size_t{0});
        TaskOutcomes outcomes = compareTasks(plan, all, options);
        QVERIFY(outcomes.failure.isEmpty() && outcomes.unchecked.empty());
        const ComparisonOutput catalogued =
            assembleComparison(plan, std::move(outcomes.finished), {}, outcomes.backendName);
        QCOMPARE(comparisonBytes(catalogued), comparisonBytes(held));
    }
};

QTEST_GUILESS_MAIN(TestTrustedRun)
#include "test_trusted_run.moc"

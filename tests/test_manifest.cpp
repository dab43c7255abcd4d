// readManifest: the fixtures' manifests and every way a manifest can be wrong, each reported
// as a diagnostic that names manifest.json and the field.
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include "TestPaths.h"
#include "trace/Manifest.h"

using namespace ttrace;

namespace {

QString dump(const Diagnostics& diagnostics) {
    QString text;
    for (const auto& d : diagnostics) {
        text += d.toString() + QLatin1Char('\n');
    }
    return text;
}

// The first error whose text contains every one of `parts`.
const Diagnostic* findError(const Diagnostics& diagnostics, const QStringList& parts) {
    for (const auto& d : diagnostics) {
        if (d.severity != Severity::Error) {
            continue;
        }
        const QString text = d.toString();
        if (std::all_of(parts.begin(), parts.end(),
                        [&text](const QString& p) { return text.contains(p); })) {
            return &d;
        }
    }
    return nullptr;
}

// A valid two-rank tp manifest, to be broken one field at a time.
QJsonObject goodManifest() {
    return QJsonDocument::fromJson(R"({
        "format": "ttrace", "format_version": "1.0", "role": "distributed",
        "capture_tool": {"name": "ttrace-python", "version": "0.1.0"},
        "world_size": 2,
        "parallel": {"tp": 2, "pp": 1, "vpp": 1, "dp": 1, "cp": 1, "ep": 1, "sp": true},
        "mesh": {"axes": ["tp"], "shape": [2]},
        "ranks": [{"rank": 0, "file": "rank00000.h5", "coords": [0]},
                  {"rank": 1, "file": "rank00001.h5", "coords": [1]}],
        "dtype": {"recipe": "bf16", "compute": "bf16", "params": "fp32"},
        "model": {"name": "tiny", "num_layers": 4},
        "capture": {"iterations": [0, 1], "micro_batches": 2}
    })")
        .object();
}

ManifestResult readJson(const QTemporaryDir& dir, const QByteArray& json) {
    QFile file(dir.filePath(QStringLiteral("manifest.json")));
    if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate)) {
        qFatal("cannot write the test manifest");
    }
    file.write(json);
    file.close();
    return readManifest(dir.path());
}

ManifestResult readObject(const QTemporaryDir& dir, const QJsonObject& object) {
    return readJson(dir, QJsonDocument(object).toJson());
}

}  // namespace

class TestManifest : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() {
        QVERIFY2(
            QFileInfo(test::fixture(QStringLiteral("tp_column"), QStringLiteral("dist"))).isDir(),
            "fixtures missing: run make_fixtures.py (CTest fixture 'traces')");
    }

    void distributedFixture() {
        const auto result =
            readManifest(test::fixture(QStringLiteral("tp_column"), QStringLiteral("dist")));
        QVERIFY2(!hasErrors(result.diagnostics), qPrintable(dump(result.diagnostics)));
        QVERIFY(result.manifest);
        const Manifest& m = *result.manifest;
        QVERIFY(m.path.endsWith(QStringLiteral("tp_column/dist/manifest.json")));
        QCOMPARE(m.role, RunRole::Distributed);
        QCOMPARE(m.versionMajor, 1);
        QCOMPARE(m.versionMinor, 0);
        QCOMPARE(m.toolName, QStringLiteral("ttrace-python"));
        QCOMPARE(m.worldSize, 2);
        QCOMPARE(m.parallel.tp, 2);
        QCOMPARE(m.parallel.toString(), QStringLiteral("tp=2 pp=1 vpp=1 dp=1 cp=1 ep=1 sp=off"));
        QCOMPARE(m.meshAxes, std::vector<QString>{QStringLiteral("tp")});
        QCOMPARE(m.meshShape, std::vector<int>{2});
        QCOMPARE(m.ranks.size(), std::size_t{2});
        for (int r = 0; r < 2; ++r) {
            QCOMPARE(m.ranks[static_cast<std::size_t>(r)].rank, r);
            QCOMPARE(m.ranks[static_cast<std::size_t>(r)].file,
                     QStringLiteral("rank%1.h5").arg(r, 5, 10, QLatin1Char('0')));
            QCOMPARE(m.ranks[static_cast<std::size_t>(r)].coords, std::vector<int>{r});
        }
        QVERIFY(!m.perturbation);
    }

    void referenceFixtures() {
        const auto ref =
            readManifest(test::fixture(QStringLiteral("tp_column"), QStringLiteral("ref")));
        QVERIFY2(!hasErrors(ref.diagnostics), qPrintable(dump(ref.diagnostics)));
        QCOMPARE(ref.manifest->role, RunRole::Reference);
        QVERIFY(ref.manifest->meshAxes.empty());
        QCOMPARE(ref.manifest->worldSize, 1);
        QCOMPARE(ref.manifest->ranks.size(), std::size_t{1});
        QVERIFY(ref.manifest->ranks[0].coords.empty());

        const auto pert =
            readManifest(test::fixture(QStringLiteral("tp_column"), QStringLiteral("pert")));
        QVERIFY2(!hasErrors(pert.diagnostics), qPrintable(dump(pert.diagnostics)));
        QCOMPARE(pert.manifest->role, RunRole::PerturbedReference);
        QVERIFY(pert.manifest->perturbation);
        QVERIFY(*pert.manifest->perturbation > 0.0);
    }

    void routingChoicesSummedOverRanks() {
        QTemporaryDir dir;
        QJsonObject m = goodManifest();
        QJsonObject capture = m.value(QStringLiteral("capture")).toObject();
        capture.insert(QStringLiteral("routing_replay"), QJsonDocument::fromJson(R"({
            "reference": "/ref", "ranks": [
                {"rank": 0, "tokens": 30, "differing": 3,
                 "routers": {"layers.1.moe.router": {"tokens": 20, "differing": 2},
                             "layers.0.moe.router": {"tokens": 10, "differing": 1}}},
                {"rank": 1, "tokens": 10, "differing": 4,
                 "routers": {"layers.0.moe.router": {"tokens": 10, "differing": 4}}}]})")
                                                             .object());
        m.insert(QStringLiteral("capture"), capture);
        const auto result = readObject(dir, m);
        QVERIFY2(!hasErrors(result.diagnostics), qPrintable(dump(result.diagnostics)));
        const auto& choices = result.manifest->routingChoices;
        QCOMPARE(choices.size(), std::size_t{2});
        QCOMPARE(choices[0].router, QStringLiteral("layers.0.moe.router"));
        QCOMPARE(choices[0].tokens, qint64{20});
        QCOMPARE(choices[0].differing, qint64{5});
        QCOMPARE(choices[1].router, QStringLiteral("layers.1.moe.router"));
        QCOMPARE(choices[1].differing, qint64{2});
        // a run that did not replay has none
        QVERIFY(readObject(dir, goodManifest()).manifest->routingChoices.empty());
    }

    void malformedRoutingChoicesAreNamed() {
        struct Case {
            QByteArray replay;
            QString field;
            QString problem;
        };
        const QString ranks = QStringLiteral("capture.routing_replay.ranks[0].routers");
        const std::vector<Case> cases = {
            {R"("yes")", QStringLiteral("capture.routing_replay"),
             QStringLiteral("must be an object, not a string")},
            {R"({"ranks": [{"routers": []}]})", ranks,
             QStringLiteral("must be an object, not an array")},
            {R"({"ranks": [{"routers": {"r": {"tokens": 2}}}]})",
             ranks + QStringLiteral(".r.differing"), QStringLiteral("is missing")},
            {R"({"ranks": [{"routers": {"r": {"tokens": 2, "differing": 3}}}]})",
             ranks + QStringLiteral(".r.differing"),
             QStringLiteral("must be at most its tokens (2), not 3")},
            {R"({"ranks": [{"routers": {"r": {"tokens": -1, "differing": 0}}}]})",
             ranks + QStringLiteral(".r.tokens"), QStringLiteral("must be at least 0")},
        };
        for (const auto& c : cases) {
            QTemporaryDir dir;
            QJsonObject m = goodManifest();
            QJsonObject capture = m.value(QStringLiteral("capture")).toObject();
            capture.insert(QStringLiteral("routing_replay"),
                           QJsonDocument::fromJson("[" + c.replay + "]").array().at(0));
            m.insert(QStringLiteral("capture"), capture);
            const auto result = readObject(dir, m);
            const Diagnostic* error =
                findError(result.diagnostics, {QStringLiteral("'%1'").arg(c.field), c.problem});
            QVERIFY2(error, qPrintable(QString::fromUtf8(c.replay) + QStringLiteral(" gave:\n") +
                                       dump(result.diagnostics)));
            QVERIFY(error->file.endsWith(QStringLiteral("manifest.json")));
        }
    }

    // An fp8 recipe rounds the forward's operands to e4m3; dtype.grad_operands names a coarser
    // format for the backward's (torchao's Float8Linear: e5m2), which the gradients' bound
    // takes, but for the backward's operands stored in the forward's format. A format that is not
    // fp8 or fp4 is warned of and ignored.
    void gradientOperandsOfAnFp8Recipe() {
        QTemporaryDir dir;
        QJsonObject json = goodManifest();
        json[QStringLiteral("dtype")] =
            QJsonObject{{QStringLiteral("recipe"), QStringLiteral("fp8")},
                        {QStringLiteral("compute"), QStringLiteral("bf16")},
                        {QStringLiteral("grad_operands"), QStringLiteral("fp8_e5m2")}};
        const auto hybrid = readObject(dir, json);
        QVERIFY2(hybrid.manifest, qPrintable(dump(hybrid.diagnostics)));
        QCOMPARE(hybrid.manifest->operandDtype(TensorKind::ForwardOutput),
                 std::optional(DType::FP8E4M3));
        for (const TensorKind kind :
             {TensorKind::OutputGrad, TensorKind::InputGrad, TensorKind::ParamGrad}) {
            QCOMPARE(hybrid.manifest->operandDtype(kind), std::optional(DType::FP8E5M2));
        }
        QCOMPARE(hybrid.manifest->operandDtype(TensorKind::Param), std::optional(DType::FP8E4M3));
        // The backward GEMMs' weight and input operands, stored in e4m3, come from the
        // forward; its output gradient operand, in e5m2 or not quantized, does not.
        QCOMPARE(hybrid.manifest->operandDtype(TensorKind::OutputGrad, DType::FP8E4M3),
                 std::optional(DType::FP8E4M3));
        for (const DType stored : {DType::FP8E5M2, DType::BF16, DType::F32}) {
            QCOMPARE(hybrid.manifest->operandDtype(TensorKind::OutputGrad, stored),
                     std::optional(DType::FP8E5M2));
            QVERIFY(!hybrid.manifest->madeInForward(TensorKind::OutputGrad, stored));
        }
        QVERIFY(hybrid.manifest->madeInForward(TensorKind::OutputGrad, DType::FP8E4M3));
        QVERIFY(!hybrid.manifest->madeInForward(TensorKind::ForwardInput, DType::FP8E4M3));
        json[QStringLiteral("dtype")] =
            QJsonObject{{QStringLiteral("recipe"), QStringLiteral("fp8")},
                        {QStringLiteral("compute"), QStringLiteral("bf16")},
                        {QStringLiteral("grad_operands"), QStringLiteral("bf16")}};
        const auto wrong = readObject(dir, json);
        QVERIFY(wrong.manifest);
        QVERIFY2(dump(wrong.diagnostics).contains(QStringLiteral("dtype.grad_operands")),
                 qPrintable(dump(wrong.diagnostics)));
        QCOMPARE(wrong.manifest->operandDtype(TensorKind::InputGrad),
                 std::optional(DType::FP8E4M3));
        // Not a quantizing recipe: no operand format at all.
        json[QStringLiteral("dtype")] =
            QJsonObject{{QStringLiteral("recipe"), QStringLiteral("bf16")},
                        {QStringLiteral("compute"), QStringLiteral("bf16")},
                        {QStringLiteral("grad_operands"), QStringLiteral("fp8_e5m2")}};
        QCOMPARE(readObject(dir, json).manifest->operandDtype(TensorKind::InputGrad), std::nullopt);
    }

    void combinedMeshCoordinates() {
        const auto result =
            readManifest(test::fixture(QStringLiteral("combined"), QStringLiteral("dist")));
        QVERIFY2(!hasErrors(result.diagnostics), qPrintable(dump(result.diagnostics)));
        const Manifest& m = *result.manifest;
        QCOMPARE(m.worldSize, 8);
        QCOMPARE(m.meshAxes, (std::vector<QString>{QStringLiteral("pp"), QStringLiteral("dp"),
                                                   QStringLiteral("tp")}));
        QCOMPARE(m.computeDtype, DType::BF16);
        for (const auto& entry : m.ranks) {
            QCOMPARE(entry.coords.size(), std::size_t{3});
            QCOMPARE(entry.coords[0] * 4 + entry.coords[1] * 2 + entry.coords[2], entry.rank);
        }
    }

    void allGoodFixturesRead_data() {
        QTest::addColumn<QString>("folder");
        for (const char* name : {"tp_column", "tp_row", "tp_strided", "sp", "cp_zigzag", "pp_vpp",
                                 "dp_microbatch", "ep", "combined", "bug_shard", "bug_replica"}) {
            for (const char* role : {"dist", "ref", "pert"}) {
                const QString folder =
                    test::fixture(QString::fromLatin1(name), QString::fromLatin1(role));
                QTest::newRow(qPrintable(
                    QStringLiteral("%1/%2").arg(QLatin1String(name), QLatin1String(role))))
                    << folder;
            }
        }
    }
    void allGoodFixturesRead() {
        QFETCH(QString, folder);
        const auto result = readManifest(folder);
        QVERIFY2(result.diagnostics.empty(), qPrintable(dump(result.diagnostics)));
        QVERIFY(result.manifest);
    }

    void newerMajorVersionIsRefused() {
        const auto result = readManifest(test::fixture(QStringLiteral("bad/newer_version")));
        QVERIFY(!result.manifest);
        const auto* d = findError(result.diagnostics,
                                  {QStringLiteral("trace format 2.0 is newer than this ttrace "
                                                  "supports (1.x)")});
        QVERIFY2(d, qPrintable(dump(result.diagnostics)));
        QVERIFY(d->file.endsWith(QStringLiteral("bad/newer_version/manifest.json")));
    }

    void newerMinorVersionIsAccepted() {
        QTemporaryDir dir;
        auto json = goodManifest();
        json[QStringLiteral("format_version")] = QStringLiteral("1.7");
        json[QStringLiteral("future_field")] = QJsonObject{{QStringLiteral("x"), 1}};
        const auto result = readObject(dir, json);
        QVERIFY2(result.diagnostics.empty(), qPrintable(dump(result.diagnostics)));
        QCOMPARE(result.manifest->versionMinor, 7);
        QVERIFY(result.manifest->parallel.sp);
        QCOMPARE(result.manifest->numLayers, 4);
        QCOMPARE(result.manifest->iterations, (std::vector<int>{0, 1}));
        QCOMPARE(result.manifest->microBatches, 2);
    }

    void syntaxErrorNamesFileAndOffset() {
        const auto result = readManifest(test::fixture(QStringLiteral("bad/manifest_syntax")));
        QVERIFY(!result.manifest);
        const auto* d = findError(
            result.diagnostics, {QStringLiteral("manifest.json"), QStringLiteral("not valid JSON"),
                                 QStringLiteral("offset")});
        QVERIFY2(d, qPrintable(dump(result.diagnostics)));
    }

    void missingManifest() {
        const auto result = readManifest(test::fixture(QStringLiteral("bad/no_manifest")));
        QVERIFY(!result.manifest);
        QVERIFY2(findError(result.diagnostics, {QStringLiteral("manifest.json is missing")}),
                 qPrintable(dump(result.diagnostics)));
    }

    void extraRankInManifest() {
        const auto result = readManifest(test::fixture(QStringLiteral("bad/extra_rank")));
        QVERIFY(result.manifest);
        QVERIFY2(
            findError(result.diagnostics, {QStringLiteral("world_size"), QStringLiteral("rank 2")}),
            qPrintable(dump(result.diagnostics)));
        QVERIFY2(findError(result.diagnostics, {QStringLiteral("lists 3 ranks but world_size "
                                                               "is 2")}),
                 qPrintable(dump(result.diagnostics)));
        // The valid ranks are kept so the rest of the set can still be indexed.
        QCOMPARE(result.manifest->ranks.size(), std::size_t{2});
    }

    // A list of 100,000 ranks for a world of 3: a few errors with counts, not one a rank.
    void floodOfRanksIsCounted() {
        QTemporaryDir dir;
        auto json = goodManifest();
        const int world = json[QStringLiteral("world_size")].toInt();
        const QJsonObject first = json[QStringLiteral("ranks")].toArray().at(0).toObject();
        QJsonArray ranks = json[QStringLiteral("ranks")].toArray();
        for (int r = world; r < 100000; ++r) {
            QJsonObject entry = first;
            entry[QStringLiteral("rank")] = r;
            entry[QStringLiteral("file")] = QStringLiteral("rank%1.h5").arg(r);
            ranks.append(entry);
        }
        json[QStringLiteral("ranks")] = ranks;
        const auto result = readObject(dir, json);
        QVERIFY2(result.diagnostics.size() <= 8, qPrintable(dump(result.diagnostics)));
        QVERIFY2(findError(result.diagnostics,
                           {QStringLiteral("lists 100000 ranks but world_size is %1").arg(world)}),
                 qPrintable(dump(result.diagnostics)));
        QVERIFY2(findError(result.diagnostics,
                           {QStringLiteral("%1 more entries name ranks outside 0..%2")
                                .arg(100000 - world - 3)
                                .arg(world - 1)}),
                 qPrintable(dump(result.diagnostics)));
    }

    void brokenFields_data() {
        QTest::addColumn<QByteArray>("json");
        QTest::addColumn<QString>("expected");
        const auto with = [](auto edit) {
            auto json = goodManifest();
            edit(json);
            return QJsonDocument(json).toJson();
        };
        QTest::newRow("not an object") << QByteArray("[1, 2]") << QStringLiteral("JSON object");
        // `model` is free, but nested past what a report's readers take (Python's json gives
        // up near 1000; Qt's parser at 1024 calls it "too deeply nested"); brackets inside
        // strings do not count.
        const auto nested = [with](int depth) -> QByteArray {
            QByteArray json = with([](QJsonObject& j) {
                QJsonObject model = j[QStringLiteral("model")].toObject();
                model[QStringLiteral("note")] = QStringLiteral("[[[{{{\\\"[[[");
                j[QStringLiteral("model")] = model;
            });
            const QByteArray at = "\"model\": {";
            const auto where = json.indexOf(at) + at.size();
            return json.left(where) + "\"deep\": " + QByteArray(depth, '[') +
                   QByteArray(depth, ']') + ", " + json.mid(where);
        };
        QTest::newRow("nested within the limit") << nested(29) << QString();
        QTest::newRow("nested too deep")
            << nested(31)
            << QStringLiteral(
                   "manifest.json nests objects and arrays more than 32 "
                   "deep (at offset");
        QTest::newRow("nested past Qt's limit")
            << nested(2000) << QStringLiteral("a manifest nests at most 32");
        QTest::newRow("format") << with([](QJsonObject& j) {
            j[QStringLiteral("format")] = QStringLiteral("other");
        }) << QStringLiteral("field 'format' is 'other'");
        QTest::newRow("version form") << with([](QJsonObject& j) {
            j[QStringLiteral("format_version")] = QStringLiteral("one");
        }) << QStringLiteral("field 'format_version'");
        QTest::newRow("version type")
            << with([](QJsonObject& j) { j[QStringLiteral("format_version")] = 1; })
            << QStringLiteral("field 'format_version' must be a string, not a number");
        QTest::newRow("role") << with([](QJsonObject& j) {
            j[QStringLiteral("role")] = QStringLiteral("dist");
        }) << QStringLiteral("field 'role' is 'dist'");
        QTest::newRow("world_size type")
            << with([](QJsonObject& j) { j[QStringLiteral("world_size")] = QStringLiteral("2"); })
            << QStringLiteral("field 'world_size' must be an integer, not a string");
        QTest::newRow("world_size fraction")
            << with([](QJsonObject& j) { j[QStringLiteral("world_size")] = 2.5; })
            << QStringLiteral("field 'world_size' must be an integer, not 2.5");
        // Past 2^53 a number is named as written, not "9.22337e+18 is not an integer".
        const QByteArray good = QJsonDocument(goodManifest()).toJson();
        QTest::newRow("NUL byte") << QByteArray(good).insert(10, '\0')
                                  << QStringLiteral("manifest.json holds a NUL byte at offset 10");
        QByteArray invalid = good;
        const qsizetype tool = invalid.indexOf("ttrace-python");
        invalid[tool + 2] = '\xff';
        QTest::newRow("invalid UTF-8")
            << invalid
            << QStringLiteral(
                   "manifest.json is not valid UTF-8: the byte at offset %1 starts "
                   "no valid sequence")
                   .arg(tool + 2);
        QTest::newRow("escaped NUL")
            << QByteArray(good).replace(QByteArray("\"ttrace\""), QByteArray("\"ttr\\u0000ace\""))
            << QStringLiteral("field 'format' holds a NUL character");
        QTest::newRow("world_size 2^63")
            << QJsonDocument(goodManifest())
                   .toJson()
                   .replace(QByteArray("\"world_size\": 2"),
                            QByteArray("\"world_size\": 9223372036854775808"))
            << QStringLiteral(
                   "field 'world_size' must be at most 2147483647, not "
                   "9223372036854775808");
        QTest::newRow("world_size 2^53 + 1")
            << QJsonDocument(goodManifest())
                   .toJson()
                   .replace(QByteArray("\"world_size\": 2"),
                            QByteArray("\"world_size\": 9007199254740993"))
            << QStringLiteral(
                   "field 'world_size' must be at most 2147483647, not "
                   "9007199254740993");
        QTest::newRow("parallel missing key") << with([](QJsonObject& j) {
            auto p = j[QStringLiteral("parallel")].toObject();
            p.remove(QStringLiteral("cp"));
            j[QStringLiteral("parallel")] = p;
        }) << QStringLiteral("field 'parallel.cp' is missing");
        QTest::newRow("parallel zero") << with([](QJsonObject& j) {
            auto p = j[QStringLiteral("parallel")].toObject();
            p[QStringLiteral("tp")] = 0;
            j[QStringLiteral("parallel")] = p;
        }) << QStringLiteral("field 'parallel.tp' must be at least 1");
        QTest::newRow("sp type") << with([](QJsonObject& j) {
            auto p = j[QStringLiteral("parallel")].toObject();
            p[QStringLiteral("sp")] = 1;
            j[QStringLiteral("parallel")] = p;
        }) << QStringLiteral("field 'parallel.sp' must be a boolean");
        QTest::newRow("mesh product") << with([](QJsonObject& j) {
            j[QStringLiteral("mesh")] =
                QJsonObject{{QStringLiteral("axes"), QJsonArray{QStringLiteral("tp")}},
                            {QStringLiteral("shape"), QJsonArray{4}}};
        }) << QStringLiteral("field 'mesh.shape' multiplies to 4 but world_size is 2");
        QTest::newRow("mesh lengths") << with([](QJsonObject& j) {
            j[QStringLiteral("mesh")] = QJsonObject{
                {QStringLiteral("axes"), QJsonArray{QStringLiteral("tp"), QStringLiteral("dp")}},
                {QStringLiteral("shape"), QJsonArray{2}}};
        }) << QStringLiteral("has 2 axes but 1 sizes");
        QTest::newRow("coords length") << with([](QJsonObject& j) {
            auto ranks = j[QStringLiteral("ranks")].toArray();
            auto r = ranks[1].toObject();
            r[QStringLiteral("coords")] = QJsonArray{1, 0};
            ranks[1] = r;
            j[QStringLiteral("ranks")] = ranks;
        }) << QStringLiteral("field 'ranks[1].coords' has 2 coordinates but the mesh has 1 axes");
        QTest::newRow("coords range") << with([](QJsonObject& j) {
            auto ranks = j[QStringLiteral("ranks")].toArray();
            auto r = ranks[1].toObject();
            r[QStringLiteral("coords")] = QJsonArray{2};
            ranks[1] = r;
            j[QStringLiteral("ranks")] = ranks;
        }) << QStringLiteral("coordinate 2 on axis 'tp' is outside 0..1");
        QTest::newRow("coords repeated") << with([](QJsonObject& j) {
            auto ranks = j[QStringLiteral("ranks")].toArray();
            auto r = ranks[1].toObject();
            r[QStringLiteral("coords")] = QJsonArray{0};
            ranks[1] = r;
            j[QStringLiteral("ranks")] = ranks;
        }) << QStringLiteral("same mesh coordinates");
        QTest::newRow("duplicate rank") << with([](QJsonObject& j) {
            auto ranks = j[QStringLiteral("ranks")].toArray();
            auto r = ranks[1].toObject();
            r[QStringLiteral("rank")] = 0;
            ranks[1] = r;
            j[QStringLiteral("ranks")] = ranks;
        }) << QStringLiteral("repeats rank 0");
        QTest::newRow("missing rank") << with([](QJsonObject& j) {
            auto ranks = j[QStringLiteral("ranks")].toArray();
            ranks.removeAt(1);
            j[QStringLiteral("ranks")] = ranks;
        }) << QStringLiteral("does not list 1 of the 2 ranks: 1");
        QTest::newRow("absurd world size")
            << with([](QJsonObject& j) { j[QStringLiteral("world_size")] = 2000000000; })
            << QStringLiteral("more than the 16777216 ranks");
        QTest::newRow("file with slash") << with([](QJsonObject& j) {
            auto ranks = j[QStringLiteral("ranks")].toArray();
            auto r = ranks[1].toObject();
            r[QStringLiteral("file")] = QStringLiteral("sub/rank00001.h5");
            ranks[1] = r;
            j[QStringLiteral("ranks")] = ranks;
        }) << QStringLiteral("'sub/rank00001.h5' must be a file name inside the trace folder");
        QTest::newRow("file with dotdot") << with([](QJsonObject& j) {
            auto ranks = j[QStringLiteral("ranks")].toArray();
            auto r = ranks[1].toObject();
            r[QStringLiteral("file")] = QStringLiteral("..");
            ranks[1] = r;
            j[QStringLiteral("ranks")] = ranks;
        }) << QStringLiteral("field 'ranks[1].file'");
        QTest::newRow("recipe") << with([](QJsonObject& j) {
            j[QStringLiteral("dtype")] =
                QJsonObject{{QStringLiteral("recipe"), QStringLiteral("int8")},
                            {QStringLiteral("compute"), QStringLiteral("bf16")}};
        }) << QStringLiteral("field 'dtype.recipe' is 'int8'");
        QTest::newRow("compute") << with([](QJsonObject& j) {
            j[QStringLiteral("dtype")] =
                QJsonObject{{QStringLiteral("recipe"), QStringLiteral("bf16")},
                            {QStringLiteral("compute"), QStringLiteral("fp64")}};
        }) << QStringLiteral("field 'dtype.compute' is 'fp64'");
        QTest::newRow("capture") << with([](QJsonObject& j) {
            j[QStringLiteral("capture")] = QJsonObject{{QStringLiteral("iterations"), 3},
                                                       {QStringLiteral("micro_batches"), 1}};
        }) << QStringLiteral("field 'capture.iterations' must be an array, not a number");
        QTest::newRow("model missing")
            << with([](QJsonObject& j) { j.remove(QStringLiteral("model")); })
            << QStringLiteral("field 'model' is missing");
        QTest::newRow("perturbation") << with([](QJsonObject& j) {
            j[QStringLiteral("role")] = QStringLiteral("perturbed-reference");
        }) << QStringLiteral("field 'perturbation' is missing");
    }
    void brokenFields() {
        QFETCH(QByteArray, json);
        QFETCH(QString, expected);
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const auto result = readJson(dir, json);
        if (expected.isEmpty()) {  // a row that must read cleanly
            QVERIFY2(result.manifest && result.diagnostics.empty(),
                     qPrintable(dump(result.diagnostics)));
            return;
        }
        const auto* d = findError(result.diagnostics, {expected});
        QVERIFY2(d, qPrintable(QStringLiteral("expected an error containing \"%1\", got:\n%2")
                                   .arg(expected, dump(result.diagnostics))));
        QCOMPARE(d->file, dir.filePath(QStringLiteral("manifest.json")));
    }

    void roleNames() {
        QCOMPARE(runRoleName(RunRole::Distributed), QStringLiteral("distributed"));
        QCOMPARE(runRoleName(RunRole::Reference), QStringLiteral("reference"));
        QCOMPARE(runRoleName(RunRole::PerturbedReference), QStringLiteral("perturbed-reference"));
    }
};

QTEST_GUILESS_MAIN(TestManifest)
#include "test_manifest.moc"

#include "trace/Manifest.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonParseError>
#include <QRegularExpression>
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "trace/JsonWording.h"

namespace ttrace {

QString runRoleName(RunRole role) {
    switch (role) {
        case RunRole::Distributed:
            return QStringLiteral("distributed");
        case RunRole::Reference:
            return QStringLiteral("reference");
        case RunRole::PerturbedReference:
            return QStringLiteral("perturbed-reference");
    }
    return {};
}

QString ParallelConfig::toString() const {
    return QStringLiteral("tp=%1 pp=%2 vpp=%3 dp=%4 cp=%5 ep=%6 sp=%7")
        .arg(tp)
        .arg(pp)
        .arg(vpp)
        .arg(dp)
        .arg(cp)
        .arg(ep)
        .arg(sp ? QStringLiteral("on") : QStringLiteral("off"));
}

namespace {

// Offset of the first byte of `bytes` that is not valid UTF-8, or -1. Qt says whether; where
// is the first byte its decoding does not give back as it was.
qsizetype firstInvalidUtf8(const QByteArray& bytes) {
    if (bytes.isValidUtf8()) {
        return -1;
    }
    const QByteArray again = QString::fromUtf8(bytes).toUtf8();
    qsizetype i = 0;
    while (i < bytes.size() && i < again.size() && bytes[i] == again[i]) {
        ++i;
    }
    return i;
}

// Where the JSON text `bytes` first nests objects and arrays deeper than `limit`, or -1. Read
// before parsing: Qt's parser stops at a depth of its own with "too deeply nested", which
// would say nothing of the limit.
qsizetype firstTooDeep(const QByteArray& bytes, int limit) {
    int depth = 0;
    bool inString = false;
    for (qsizetype i = 0; i < bytes.size(); ++i) {
        const char c = bytes[i];
        if (inString) {
            if (c == '\\') {
                ++i;  // the escaped character, a quote included
            } else if (c == '"') {
                inString = false;
            }
        } else if (c == '"') {
            inString = true;
        } else if (c == '{' || c == '[') {
            if (++depth > limit) {
                return i;
            }
        } else if (c == '}' || c == ']') {
            --depth;
        }
    }
    return -1;
}

// Collects the problems of one manifest, each naming the file and the field.
class Checker {
public:
    explicit Checker(QString path) : path_(std::move(path)) {}

    void error(const QString& field, const QString& message) {
        add(Severity::Error, field, message);
    }
    void warning(const QString& field, const QString& message) {
        add(Severity::Warning, field, message);
    }
    Diagnostics take() { return std::move(diagnostics_); }
    std::size_t count() const { return diagnostics_.size(); }
    bool hasErrorsSince(std::size_t first) const {
        return std::any_of(diagnostics_.begin() + static_cast<std::ptrdiff_t>(first),
                           diagnostics_.end(),
                           [](const Diagnostic& d) { return d.severity == Severity::Error; });
    }

    // A required member of `object`; reports it when absent.
    std::optional<QJsonValue> member(const QJsonObject& object, const QString& field,
                                     const QString& key) {
        const auto it = object.constFind(key);
        if (it == object.constEnd()) {
            error(field, QStringLiteral("is missing"));
            return std::nullopt;
        }
        return *it;
    }

    std::optional<QString> string(const QJsonObject& object, const QString& field,
                                  const QString& key) {
        const auto value = member(object, field, key);
        if (!value) {
            return std::nullopt;
        }
        if (!value->isString()) {
            error(field, QStringLiteral("must be a string, not %1").arg(jsonTypeName(*value)));
            return std::nullopt;
        }
        if (value->toString().contains(QChar(0))) {
            error(field, QStringLiteral("holds a NUL character (\\u0000)"));
            return std::nullopt;
        }
        return value->toString();
    }

    std::optional<QJsonObject> object(const QJsonObject& parent, const QString& field,
                                      const QString& key) {
        const auto value = member(parent, field, key);
        if (!value) {
            return std::nullopt;
        }
        if (!value->isObject()) {
            error(field, QStringLiteral("must be an object, not %1").arg(jsonTypeName(*value)));
            return std::nullopt;
        }
        return value->toObject();
    }

    std::optional<QJsonArray> array(const QJsonObject& parent, const QString& field,
                                    const QString& key) {
        const auto value = member(parent, field, key);
        if (!value) {
            return std::nullopt;
        }
        if (!value->isArray()) {
            error(field, QStringLiteral("must be an array, not %1").arg(jsonTypeName(*value)));
            return std::nullopt;
        }
        return value->toArray();
    }

    // An integer in [minimum, INT_MAX]. A fraction is not an integer; a number out of range
    // is named as the file writes it, exactly (2^63 is not "9.22337e+18").
    std::optional<int> integer(const QJsonValue& value, const QString& field, int minimum) {
        if (!value.isDouble()) {
            error(field, QStringLiteral("must be an integer, not %1").arg(jsonTypeName(value)));
            return std::nullopt;
        }
        const double number = value.toDouble();
        if (std::floor(number) != number) {
            error(field, QStringLiteral("must be an integer, not %1").arg(jsonNumberText(value)));
            return std::nullopt;
        }
        if (number < minimum) {
            error(field, QStringLiteral("must be at least %1, not %2")
                             .arg(minimum)
                             .arg(jsonNumberText(value)));
            return std::nullopt;
        }
        if (number > std::numeric_limits<int>::max()) {
            error(field, QStringLiteral("must be at most %1, not %2")
                             .arg(std::numeric_limits<int>::max())
                             .arg(jsonNumberText(value)));
            return std::nullopt;
        }
        return static_cast<int>(number);
    }

    std::optional<int> integer(const QJsonObject& parent, const QString& field, const QString& key,
                               int minimum) {
        const auto value = member(parent, field, key);
        return value ? integer(*value, field, minimum) : std::nullopt;
    }

    std::optional<std::vector<int>> integers(const QJsonObject& parent, const QString& field,
                                             const QString& key, int minimum) {
        const auto values = array(parent, field, key);
        if (!values) {
            return std::nullopt;
        }
        std::vector<int> out;
        bool ok = true;
        for (qsizetype i = 0; i < values->size(); ++i) {
            const auto item =
                integer(values->at(i),
                        field + QLatin1Char('[') + QString::number(i) + QLatin1Char(']'), minimum);
            ok = ok && item.has_value();
            out.push_back(item.value_or(0));
        }
        return ok ? std::optional(out) : std::nullopt;
    }

private:
    void add(Severity severity, const QString& field, const QString& message) {
        Diagnostic d;
        d.severity = severity;
        d.file = path_;
        d.message = field.isEmpty() ? message : QStringLiteral("field '%1' %2").arg(field, message);
        diagnostics_.push_back(std::move(d));
    }

    QString path_;
    Diagnostics diagnostics_;
};

std::optional<RunRole> roleFromName(const QString& name) {
    if (name == u"distributed") {
        return RunRole::Distributed;
    }
    if (name == u"reference") {
        return RunRole::Reference;
    }
    if (name == u"perturbed-reference") {
        return RunRole::PerturbedReference;
    }
    return std::nullopt;
}

void readParallel(Checker& check, const QJsonObject& root, Manifest& manifest) {
    const auto parallel =
        check.object(root, QStringLiteral("parallel"), QStringLiteral("parallel"));
    if (!parallel) {
        return;
    }
    const std::pair<const char*, int*> sizes[] = {
        {"tp", &manifest.parallel.tp},   {"pp", &manifest.parallel.pp},
        {"vpp", &manifest.parallel.vpp}, {"dp", &manifest.parallel.dp},
        {"cp", &manifest.parallel.cp},   {"ep", &manifest.parallel.ep},
    };
    for (const auto& [key, target] : sizes) {
        const QString name = QString::fromLatin1(key);
        if (const auto size =
                check.integer(*parallel, QStringLiteral("parallel.") + name, name, 1)) {
            *target = *size;
        }
    }
    if (const auto sp =
            check.member(*parallel, QStringLiteral("parallel.sp"), QStringLiteral("sp"))) {
        if (sp->isBool()) {
            manifest.parallel.sp = sp->toBool();
        } else {
            check.error(QStringLiteral("parallel.sp"),
                        QStringLiteral("must be a boolean, not %1").arg(jsonTypeName(*sp)));
        }
    }
}

void readMesh(Checker& check, const QJsonObject& root, Manifest& manifest) {
    const auto mesh = check.object(root, QStringLiteral("mesh"), QStringLiteral("mesh"));
    if (!mesh) {
        return;
    }
    if (const auto axes = check.array(*mesh, QStringLiteral("mesh.axes"), QStringLiteral("axes"))) {
        std::set<QString> seen;
        for (qsizetype i = 0; i < axes->size(); ++i) {
            const QString field = QStringLiteral("mesh.axes[%1]").arg(i);
            const auto axis = axes->at(i);
            if (!axis.isString() || axis.toString().isEmpty() ||
                axis.toString().contains(QChar(0))) {
                check.error(field, QStringLiteral("must be a non-empty string"));
                continue;
            }
            if (!seen.insert(axis.toString()).second) {
                check.error(field, QStringLiteral("repeats the axis '%1'").arg(axis.toString()));
                continue;
            }
            manifest.meshAxes.push_back(axis.toString());
        }
    }
    if (const auto shape =
            check.integers(*mesh, QStringLiteral("mesh.shape"), QStringLiteral("shape"), 1)) {
        manifest.meshShape = *shape;
    }
    if (manifest.meshAxes.size() != manifest.meshShape.size()) {
        check.error(QStringLiteral("mesh"), QStringLiteral("has %1 axes but %2 sizes in 'shape'")
                                                .arg(manifest.meshAxes.size())
                                                .arg(manifest.meshShape.size()));
        return;
    }
    long long product = 1;
    for (const int size : manifest.meshShape) {
        // Saturate instead of overflowing; anything past the world-size limit is wrong anyway.
        product = std::min<long long>(product * size, Manifest::kMaxWorldSize + 1LL);
    }
    if (product != manifest.worldSize) {
        check.error(QStringLiteral("mesh.shape"),
                    QStringLiteral("multiplies to %1 but world_size is %2")
                        .arg(product)
                        .arg(manifest.worldSize));
    }
}

bool isPlainFileName(const QString& file) {
    return !file.isEmpty() && !file.contains(QLatin1Char('/')) &&
           !file.contains(QLatin1Char('\\')) && file != u"." && file != u"..";
}

void readRanks(Checker& check, const QJsonObject& root, Manifest& manifest, bool meshValid) {
    const auto ranks = check.array(root, QStringLiteral("ranks"), QStringLiteral("ranks"));
    if (!ranks) {
        return;
    }
    if (ranks->size() != manifest.worldSize) {
        check.error(QStringLiteral("ranks"), QStringLiteral("lists %1 ranks but world_size is %2")
                                                 .arg(ranks->size())
                                                 .arg(manifest.worldSize));
    }
    std::set<int> seenRanks;
    std::set<QString> seenFiles;
    std::set<std::vector<int>> seenCoords;
    // A list of 100,000 ranks for a world of 3 is one problem, not 99,997 lines.
    constexpr qsizetype kOutsideNamed = 3;
    qsizetype outside = 0;  // entries whose rank is outside the world
    for (qsizetype i = 0; i < ranks->size(); ++i) {
        const QString field = QStringLiteral("ranks[%1]").arg(i);
        if (!ranks->at(i).isObject()) {
            check.error(field, QStringLiteral("must be an object"));
            continue;
        }
        const auto entry = ranks->at(i).toObject();
        RankEntry rank;
        bool ok = true;
        if (const auto number =
                check.integer(entry, field + QStringLiteral(".rank"), QStringLiteral("rank"), 0)) {
            rank.rank = *number;
            if (rank.rank >= manifest.worldSize) {
                if (++outside <= kOutsideNamed) {
                    check.error(field + QStringLiteral(".rank"),
                                QStringLiteral("is rank %1, outside 0..%2 (world_size %3)")
                                    .arg(rank.rank)
                                    .arg(manifest.worldSize - 1)
                                    .arg(manifest.worldSize));
                }
                ok = false;
            } else if (!seenRanks.insert(rank.rank).second) {
                check.error(field + QStringLiteral(".rank"),
                            QStringLiteral("repeats rank %1").arg(rank.rank));
                ok = false;
            }
        } else {
            ok = false;
        }
        if (const auto file =
                check.string(entry, field + QStringLiteral(".file"), QStringLiteral("file"))) {
            rank.file = *file;
            if (!isPlainFileName(rank.file) || rank.file.contains(QStringLiteral(".."))) {
                check.error(field + QStringLiteral(".file"),
                            QStringLiteral("'%1' must be a file name inside the trace folder "
                                           "(no '/' or '..')")
                                .arg(rank.file));
                ok = false;
            } else if (!seenFiles.insert(rank.file).second) {
                check.error(field + QStringLiteral(".file"),
                            QStringLiteral("'%1' is listed for two ranks").arg(rank.file));
                ok = false;
            }
        } else {
            ok = false;
        }
        const QString coordsField = field + QStringLiteral(".coords");
        if (const auto coords = check.integers(entry, coordsField, QStringLiteral("coords"), 0)) {
            rank.coords = *coords;
            if (meshValid) {
                if (rank.coords.size() != manifest.meshAxes.size()) {
                    check.error(coordsField, QStringLiteral("has %1 coordinates but the mesh has "
                                                            "%2 axes")
                                                 .arg(rank.coords.size())
                                                 .arg(manifest.meshAxes.size()));
                    ok = false;
                } else {
                    for (std::size_t a = 0; a < rank.coords.size(); ++a) {
                        if (rank.coords[a] >= manifest.meshShape[a]) {
                            check.error(coordsField,
                                        QStringLiteral("coordinate %1 on axis '%2' is outside "
                                                       "0..%3")
                                            .arg(rank.coords[a])
                                            .arg(manifest.meshAxes[a])
                                            .arg(manifest.meshShape[a] - 1));
                            ok = false;
                        }
                    }
                    if (ok && !seenCoords.insert(rank.coords).second) {
                        check.error(coordsField,
                                    QStringLiteral("rank %1 has the same mesh coordinates as "
                                                   "another rank")
                                        .arg(rank.rank));
                        ok = false;
                    }
                }
            }
        } else {
            ok = false;
        }
        if (ok) {
            manifest.ranks.push_back(std::move(rank));
        }
    }
    if (outside > kOutsideNamed) {
        check.error(QStringLiteral("ranks"),
                    QStringLiteral("%1 more entries name ranks outside 0..%2 (world_size %3)")
                        .arg(outside - kOutsideNamed)
                        .arg(manifest.worldSize - 1)
                        .arg(manifest.worldSize));
    }
    // One diagnostic for all missing ranks, naming the first few: a manifest missing most of
    // thousands of ranks should read as one problem.
    QStringList missing;
    int missingCount = 0;
    for (int r = 0; r < manifest.worldSize; ++r) {
        if (!seenRanks.contains(r)) {
            if (++missingCount <= 10) {
                missing << QString::number(r);
            }
        }
    }
    if (missingCount > 0) {
        check.error(QStringLiteral("ranks"),
                    QStringLiteral("does not list %1 of the %2 ranks: %3%4")
                        .arg(missingCount)
                        .arg(manifest.worldSize)
                        .arg(missing.join(QStringLiteral(", ")),
                             missingCount > 10 ? QStringLiteral(", ...") : QString()));
    }
    std::sort(manifest.ranks.begin(), manifest.ranks.end(),
              [](const RankEntry& a, const RankEntry& b) { return a.rank < b.rank; });
}

void readDtype(Checker& check, const QJsonObject& root, Manifest& manifest) {
    const auto dtype = check.object(root, QStringLiteral("dtype"), QStringLiteral("dtype"));
    if (!dtype) {
        return;
    }
    if (const auto recipe =
            check.string(*dtype, QStringLiteral("dtype.recipe"), QStringLiteral("recipe"))) {
        static const QStringList recipes = {QStringLiteral("fp32"), QStringLiteral("bf16"),
                                            QStringLiteral("fp16"), QStringLiteral("fp8"),
                                            QStringLiteral("fp4")};
        if (recipes.contains(*recipe)) {
            manifest.recipe = *recipe;
        } else {
            check.error(
                QStringLiteral("dtype.recipe"),
                QStringLiteral("is '%1', not one of fp32, bf16, fp16, fp8, fp4").arg(*recipe));
        }
    }
    if (const auto compute =
            check.string(*dtype, QStringLiteral("dtype.compute"), QStringLiteral("compute"))) {
        // "fp8" as a compute dtype means an fp8 recipe: its epsilon is bf16's.
        const auto parsed =
            *compute == u"fp8" ? std::optional(DType::FP8E4M3) : dtypeFromName(*compute);
        if (parsed) {
            manifest.computeDtype = *parsed;
        } else {
            check.error(QStringLiteral("dtype.compute"),
                        QStringLiteral("is '%1', not a known dtype").arg(*compute));
        }
    }
    if (const QJsonValue value = dtype->value(QStringLiteral("grad_operands"));
        !value.isUndefined()) {
        const auto parsed = value.isString() ? dtypeFromName(value.toString()) : std::nullopt;
        if (parsed && isScaled(*parsed)) {
            manifest.gradientOperands = parsed;
        } else {
            check.warning(QStringLiteral("dtype.grad_operands"),
                          QStringLiteral("is not fp8_e4m3, fp8_e5m2 or fp4_e2m1: the "
                                         "gradients' bound takes the forward operands' format"));
        }
    }
    for (const auto* optionalKey : {"params", "grads"}) {
        const QString key = QString::fromLatin1(optionalKey);
        const auto value = dtype->value(key);
        if (!value.isUndefined() && !(value.isString() && dtypeFromName(value.toString()))) {
            check.warning(QStringLiteral("dtype.") + key,
                          QStringLiteral("is not a known dtype name"));
        }
    }
}

// capture.routing_replay's per-router counts, summed over the ranks. Optional: a run that did
// not replay has no routing_replay, a capture before per-router counts no `routers`.
void readRoutingChoices(Checker& check, const QJsonObject& capture, Manifest& manifest) {
    const QJsonValue replay = capture.value(QStringLiteral("routing_replay"));
    if (replay.isUndefined()) {
        return;
    }
    const QString field = QStringLiteral("capture.routing_replay");
    if (!replay.isObject()) {
        check.error(field, QStringLiteral("must be an object, not %1").arg(jsonTypeName(replay)));
        return;
    }
    const auto ranks =
        check.array(replay.toObject(), field + QStringLiteral(".ranks"), QStringLiteral("ranks"));
    if (!ranks) {
        return;
    }
    for (qsizetype i = 0; i < ranks->size(); ++i) {
        const QString rankField = field + QStringLiteral(".ranks[%1]").arg(i);
        if (!ranks->at(i).isObject()) {
            check.error(
                rankField,
                QStringLiteral("must be an object, not %1").arg(jsonTypeName(ranks->at(i))));
            continue;
        }
        const QJsonValue routers = ranks->at(i).toObject().value(QStringLiteral("routers"));
        if (routers.isUndefined()) {
            continue;
        }
        if (!routers.isObject()) {
            check.error(rankField + QStringLiteral(".routers"),
                        QStringLiteral("must be an object, not %1").arg(jsonTypeName(routers)));
            continue;
        }
        const QJsonObject byName = routers.toObject();
        for (auto it = byName.constBegin(); it != byName.constEnd(); ++it) {
            const QString routerField = rankField + QStringLiteral(".routers.") + it.key();
            if (!it->isObject()) {
                check.error(routerField,
                            QStringLiteral("must be an object, not %1").arg(jsonTypeName(*it)));
                continue;
            }
            const QJsonObject counts = it->toObject();
            const auto tokens = check.integer(counts, routerField + QStringLiteral(".tokens"),
                                              QStringLiteral("tokens"), 0);
            const auto differing = check.integer(counts, routerField + QStringLiteral(".differing"),
                                                 QStringLiteral("differing"), 0);
            if (!tokens || !differing) {
                continue;
            }
            if (*differing > *tokens) {
                check.error(routerField + QStringLiteral(".differing"),
                            QStringLiteral("must be at most its tokens (%1), not %2")
                                .arg(*tokens)
                                .arg(*differing));
                continue;
            }
            auto entry = std::find_if(
                manifest.routingChoices.begin(), manifest.routingChoices.end(),
                [&](const RoutingChoices& choices) { return choices.router == it.key(); });
            if (entry == manifest.routingChoices.end()) {
                entry = manifest.routingChoices.insert(entry, RoutingChoices{it.key()});
            }
            entry->tokens += *tokens;
            entry->differing += *differing;
        }
    }
}

void readModelAndCapture(Checker& check, const QJsonObject& root, Manifest& manifest) {
    if (const auto model = check.object(root, QStringLiteral("model"), QStringLiteral("model"))) {
        manifest.model = *model;
        const auto layers = model->value(QStringLiteral("num_layers"));
        if (layers.isUndefined()) {
            check.warning(QStringLiteral("model.num_layers"),
                          QStringLiteral("is missing; the theoretical threshold assumes 1 layer"));
        } else if (const auto n = check.integer(layers, QStringLiteral("model.num_layers"), 1)) {
            manifest.numLayers = *n;
        }
    }
    if (const auto capture =
            check.object(root, QStringLiteral("capture"), QStringLiteral("capture"))) {
        if (const auto iterations = check.integers(*capture, QStringLiteral("capture.iterations"),
                                                   QStringLiteral("iterations"), 0)) {
            manifest.iterations = *iterations;
        }
        if (const auto microBatches =
                check.integer(*capture, QStringLiteral("capture.micro_batches"),
                              QStringLiteral("micro_batches"), 1)) {
            manifest.microBatches = *microBatches;
        }
        readRoutingChoices(check, *capture, manifest);
    }
}

void readPerturbation(Checker& check, const QJsonObject& root, Manifest& manifest) {
    if (manifest.role != RunRole::PerturbedReference) {
        return;
    }
    const auto perturbation =
        check.object(root, QStringLiteral("perturbation"), QStringLiteral("perturbation"));
    if (!perturbation) {
        return;
    }
    const auto relative = check.member(*perturbation, QStringLiteral("perturbation.relative"),
                                       QStringLiteral("relative"));
    if (!relative) {
        return;
    }
    if (!relative->isDouble() || !std::isfinite(relative->toDouble()) ||
        relative->toDouble() <= 0.0) {
        check.error(QStringLiteral("perturbation.relative"),
                    QStringLiteral("must be a positive number"));
        return;
    }
    manifest.perturbation = relative->toDouble();
}

}  // namespace

namespace {

std::optional<DType> forwardOperandDtype(const Manifest& manifest) {
    if (manifest.recipe == u"fp8") {
        return DType::FP8E4M3;
    }
    if (manifest.recipe == u"fp4") {
        return DType::FP4E2M1;
    }
    return std::nullopt;
}

// Whether `kind` is a gradient whose recipe rounds its GEMM operands coarser than the
// forward's (dtype.grad_operands).
bool coarserGradientOperands(const Manifest& manifest, TensorKind kind) {
    const auto forward = forwardOperandDtype(manifest);
    const bool gradient = kind == TensorKind::OutputGrad || kind == TensorKind::InputGrad ||
                          kind == TensorKind::ParamGrad || kind == TensorKind::MainGrad;
    return forward && gradient && manifest.gradientOperands &&
           elementEpsilon(*manifest.gradientOperands) > elementEpsilon(*forward);
}

}  // namespace

bool Manifest::madeInForward(TensorKind kind, DType stored) const {
    return coarserGradientOperands(*this, kind) && isScaled(stored) &&
           elementEpsilon(stored) <= elementEpsilon(*forwardOperandDtype(*this));
}

std::optional<DType> Manifest::operandDtype(TensorKind kind, std::optional<DType> stored) const {
    if (!coarserGradientOperands(*this, kind) || (stored && madeInForward(kind, *stored))) {
        return forwardOperandDtype(*this);
    }
    return gradientOperands;
}

std::optional<std::pair<int, int>> parseFormatVersion(const QString& text) {
    static const QRegularExpression pattern(QStringLiteral("^(\\d+)\\.(\\d+)$"));
    const auto match = pattern.match(text);
    if (!match.hasMatch()) {
        return std::nullopt;
    }
    bool majorOk = false;
    bool minorOk = false;
    const int major = match.captured(1).toInt(&majorOk);
    const int minor = match.captured(2).toInt(&minorOk);
    if (!majorOk || !minorOk) {
        return std::nullopt;
    }
    return std::pair{major, minor};
}

ManifestResult readManifest(const QString& folder) {
    ManifestResult result;
    const QString path = QDir(folder).absoluteFilePath(QStringLiteral("manifest.json"));
    Checker check(path);

    QFile file(path);
    if (!QFileInfo::exists(path)) {
        check.error({}, QStringLiteral("manifest.json is missing: %1 is not a trace folder")
                            .arg(QDir(folder).absolutePath()));
        result.diagnostics = check.take();
        return result;
    }
    if (!file.open(QIODevice::ReadOnly)) {
        check.error({}, QStringLiteral("cannot read manifest.json: %1").arg(file.errorString()));
        result.diagnostics = check.take();
        return result;
    }
    const QByteArray bytes = file.readAll();
    // JSON readers differ on both (Qt's keeps a U+FFFD and reads on): refused, with where.
    if (const auto nul = bytes.indexOf('\0'); nul >= 0) {
        check.error({}, QStringLiteral("manifest.json holds a NUL byte at offset %1").arg(nul));
        result.diagnostics = check.take();
        return result;
    }
    if (const auto bad = firstInvalidUtf8(bytes); bad >= 0) {
        check.error({}, QStringLiteral("manifest.json is not valid UTF-8: the byte at offset %1 "
                                       "starts no valid sequence")
                            .arg(bad));
        result.diagnostics = check.take();
        return result;
    }
    if (const auto deep = firstTooDeep(bytes, Manifest::kMaxNesting); deep >= 0) {
        check.error({}, QStringLiteral("manifest.json nests objects and arrays more than %1 deep "
                                       "(at offset %2); a manifest nests at most %1")
                            .arg(Manifest::kMaxNesting)
                            .arg(deep));
        result.diagnostics = check.take();
        return result;
    }
    QJsonParseError parseError;
    const auto document = QJsonDocument::fromJson(bytes, &parseError);
    if (parseError.error != QJsonParseError::NoError) {
        check.error({}, QStringLiteral("manifest.json is not valid JSON: %1 at offset %2")
                            .arg(parseError.errorString())
                            .arg(parseError.offset));
        result.diagnostics = check.take();
        return result;
    }
    if (!document.isObject()) {
        check.error({}, QStringLiteral("manifest.json must hold a JSON object"));
        result.diagnostics = check.take();
        return result;
    }
    const auto root = document.object();

    Manifest manifest;
    manifest.path = path;
    if (const auto format = check.string(root, QStringLiteral("format"), QStringLiteral("format"));
        format && *format != u"ttrace") {
        check.error(QStringLiteral("format"), QStringLiteral("is '%1', not 'ttrace'").arg(*format));
    }
    const auto versionText =
        check.string(root, QStringLiteral("format_version"), QStringLiteral("format_version"));
    if (versionText) {
        const auto version = parseFormatVersion(*versionText);
        if (!version) {
            check.error(QStringLiteral("format_version"),
                        QStringLiteral("is '%1', not of the form MAJOR.MINOR").arg(*versionText));
        } else if (version->first != Manifest::kSupportedMajor) {
            const bool newer = version->first > Manifest::kSupportedMajor;
            check.error({}, QStringLiteral("trace format %1 is %2 than this ttrace supports (%3.x)")
                                .arg(*versionText,
                                     newer ? QStringLiteral("newer") : QStringLiteral("older"))
                                .arg(Manifest::kSupportedMajor));
            // A different major version changes meaning: nothing else can be trusted.
            result.diagnostics = check.take();
            return result;
        } else {
            manifest.versionMajor = version->first;
            manifest.versionMinor = version->second;
        }
    }
    if (const auto role = check.string(root, QStringLiteral("role"), QStringLiteral("role"))) {
        if (const auto parsed = roleFromName(*role)) {
            manifest.role = *parsed;
        } else {
            check.error(QStringLiteral("role"),
                        QStringLiteral("is '%1', not distributed, reference or "
                                       "perturbed-reference")
                            .arg(*role));
        }
    }
    if (const auto tool =
            check.object(root, QStringLiteral("capture_tool"), QStringLiteral("capture_tool"))) {
        manifest.toolName =
            check.string(*tool, QStringLiteral("capture_tool.name"), QStringLiteral("name"))
                .value_or(QString());
        manifest.toolVersion =
            check.string(*tool, QStringLiteral("capture_tool.version"), QStringLiteral("version"))
                .value_or(QString());
    }
    const auto worldSize =
        check.integer(root, QStringLiteral("world_size"), QStringLiteral("world_size"), 1);
    if (!worldSize) {
        // Without the world size the rank files cannot be checked at all.
        result.diagnostics = check.take();
        return result;
    }
    if (*worldSize > Manifest::kMaxWorldSize) {
        // Refused before anything is sized by it: a corrupt count must not make the checker
        // enumerate billions of ranks.
        check.error(QStringLiteral("world_size"),
                    QStringLiteral("is %1, more than the %2 ranks this ttrace supports")
                        .arg(*worldSize)
                        .arg(Manifest::kMaxWorldSize));
        result.diagnostics = check.take();
        return result;
    }
    manifest.worldSize = *worldSize;
    readParallel(check, root, manifest);
    const std::size_t beforeMesh = check.count();
    readMesh(check, root, manifest);
    const bool meshValid = !check.hasErrorsSince(beforeMesh);
    readRanks(check, root, manifest, meshValid);
    readDtype(check, root, manifest);
    readModelAndCapture(check, root, manifest);
    readPerturbation(check, root, manifest);

    result.diagnostics = check.take();
    result.manifest = std::move(manifest);
    return result;
}

QStringList unlistedRankFiles(const QString& folder, const Manifest& manifest) {
    std::set<QString> listed;
    for (const auto& entry : manifest.ranks) {
        listed.insert(entry.file);
    }
    QStringList unlisted;
    for (const QString& file :
         QDir(folder).entryList({QStringLiteral("rank*.h5")}, QDir::Files, QDir::Name)) {
        if (!listed.contains(file)) {
            unlisted << file;
        }
    }
    return unlisted;
}

}  // namespace ttrace

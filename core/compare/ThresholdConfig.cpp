// readThresholdConfig: the JSON threshold configuration (docs/thresholds.md, "Config file").
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QStringList>
#include <algorithm>
#include <cmath>
#include <utility>

#include "compare/Threshold.h"
#include "trace/JsonWording.h"

namespace ttrace {

namespace {

QString allKindNames() {
    QStringList names;
    for (int i = 0; i < kTensorKindCount; ++i) {
        names << tensorKindName(static_cast<TensorKind>(i));
    }
    return names.join(QStringLiteral(", "));
}

// Collects diagnostics that all name the config file and the key they are about.
class ConfigReader {
public:
    explicit ConfigReader(QString path) : path_(std::move(path)) {}

    void report(Severity severity, const QString& key, const QString& message) {
        Diagnostic d;
        d.severity = severity;
        d.file = path_;
        d.message = key.isEmpty() ? message
                                  : QStringLiteral("key '") + key + QStringLiteral("': ") + message;
        diagnostics_.push_back(std::move(d));
    }

    // Unknown keys are likely typos of known ones: warn, never fail the run over them.
    void warnUnknownKeys(const QJsonObject& object, const QStringList& known,
                         const QString& prefix) {
        for (auto it = object.begin(); it != object.end(); ++it) {
            if (!known.contains(it.key())) {
                report(Severity::Warning, prefix + it.key(),
                       QStringLiteral("unknown key, ignored (known keys: ") +
                           known.join(QStringLiteral(", ")) + QLatin1Char(')'));
            }
        }
    }

    // A finite number above `minimum` (or at least it, when `inclusive`).
    std::optional<double> number(const QJsonValue& value, const QString& key, double minimum,
                                 bool inclusive) {
        if (!value.isDouble()) {
            report(Severity::Error, key,
                   QStringLiteral("expected a number, got ") + jsonTypeName(value));
            return std::nullopt;
        }
        const double x = value.toDouble();
        const bool ok = std::isfinite(x) && (inclusive ? x >= minimum : x > minimum);
        if (!ok) {
            const QString bound = QString::number(minimum);
            report(Severity::Error, key,
                   (inclusive ? QStringLiteral("must be a finite number of at least ")
                              : QStringLiteral("must be a finite number greater than ")) +
                       bound + QStringLiteral(", got ") + QString::number(x));
            return std::nullopt;
        }
        return x;
    }

    void readOverride(const QJsonValue& value, int index, ThresholdConfig& config) {
        const QString prefix =
            QStringLiteral("overrides[") + QString::number(index) + QStringLiteral("]");
        if (!value.isObject()) {
            report(Severity::Error, prefix,
                   QStringLiteral("expected an object, got ") + jsonTypeName(value));
            return;
        }
        const QJsonObject object = value.toObject();
        warnUnknownKeys(object,
                        {QStringLiteral("pattern"), QStringLiteral("kind"),
                         QStringLiteral("threshold"), QStringLiteral("safety_factor")},
                        prefix + QLatin1Char('.'));

        ThresholdOverride item;
        bool ok = true;
        const QJsonValue pattern = object.value(QStringLiteral("pattern"));
        if (!pattern.isString() || pattern.toString().isEmpty()) {
            report(
                Severity::Error, prefix + QStringLiteral(".pattern"),
                QStringLiteral("expected a non-empty glob string, got ") + jsonTypeName(pattern));
            ok = false;
        } else {
            item.pattern = pattern.toString();
            const QRegularExpression re(
                QRegularExpression::wildcardToRegularExpression(item.pattern));
            if (!re.isValid()) {
                report(Severity::Error, prefix + QStringLiteral(".pattern"),
                       QStringLiteral("not a valid glob: ") + re.errorString());
                ok = false;
            }
        }
        if (object.contains(QStringLiteral("kind"))) {
            const QJsonValue kind = object.value(QStringLiteral("kind"));
            const auto parsed =
                kind.isString() ? tensorKindFromName(kind.toString()) : std::optional<TensorKind>{};
            if (!parsed) {
                report(
                    Severity::Error, prefix + QStringLiteral(".kind"),
                    QStringLiteral("unknown tensor kind ") +
                        (kind.isString() ? QLatin1Char('\'') + kind.toString() + QLatin1Char('\'')
                                         : jsonTypeName(kind)) +
                        QStringLiteral("; expected one of ") + allKindNames());
                ok = false;
            }
            item.kind = parsed;
        }
        const bool hasThreshold = object.contains(QStringLiteral("threshold"));
        const bool hasSafety = object.contains(QStringLiteral("safety_factor"));
        if (hasThreshold == hasSafety) {
            report(Severity::Error, prefix,
                   QStringLiteral("set exactly one of 'threshold' (an absolute relative-error "
                                  "threshold) and 'safety_factor'"));
            ok = false;
        }
        if (hasThreshold) {
            item.threshold = number(object.value(QStringLiteral("threshold")),
                                    prefix + QStringLiteral(".threshold"), 0, false);
            ok = ok && item.threshold.has_value();
        }
        if (hasSafety) {
            item.safetyFactor = number(object.value(QStringLiteral("safety_factor")),
                                       prefix + QStringLiteral(".safety_factor"), 0, false);
            ok = ok && item.safetyFactor.has_value();
        }
        if (ok) {
            config.overrides.push_back(std::move(item));
        }
    }

    void readRoot(const QJsonObject& root, ThresholdConfig& config) {
        warnUnknownKeys(root,
                        {QStringLiteral("safety_factor"), QStringLiteral("floor_factor"),
                         QStringLiteral("theory"), QStringLiteral("overrides")},
                        {});
        if (root.contains(QStringLiteral("safety_factor"))) {
            if (auto x = number(root.value(QStringLiteral("safety_factor")),
                                QStringLiteral("safety_factor"), 0, false)) {
                config.safetyFactor = *x;
            }
        }
        if (root.contains(QStringLiteral("floor_factor"))) {
            if (auto x = number(root.value(QStringLiteral("floor_factor")),
                                QStringLiteral("floor_factor"), 0, true)) {
                config.floorFactor = *x;
            }
        }
        if (root.contains(QStringLiteral("theory"))) {
            const QJsonValue theory = root.value(QStringLiteral("theory"));
            if (!theory.isObject()) {
                report(Severity::Error, QStringLiteral("theory"),
                       QStringLiteral("expected an object, got ") + jsonTypeName(theory));
            } else {
                const QJsonObject object = theory.toObject();
                warnUnknownKeys(object, {QStringLiteral("k"), QStringLiteral("C")},
                                QStringLiteral("theory."));
                if (object.contains(QStringLiteral("k"))) {
                    if (auto x = number(object.value(QStringLiteral("k")),
                                        QStringLiteral("theory.k"), 0, false)) {
                        config.theoryK = *x;
                    }
                }
                if (object.contains(QStringLiteral("C"))) {
                    // C < 1 would make errors shrink with depth, which round-off never does.
                    if (auto x = number(object.value(QStringLiteral("C")),
                                        QStringLiteral("theory.C"), 1, true)) {
                        config.theoryC = *x;
                    }
                }
            }
        }
        if (root.contains(QStringLiteral("overrides"))) {
            const QJsonValue overrides = root.value(QStringLiteral("overrides"));
            if (!overrides.isArray()) {
                report(Severity::Error, QStringLiteral("overrides"),
                       QStringLiteral("expected an array, got ") + jsonTypeName(overrides));
            } else {
                const QJsonArray array = overrides.toArray();
                for (int i = 0; i < array.size(); ++i) {
                    readOverride(array.at(i), i, config);
                }
            }
        }
    }

    Diagnostics takeDiagnostics() { return std::move(diagnostics_); }

private:
    QString path_;
    Diagnostics diagnostics_;
};

}  // namespace

ThresholdConfigResult readThresholdConfig(const QString& path) {
    ThresholdConfigResult result;
    ConfigReader reader(path);
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly)) {
        reader.report(Severity::Error, {},
                      QStringLiteral("cannot read the threshold config: ") + file.errorString());
        result.diagnostics = reader.takeDiagnostics();
        return result;
    }
    const QByteArray bytes = file.readAll();
    QJsonParseError error;
    const QJsonDocument document = QJsonDocument::fromJson(bytes, &error);
    if (error.error != QJsonParseError::NoError) {
        const auto offset = std::clamp<qsizetype>(error.offset, 0, bytes.size());
        // lastIndexOf(from = -1) would search from the end, hence the guard.
        const qsizetype lineStart = offset > 0 ? bytes.lastIndexOf('\n', offset - 1) + 1 : 0;
        const qsizetype line = bytes.left(offset).count('\n') + 1;
        reader.report(Severity::Error, {},
                      QStringLiteral("not valid JSON at line ") + QString::number(line) +
                          QStringLiteral(", column ") + QString::number(offset - lineStart + 1) +
                          QStringLiteral(": ") + error.errorString());
    } else if (!document.isObject()) {
        reader.report(Severity::Error, {},
                      QStringLiteral("the threshold config must be a JSON object"));
    } else {
        reader.readRoot(document.object(), result.config);
    }
    result.diagnostics = reader.takeDiagnostics();
    return result;
}

}  // namespace ttrace

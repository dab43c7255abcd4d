#pragma once

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMetaType>
#include <QString>
#include <optional>
#include <vector>

#include "TestPaths.h"

// The bundled sample traces (resources/samples, real runs of examples/gpt) and what the
// checker must say about each, as resources/samples/samples.json records it:
// examples/gpt/samples.py writes both, the root cause and ranks taken from the bug corpus.
namespace ttrace::test {

struct BundledSample {
    QString name;
    QString config;       // a layout of examples/gpt/bugs.py's CONFIGS
    QString bug;          // empty: a clean run
    int exitCode = 0;     // ttrace-check's
    QString firstFaulty;  // the first faulty tensor, as TensorKey::toString() writes it
    QString rootCause;    // the root-cause module
    std::optional<std::vector<int>> faultyRanks;  // where the faulty shard must lie; none: any

    QString folder() const { return sourceDir() + QStringLiteral("/resources/samples/") + name; }
};

// Every sample of samples.json; empty when it cannot be read (the caller's QVERIFY says so).
inline std::vector<BundledSample> bundledSamples() {
    QFile file(sourceDir() + QStringLiteral("/resources/samples/samples.json"));
    if (!file.open(QIODevice::ReadOnly)) {
        return {};
    }
    std::vector<BundledSample> samples;
    const QJsonArray entries =
        QJsonDocument::fromJson(file.readAll())[QStringLiteral("samples")].toArray();
    for (const QJsonValue& entry : entries) {
        BundledSample sample;
        sample.name = entry[QStringLiteral("name")].toString();
        sample.config = entry[QStringLiteral("config")].toString();
        sample.bug = entry[QStringLiteral("bug")].toString();
        sample.exitCode = entry[QStringLiteral("exit_code")].toInt(-1);
        sample.firstFaulty = entry[QStringLiteral("first_faulty")].toString();
        sample.rootCause = entry[QStringLiteral("root_cause")].toString();
        if (entry[QStringLiteral("faulty_ranks")].isArray()) {
            std::vector<int> ranks;
            for (const QJsonValue& rank : entry[QStringLiteral("faulty_ranks")].toArray()) {
                ranks.push_back(rank.toInt());
            }
            sample.faultyRanks = ranks;
        }
        samples.push_back(sample);
    }
    return samples;
}

// The sample called `name`; an empty one (no name) when samples.json lacks it.
inline BundledSample bundledSample(const QString& name) {
    for (const BundledSample& sample : bundledSamples()) {
        if (sample.name == name) {
            return sample;
        }
    }
    return {};
}

}  // namespace ttrace::test

Q_DECLARE_METATYPE(ttrace::test::BundledSample)  // a column of data-driven tests

#include <QCryptographicHash>
#include <QDir>
#include <bit>

#include "store/EngineSources.h"
#include "store/ResultsStore.h"
#include "trace/FileStamp.h"

namespace ttrace {

namespace {

// Every field is length- or type-delimited, so that two different inputs never hash the
// same stream ("ab" + "c" vs "a" + "bc").
class FingerprintHasher {
public:
    void add(std::int64_t value) {
        const auto bits = static_cast<std::uint64_t>(value);
        char bytes[8];
        for (int i = 0; i < 8; ++i) {
            bytes[i] = static_cast<char>(bits >> (8 * i));
        }
        hash_.addData(QByteArrayView(bytes, 8));
    }
    void add(double value) { add(static_cast<std::int64_t>(std::bit_cast<std::uint64_t>(value))); }
    void add(const QString& text) {
        const QByteArray utf8 = text.toUtf8();
        add(static_cast<std::int64_t>(utf8.size()));
        hash_.addData(utf8);
    }
    void add(const char* tag) { add(QString::fromLatin1(tag)); }
    template <typename T>
    void add(const std::optional<T>& value) {
        add(static_cast<std::int64_t>(value.has_value()));
        if (value) {
            add(*value);
        }
    }

    // Path, size and modification time (ns) of a file; a missing file hashes as missing.
    void addFile(const QString& path) {
        add(path);
        const auto stamp = fileStamp(path);
        if (!stamp) {
            add("missing");
            return;
        }
        add(stamp->size);
        add(stamp->mtimeNs);
    }

    // The manifest and every rank file it lists, then the rank files it does not list: those
    // are reported when the set is opened, and a stored run carries that report.
    void addTraceSet(const TraceSet& set) {
        add(set.folder);
        addFile(set.manifest.path.isEmpty()
                    ? QDir(set.folder).filePath(QStringLiteral("manifest.json"))
                    : set.manifest.path);
        const QDir folder(set.folder);
        add(static_cast<std::int64_t>(set.manifest.ranks.size()));
        for (const RankEntry& entry : set.manifest.ranks) {
            addFile(folder.filePath(entry.file));
        }
        add("unlisted");
        for (const QString& file : unlistedRankFiles(set.folder, set.manifest)) {
            addFile(folder.filePath(file));
        }
    }

    QString result() const { return QString::fromLatin1(hash_.result().toHex()); }

private:
    QCryptographicHash hash_{QCryptographicHash::Sha256};
};

}  // namespace

QString runFingerprint(const TraceSet& distributed, const TraceSet& reference,
                       const TraceSet* perturbed, const ThresholdConfig& config,
                       std::int64_t chunkElements) {
    FingerprintHasher hasher;
    hasher.add("ttrace run fingerprint 1");
    hasher.add(QStringLiteral(TTRACE_VERSION));
    hasher.add(engineSourcesHash());
    hasher.add("distributed");
    hasher.addTraceSet(distributed);
    hasher.add("reference");
    hasher.addTraceSet(reference);
    hasher.add("perturbed");
    hasher.add(static_cast<std::int64_t>(perturbed != nullptr));
    if (perturbed) {
        hasher.addTraceSet(*perturbed);
    }
    hasher.add("chunk");
    hasher.add(chunkElements);
    hasher.add("thresholds");
    hasher.add(config.safetyFactor);
    hasher.add(config.floorFactor);
    hasher.add(config.theoryK);
    hasher.add(config.theoryC);
    hasher.add(static_cast<std::int64_t>(config.overrides.size()));
    for (const ThresholdOverride& o : config.overrides) {
        hasher.add(o.pattern);
        hasher.add(static_cast<std::int64_t>(o.kind.has_value()));
        if (o.kind) {
            hasher.add(tensorKindName(*o.kind));
        }
        hasher.add(o.threshold);
        hasher.add(o.safetyFactor);
    }
    return hasher.result();
}

}  // namespace ttrace

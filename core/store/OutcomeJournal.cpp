#include "store/OutcomeJournal.h"

#include <unistd.h>
#include <zlib.h>

#include <QDir>
#include <QFileInfo>
#include <QtEndian>

#include "compare/TaskOutcomesCodec.h"

namespace ttrace {

namespace {

constexpr QByteArrayView kMagic("ttrace outcome journal 1\n");
constexpr qsizetype kRecordHeader = 8;  // payload length, payload CRC-32
// Writes survive the death of the process as they are; syncing to the disk now and then also
// keeps them through the loss of the node, at a cost too small to measure.
constexpr auto kSyncInterval = std::chrono::seconds(5);

void appendU32(QByteArray& bytes, quint32 value) {
    const quint32 little = qToLittleEndian(value);
    bytes.append(reinterpret_cast<const char*>(&little), sizeof little);
}

quint32 readU32(const char* at) {
    return qFromLittleEndian<quint32>(at);
}

quint32 checksum(QByteArrayView bytes) {
    return static_cast<quint32>(crc32(crc32(0L, Z_NULL, 0),
                                      reinterpret_cast<const Bytef*>(bytes.data()),
                                      static_cast<uInt>(bytes.size())));
}

QByteArray fileHeader(const QString& fingerprint) {
    const QByteArray id = fingerprint.toUtf8();
    QByteArray header = kMagic.toByteArray();
    appendU32(header, static_cast<quint32>(id.size()));
    header += id;
    return header;
}

}  // namespace

std::unique_ptr<OutcomeJournal> OutcomeJournal::create(const QString& path,
                                                       const QString& fingerprint, QString* error) {
    std::unique_ptr<OutcomeJournal> journal(new OutcomeJournal);
    QDir().mkpath(QFileInfo(path).absolutePath());
    journal->file_.setFileName(path);
    // Unbuffered: each record reaches the kernel in one write, where a kill cannot undo it.
    const QByteArray header = fileHeader(fingerprint);
    if (!journal->file_.open(QIODevice::WriteOnly | QIODevice::Truncate | QIODevice::Unbuffered) ||
        journal->file_.write(header) != header.size()) {
        *error = QStringLiteral("cannot write the outcome journal %1: %2")
                     .arg(path, journal->file_.errorString());
        return nullptr;
    }
    journal->lastSync_ = std::chrono::steady_clock::now();
    return journal;
}

void OutcomeJournal::append(const TaskOutcome& outcome) {
    TaskOutcomes one;
    one.finished.push_back(outcome);
    const QByteArray payload = encodeTaskOutcomes(one);
    QByteArray record;
    record.reserve(kRecordHeader + payload.size());
    appendU32(record, static_cast<quint32>(payload.size()));
    appendU32(record, checksum(payload));
    record += payload;

    const std::lock_guard lock(mutex_);
    if (!error_.isEmpty()) {
        return;  // the file may end in a torn record now: nothing after it would be read
    }
    if (file_.write(record) != record.size()) {
        error_ = QStringLiteral("cannot append to the outcome journal %1: %2")
                     .arg(file_.fileName(), file_.errorString());
        return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - lastSync_ >= kSyncInterval) {
        lastSync_ = now;
        static_cast<void>(::fdatasync(file_.handle()));  // best effort: the data is written
    }
}

QString OutcomeJournal::error() const {
    const std::lock_guard lock(mutex_);
    return error_;
}

QString outcomeJournalFolder(const QString& cacheDir, const QString& fingerprint) {
    return QDir(cacheDir).filePath(QStringLiteral("unfinished/") + fingerprint);
}

JournalContents readOutcomeJournals(const QString& folder, const QString& fingerprint) {
    JournalContents contents;
    const QDir dir(folder);
    const QByteArray header = fileHeader(fingerprint);
    for (const QString& name :
         dir.entryList({QStringLiteral("*.outcomes")}, QDir::Files, QDir::Name)) {
        QFile file(dir.filePath(name));
        if (!file.open(QIODevice::ReadOnly)) {
            continue;
        }
        const QByteArray bytes = file.readAll();
        if (!bytes.startsWith(header)) {
            continue;  // another check's, or its header was cut off: nothing in it to reuse
        }
        ++contents.files;
        qsizetype at = header.size();
        while (at < bytes.size()) {
            const qsizetype left = bytes.size() - at - kRecordHeader;
            const qsizetype length = left >= 0 ? readU32(bytes.constData() + at) : -1;
            const QByteArrayView payload =
                length >= 0 && length <= left
                    ? QByteArrayView(bytes.constData() + at + kRecordHeader, length)
                    : QByteArrayView();
            std::optional<TaskOutcomes> decoded;
            if (length >= 0 && length <= left &&
                checksum(payload) == readU32(bytes.constData() + at + 4)) {
                decoded = decodeTaskOutcomes(payload.toByteArray());
            }
            if (!decoded || decoded->finished.size() != 1) {
                ++contents.damagedFiles;  // this record and what follows are compared again
                break;
            }
            contents.outcomes.push_back(std::move(decoded->finished.front()));
            at += kRecordHeader + length;
        }
    }
    return contents;
}

}  // namespace ttrace

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

bool OutcomeJournal::append(const TaskOutcome& outcome) {
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
        return false;  // the file may end in a torn record now: nothing after it would be read
    }
    if (const qint64 written = file_.write(record); written != record.size()) {
        // A disk that fills takes part of a record without an error: say how much it took.
        error_ = QStringLiteral("cannot append to the outcome journal %1: %2")
                     .arg(file_.fileName(), written < 0 || file_.error() != QFileDevice::NoError
                                                ? file_.errorString()
                                                : QStringLiteral("only %1 of %2 bytes were written")
                                                      .arg(written)
                                                      .arg(record.size()));
        return false;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - lastSync_ >= kSyncInterval) {
        lastSync_ = now;
        static_cast<void>(::fdatasync(file_.handle()));  // best effort: the data is written
    }
    return true;
}

QString OutcomeJournal::error() const {
    const std::lock_guard lock(mutex_);
    return error_;
}

QString outcomeJournalFolder(const QString& cacheDir, const QString& fingerprint) {
    return QDir(cacheDir).filePath(QStringLiteral("unfinished/") + fingerprint);
}

JournalReading forEachOutcomeIn(const QString& path, const QString& fingerprint,
                                const std::function<void(TaskOutcome&& outcome)>& visit) {
    JournalReading reading;
    QFile file(path);
    const QByteArray header = fileHeader(fingerprint);
    if (!file.open(QIODevice::ReadOnly) || file.read(header.size()) != header) {
        return reading;  // another check's, or its header was cut off: nothing in it to reuse
    }
    reading.files = 1;
    // One record at a time: a journal holds every result a process finished.
    char recordHeader[kRecordHeader];
    while (!file.atEnd()) {
        std::optional<TaskOutcomes> decoded;
        if (file.read(recordHeader, kRecordHeader) == kRecordHeader) {
            const qint64 length = readU32(recordHeader);
            if (length <= file.size() - file.pos()) {
                const QByteArray payload = file.read(length);
                if (payload.size() == length && checksum(payload) == readU32(recordHeader + 4)) {
                    decoded = decodeTaskOutcomes(payload);
                }
            }
        }
        if (!decoded || decoded->finished.size() != 1) {
            reading.damagedFiles = 1;  // this record and what follows are compared again
            break;
        }
        visit(std::move(decoded->finished.front()));
    }
    return reading;
}

JournalReading forEachJournaledOutcome(const QString& folder, const QString& fingerprint,
                                       const std::function<void(TaskOutcome&& outcome)>& visit) {
    JournalReading reading;
    const QDir dir(folder);
    for (const QString& name :
         dir.entryList({QStringLiteral("*.outcomes")}, QDir::Files, QDir::Name)) {
        const JournalReading one = forEachOutcomeIn(dir.filePath(name), fingerprint, visit);
        reading.files += one.files;
        reading.damagedFiles += one.damagedFiles;
    }
    return reading;
}

}  // namespace ttrace

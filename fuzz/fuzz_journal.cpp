// libFuzzer: any bytes as one record of a check's outcome journal (a killed check's finished
// tensors, read back by the next run; also the MPI codec's payload). The record is framed as
// the journal writes it, length and CRC-32 correct, so that the fuzzer reaches the decoder
// rather than the checksum.
#include <zlib.h>

#include <QTemporaryDir>
#include <QtEndian>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "FuzzInput.h"
#include "store/OutcomeJournal.h"

namespace {

void appendU32(QByteArray& bytes, quint32 value) {
    const quint32 little = qToLittleEndian(value);
    bytes.append(reinterpret_cast<const char*>(&little), sizeof little);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const QTemporaryDir folder;
    const QByteArray fingerprint("fuzz");
    QByteArray journal("ttrace outcome journal 1\n");
    appendU32(journal, static_cast<quint32>(fingerprint.size()));
    journal += fingerprint;
    appendU32(journal, static_cast<quint32>(size));
    appendU32(journal,
              static_cast<quint32>(crc32(crc32(0L, Z_NULL, 0), data, static_cast<uInt>(size))));
    journal.append(reinterpret_cast<const char*>(data), static_cast<qsizetype>(size));
    const QString path = folder.filePath(QStringLiteral("journal"));
    ttrace::fuzz::writeFile(path, reinterpret_cast<const std::uint8_t*>(journal.constData()),
                            static_cast<std::size_t>(journal.size()));
    std::size_t shards = 0;
    const auto reading = ttrace::forEachOutcomeIn(
        path, QString::fromLatin1(fingerprint), [&shards](ttrace::TaskOutcome&& outcome) {
            shards += outcome.result ? outcome.result->shards.size() : outcome.failures.size();
        });
    if (reading.files != 1) {
        // The header above no longer matches OutcomeJournal's: the harness would test nothing.
        std::fputs("fuzz_journal: the journal's header format changed; update the harness\n",
                   stderr);
        std::abort();
    }
    return 0;
}

#pragma once

#include <QFile>
#include <QString>
#include <cstdint>
#include <cstdlib>

namespace ttrace::fuzz {

// Replaces the file at `path` with the fuzzer's bytes; aborts when it cannot (a broken
// harness, not a finding).
inline void writeFile(const QString& path, const std::uint8_t* data, std::size_t size) {
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate) ||
        file.write(reinterpret_cast<const char*>(data), static_cast<qint64>(size)) !=
            static_cast<qint64>(size)) {
        std::abort();
    }
}

}  // namespace ttrace::fuzz

#pragma once

#include <QString>
#include <cstdint>
#include <optional>

namespace ttrace {

// Size and modification time (ns) of a file: what says that a cached index or result of it is
// still valid. nullopt when the file cannot be stat'ed.
struct FileStamp {
    std::int64_t size = 0;
    std::int64_t mtimeNs = 0;
};

std::optional<FileStamp> fileStamp(const QString& path);

}  // namespace ttrace

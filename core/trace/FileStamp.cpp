#include "trace/FileStamp.h"

#include <QFile>
#include <chrono>
#include <filesystem>

namespace ttrace {

std::optional<FileStamp> fileStamp(const QString& path) {
    std::error_code error;
    const std::filesystem::path native(QFile::encodeName(path).toStdString());
    const auto size = std::filesystem::file_size(native, error);
    if (error) {
        return std::nullopt;
    }
    const auto mtime = std::filesystem::last_write_time(native, error);
    if (error) {
        return std::nullopt;
    }
    const auto ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(mtime.time_since_epoch()).count();
    return FileStamp{static_cast<std::int64_t>(size), static_cast<std::int64_t>(ns)};
}

}  // namespace ttrace

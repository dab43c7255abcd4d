#pragma once

#include <QString>

namespace ttrace {

// Folder for ttrace's SQLite databases: $TTRACE_CACHE_DIR when set, else the user's cache
// directory ($XDG_CACHE_HOME/ttrace or ~/.cache/ttrace). Never inside a trace folder: trace
// folders are only ever read. Created on demand; empty string when it cannot be created.
QString cacheDirectory(const QString& overrideDir = {});
// The same folder's absolute path, without creating it.
QString cacheDirectoryPath(const QString& overrideDir = {});

}  // namespace ttrace

#pragma once

#include <QString>
#include <QStringList>

namespace ttrace {

// Folder for ttrace's SQLite databases: $TTRACE_CACHE_DIR when set, else the user's cache
// directory ($XDG_CACHE_HOME/ttrace or ~/.cache/ttrace). Never inside a trace folder: trace
// folders are only ever read. Created on demand; empty string when it cannot be created.
QString cacheDirectory(const QString& overrideDir = {});
// The same folder's absolute path, without creating it.
QString cacheDirectoryPath(const QString& overrideDir = {});

// Where a check keeps its index and results, decided once at its start and handed to every
// step of it: the folder, and why that one (docs/checker.md, "Cache").
struct CacheLocation {
    enum class Source { Flag, Variable, Default };
    QString dir;   // absolute and created; empty: the check runs without a cache
    QString path;  // the folder chosen, whether or not it could be used
    Source source = Source::Default;
    bool wanted = true;  // false with --no-cache
    // Why a wanted cache is not used: it lies in a read-only trace folder (`insideTraceFolder`
    // names it) or cannot be created.
    QString insideTraceFolder;
    QString problem;  // why a wanted cache folder could not be created (diskProblem's words)
    bool usable() const { return !dir.isEmpty(); }
    // "--cache-dir", "$TTRACE_CACHE_DIR" or "the default ($XDG_CACHE_HOME/ttrace)"
    QString why() const;
};

// Resolves the cache of a check: `flagDir` (--cache-dir) first, then the environment, then
// the default; refused when it lies inside one of `traceFolders`, which are never written
// to (nothing is created then).
[[nodiscard]] CacheLocation resolveCacheLocation(const QString& flagDir, bool wanted,
                                                 const QStringList& traceFolders);

}  // namespace ttrace

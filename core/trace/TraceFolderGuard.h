#pragma once

#include <QString>

namespace ttrace {

// True when `path` (which need not exist yet) is `folder` or lies below it, after resolving
// symbolic links. Used to refuse writing caches or reports into a trace folder: trace folders
// are only ever read.
bool isInsideFolder(const QString& path, const QString& folder);

}  // namespace ttrace

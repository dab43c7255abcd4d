#pragma once

#include <QString>

namespace ttrace {

// Why files cannot be written at `path` (a file or folder, existing or not), in the words a
// user acts on: "the disk holding it is full (12 KiB free)", "it is on a read-only file
// system", "it is not writable (permission denied)", "... is not a folder"; empty when the
// file system shows no such reason. Used where a write failed with a message that hides the
// cause (SQLite's "unable to open database file", Qt's "Unknown error").
[[nodiscard]] QString diskProblem(const QString& path);

}  // namespace ttrace

#pragma once

#include <sqlite3.h>

#include <QString>

namespace ttrace::test {

// Runs statements on a database file directly, beside (not through) the store that uses it:
// how a test makes a real database refuse writes, with a trigger, as a full disk would.
inline bool execOnFile(const QString& path, const char* sql) {
    sqlite3* db = nullptr;
    bool ok = sqlite3_open(path.toUtf8().constData(), &db) == SQLITE_OK;
    ok = ok && sqlite3_busy_timeout(db, 5000) == SQLITE_OK &&
         sqlite3_exec(db, sql, nullptr, nullptr, nullptr) == SQLITE_OK;
    sqlite3_close(db);
    return ok;
}

}  // namespace ttrace::test

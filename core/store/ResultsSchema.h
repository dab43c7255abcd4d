#pragma once

#include <span>

// The results database's schema as numbered migrations. A migration, once released, is never
// edited: a change of the schema is a new migration appended to the list.
namespace ttrace::results_schema {

struct Migration {
    int version;
    const char* sql;
};

std::span<const Migration> migrations();
int latestVersion();

}  // namespace ttrace::results_schema

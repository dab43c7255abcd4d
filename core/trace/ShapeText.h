#pragma once

#include <QString>
#include <cstdint>
#include <vector>

namespace ttrace {

// "[4, 16]": a shape or a coordinate as diagnostics show it.
QString formatShape(const std::vector<std::int64_t>& shape);
// "0, 1, 5" (the first `limit` ranks, then "and N more"), for messages naming ranks.
// (compare/FaultDescription.h's formatRanks says "ranks 0-3", the noun and runs joined.)
QString listRanks(const std::vector<int>& ranks, std::size_t limit = 8);
// "rank 1" or "ranks 0, 1, 5": listRanks with the noun in the right number.
QString rankPhrase(const std::vector<int>& ranks);
// "1 element", "16 elements": a count with its noun, plural by an "s".
QString counted(std::int64_t count, const QString& noun);

}  // namespace ttrace

#pragma once

#include <QString>
#include <cstdint>
#include <vector>

namespace ttrace {

// "[4, 16]": a shape or a coordinate as diagnostics show it.
QString formatShape(const std::vector<std::int64_t>& shape);
// "0, 1, 5" (the first `limit` ranks, then "and N more"), for messages naming ranks.
QString formatRanks(const std::vector<int>& ranks, std::size_t limit = 8);

}  // namespace ttrace

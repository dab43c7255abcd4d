#pragma once

#include <QString>
#include <vector>

#include "compare/TensorResult.h"

namespace ttrace {

// Plain-words pieces of the localization reasons, shared by the root-cause and shard rules.

// Three significant digits: "0.123", "37.5", "1.23e+03".
QString formatValue(double value);
// "rank 5", "ranks 4, 5", "no rank".
QString formatRanks(const std::vector<int>& ranks);
// Why a faulty tensor is faulty: "37.5x over the threshold (relative error 0.0412, threshold
// 0.0011)", NaN/Inf counts, replica mismatches, joined by "; ".
QString describeFault(const TensorResult& result);
// "within tolerance (normalized 0.12)".
QString describeWithinTolerance(const TensorResult& result);

}  // namespace ttrace

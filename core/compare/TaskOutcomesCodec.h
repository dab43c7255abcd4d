#pragma once

#include <QByteArray>
#include <optional>

#include "compare/ComparisonJob.h"

namespace ttrace {

// What one process of a distributed check sends to rank 0: its finished tensors (results and
// failures) or where they are, the tensors it left unchecked and why. A compact binary form
// (QDataStream) that keeps every double bit for bit, so that the merged report equals a
// single-process one.
[[nodiscard]] QByteArray encodeTaskOutcomes(const TaskOutcomes& outcomes);
// Nullopt when `bytes` is not what encodeTaskOutcomes wrote (truncated, another version).
[[nodiscard]] std::optional<TaskOutcomes> decodeTaskOutcomes(const QByteArray& bytes);

}  // namespace ttrace

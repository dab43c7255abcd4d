#pragma once

#include <QByteArray>
#include <QString>
#include <cstdint>
#include <optional>
#include <vector>

#include "trace/TensorKey.h"

namespace ttrace {

// How a forward tensor recomputed by activation checkpointing differed from its first forward,
// as the capture found it comparing the two bit for bit (trace-format.md, `recomputations`).
// The trace holds the first forward only; the backward used the recomputed values.
struct RecomputationDifference {
    std::int64_t elementsDiffering = 0;
    std::int64_t elements = 0;
    bool scalesDiffer = false;  // fp8: the recomputation was quantized with another scale

    friend bool operator==(const RecomputationDifference&,
                           const RecomputationDifference&) = default;
};

// A rank file's `recomputations` attribute: how many recomputed tensors were compared, and
// those that differed.
struct Recomputations {
    std::int64_t compared = 0;
    std::vector<std::pair<TensorKey, RecomputationDifference>> differing;
};

// Parses the attribute's JSON text; nullopt and `problem` (in the trace format's terms) when
// it does not have the documented form.
[[nodiscard]] std::optional<Recomputations> parseRecomputations(const QByteArray& json,
                                                                QString* problem);

// "12 of 64 elements" and ", and in its quantization scales": what differed, for messages.
[[nodiscard]] QString describeDifference(const RecomputationDifference& difference);

// The compact text the index cache and the worker protocol carry ("12 64 1"), and back.
[[nodiscard]] QString differenceText(const RecomputationDifference& difference);
[[nodiscard]] std::optional<RecomputationDifference> differenceFromText(const QString& text);

}  // namespace ttrace

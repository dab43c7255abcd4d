#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "compare/TensorResult.h"

namespace ttrace {

// Where the gradient arriving at a module's output came from (docs/localization.md,
// "Faulty gradients"), found in the reference's backward of the same iteration and
// micro-batch, walking back from that output gradient.
struct GradientSource {
    enum class From {
        // The backward of a module its output flowed into: the nearest input_grad of a module
        // other than this one and those enclosing it, with the output gradient's global shape.
        Module,
        // An enclosing module's output gradient comes first: the gradient was made inside that
        // module, from its output gradient, by computation that is not captured (a residual
        // add; a router's by the mixture of experts that weights with its output).
        Enclosing,
        // The forward pass comes first: it is the loss's gradient with respect to the output.
        Loss,
    };
    From from = From::Loss;
    // Module: the producer's input_grad; Enclosing: the enclosing module's output_grad (index
    // into the results). What the output gradient was computed from.
    std::optional<std::size_t> upstream;
};

// The source of output gradient `results[order[pos]]`; `order` is every result index in the
// reference's execution order.
[[nodiscard]] GradientSource findGradientSource(const std::vector<TensorResult>& results,
                                                const std::vector<std::size_t>& order,
                                                std::size_t pos);

}  // namespace ttrace

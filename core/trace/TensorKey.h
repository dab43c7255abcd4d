#pragma once

#include <QString>
#include <QStringView>
#include <optional>

namespace ttrace {

// What a captured tensor is, relative to its module (trace-format.md, attribute `kind`).
enum class TensorKind {
    ForwardInput,
    ForwardOutput,
    OutputGrad,
    InputGrad,
    Param,
    ParamGrad,
    MainGrad,
    UpdatedParam,
};
inline constexpr int kTensorKindCount = 8;

std::optional<TensorKind> tensorKindFromName(QStringView name);
QString tensorKindName(TensorKind kind);
// Parameter kinds exist once per iteration (micro_batch -1) and belong to a parameter path.
bool isParameterKind(TensorKind kind);
bool isBackwardKind(TensorKind kind);

// Identity of a logical (global) tensor: every shard and replica of it shares this key.
struct TensorKey {
    QString name;
    TensorKind kind = TensorKind::ForwardOutput;
    int index = 0;
    int iteration = 0;
    int microBatch = 0;

    // "layers.3.mlp.fc1 forward_output[0] it0 mb1"
    QString toString() const;
    // "forward_input[1]": the kind with its index, for module tensors; the kind alone
    // ("param_grad") for a parameter's, which have none.
    QString kindText() const;
    // The module path: the name itself for module tensors, the name without its last
    // component (".weight") for parameter kinds.
    QString module() const;

    friend bool operator==(const TensorKey& a, const TensorKey& b) = default;
    friend bool operator<(const TensorKey& a, const TensorKey& b);
};

}  // namespace ttrace

#include "compare/RootCause.h"

#include <QStringList>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <map>
#include <utility>

#include "compare/FaultDescription.h"
#include "compare/GradientSource.h"

namespace ttrace {

namespace {

using ModuleIteration = std::pair<QString, int>;
using ModuleIndex = std::map<ModuleIteration, std::vector<std::size_t>>;

// What a faulty tensor was computed from, among the captured tensors of its module.
struct Inputs {
    std::vector<std::size_t> indices;
    QString label;  // "forward_input", "output_grad and forward_input", ...
};

// The captured tensors of `module`/`iteration` with one of `kinds`, filtered by `accept`.
template <typename Accept>
void collect(const std::vector<TensorResult>& results, const ModuleIndex& index,
             const ModuleIteration& where, std::initializer_list<TensorKind> kinds, Accept accept,
             std::vector<std::size_t>& out) {
    const auto it = index.find(where);
    if (it == index.end()) {
        return;
    }
    for (const std::size_t i : it->second) {
        const TensorResult& r = results[i];
        for (const TensorKind kind : kinds) {
            if (r.key.kind == kind && accept(r)) {
                out.push_back(i);
                break;
            }
        }
    }
}

// The kinds among `indices` with their indices, in the order they come ("output_grad[0] and
// forward_input[1]"): what was captured, never a kind that was not.
QString capturedKinds(const std::vector<TensorResult>& results,
                      const std::vector<std::size_t>& indices, bool ofTheModule) {
    QStringList kinds;
    for (const std::size_t i : indices) {
        const QString kind = results[i].key.kindText();
        if (!kinds.contains(kind)) {
            kinds.append(kind);
        }
    }
    const QString joined = kinds.size() <= 2
                               ? kinds.join(QStringLiteral(" and "))
                               : kinds.mid(0, kinds.size() - 1).join(QStringLiteral(", ")) +
                                     QStringLiteral(" and ") + kinds.last();
    return ofTheModule ? QStringLiteral("module's ") + joined : joined;
}

Inputs inputsOf(const std::vector<TensorResult>& results, const ModuleIndex& index,
                const TensorResult& f) {
    Inputs inputs;
    const TensorKey& key = f.key;
    const ModuleIteration here{key.module(), key.iteration};
    const auto sameModuleMicroBatch = [&key](const TensorResult& r) {
        return r.key.name == key.name && r.key.microBatch == key.microBatch;
    };
    const auto moduleTensor = [&key](const TensorResult& r) {
        return r.key.name == key.module();  // any micro-batch, any index
    };
    const auto sameParameter = [&key](const TensorResult& r) { return r.key.name == key.name; };

    switch (key.kind) {
        case TensorKind::ForwardOutput:
            collect(results, index, here, {TensorKind::ForwardInput}, sameModuleMicroBatch,
                    inputs.indices);
            inputs.label = QStringLiteral("forward_input");
            break;
        case TensorKind::InputGrad:
            // The input gradient also reads the saved forward activations.
            collect(results, index, here, {TensorKind::OutputGrad, TensorKind::ForwardInput},
                    sameModuleMicroBatch, inputs.indices);
            inputs.label = QStringLiteral("output_grad and forward_input");
            break;
        case TensorKind::ParamGrad:
        case TensorKind::MainGrad:
            collect(results, index, here, {TensorKind::OutputGrad, TensorKind::ForwardInput},
                    moduleTensor, inputs.indices);
            inputs.label = QStringLiteral("module's output_grad and forward_input");
            break;
        case TensorKind::UpdatedParam:
            collect(results, index, here,
                    {TensorKind::ParamGrad, TensorKind::MainGrad, TensorKind::Param}, sameParameter,
                    inputs.indices);
            inputs.label = QStringLiteral("param_grad/main_grad and param");
            break;
        case TensorKind::Param:
            if (key.iteration == 0) {
                break;  // initialized or loaded: no step made it
            }
            // This iteration's parameter is the previous iteration's updated parameter.
            collect(results, index, {key.module(), key.iteration - 1}, {TensorKind::UpdatedParam},
                    sameParameter, inputs.indices);
            inputs.label = QStringLiteral("previous iteration's updated_param");
            break;
        case TensorKind::ForwardInput:
        case TensorKind::OutputGrad:
            break;  // produced outside the module: only the preceding-tensor rule applies
    }
    if (!inputs.indices.empty()) {
        inputs.label =
            capturedKinds(results, inputs.indices,
                          key.kind == TensorKind::ParamGrad || key.kind == TensorKind::MainGrad);
    }
    return inputs;
}

QString faultyPart(const TensorResult& f) {
    return f.key.kindText() + QLatin1Char(' ') + describeFault(f);
}

// Why output gradient `f` convicts its module: `upstream`, what it was computed from, is
// within tolerance (GradientSource).
QString gradientReason(const GradientSource& source, const TensorResult& upstream,
                       const TensorResult& f) {
    const QString evidence = upstream.key.toString() + QStringLiteral(" is ") +
                             describeWithinTolerance(upstream) + QStringLiteral(", ") +
                             faultyPart(f);
    if (source.from == GradientSource::From::Module) {
        return QStringLiteral("its gradient comes from the backward of ") + upstream.key.module() +
               QStringLiteral(": ") + evidence +
               QStringLiteral(
                   "; the gradient went wrong between that backward and this module (a "
                   "gradient collective or pipeline transfer, or a step between them that is "
                   "not captured, such as a loss term added to this output)");
    }
    return QStringLiteral("its gradient was made inside ") + upstream.key.module() +
           QStringLiteral(" from that module's output gradient: ") + evidence +
           QStringLiteral(
               "; the gradient went wrong in that module's computation between the two, which "
               "is not captured");
}

bool isGradientOfParameter(const TensorResult& r) {
    return r.key.kind == TensorKind::ParamGrad || r.key.kind == TensorKind::MainGrad;
}

// Whether every captured input of `f` is within tolerance (none captured: false), and the
// input closest to its threshold.
std::optional<std::size_t> inputsWithin(const std::vector<TensorResult>& results,
                                        const Inputs& inputs) {
    if (inputs.indices.empty()) {
        return std::nullopt;
    }
    std::size_t tightest = inputs.indices.front();
    for (const std::size_t i : inputs.indices) {
        if (results[i].isFaulty()) {
            return std::nullopt;
        }
        if (results[i].normalizedError > results[tightest].normalizedError) {
            tightest = i;
        }
    }
    return tightest;
}

// Parameter gradients are finished together: summed over micro-batches, reduced over the
// data-parallel ranks, clipped and scaled as one, so one wrong gradient can move them all (a
// clipping norm taken over it) and their order says nothing about which went wrong first. A
// gradient that only carries such a common error is off by as little as the others; the one
// that went wrong itself is off by far more. Of the faulty ones of `f`'s iteration whose own
// inputs are within tolerance (or not captured), the one with the largest relative error is
// the cause when it is at least kOwnErrorRatio times `f`'s; else `f` stays.
constexpr double kOwnErrorRatio = 10;

std::size_t worstGradientOfParameter(const std::vector<TensorResult>& results,
                                     const ModuleIndex& index, std::size_t fi, int& candidates) {
    const auto error = [&results](std::size_t i) {
        const double e = results[i].judgedError();
        return std::isnan(e) ? std::numeric_limits<double>::infinity() : e;
    };
    std::size_t worst = fi;
    candidates = 0;
    for (std::size_t i = 0; i < results.size(); ++i) {
        const auto& r = results[i];
        if (!r.isFaulty() || !isGradientOfParameter(r) ||
            r.key.iteration != results[fi].key.iteration) {
            continue;
        }
        const Inputs inputs = inputsOf(results, index, r);
        if (!inputs.indices.empty() && !inputsWithin(results, inputs)) {
            continue;  // a cascade from its module's faulty activations
        }
        ++candidates;
        if (error(i) > error(worst)) {
            worst = i;
        }
    }
    return error(worst) >= kOwnErrorRatio * error(fi) ? worst : fi;
}

}  // namespace

std::optional<RootCause> findRootCause(const std::vector<TensorResult>& results,
                                       const std::vector<std::size_t>& order,
                                       std::optional<std::size_t> firstFaulty) {
    if (!firstFaulty) {
        return std::nullopt;
    }
    ModuleIndex index;
    for (std::size_t i = 0; i < results.size(); ++i) {
        index[{results[i].key.module(), results[i].key.iteration}].push_back(i);
    }

    for (std::size_t pos = 0; pos < order.size(); ++pos) {
        const std::size_t fi = order[pos];
        const TensorResult& f = results[fi];
        if (!f.isFaulty()) {
            continue;
        }
        RootCause cause;
        cause.module = f.key.module();
        cause.result = fi;

        Inputs inputs = inputsOf(results, index, f);
        std::optional<std::size_t> within;
        if (!inputs.indices.empty()) {
            within = inputsWithin(results, inputs);
            if (!within) {
                continue;  // part of a cascade: its inputs were already wrong
            }
        }
        QString among;
        if (isGradientOfParameter(f)) {
            int candidates = 0;
            const std::size_t worst = worstGradientOfParameter(results, index, fi, candidates);
            if (worst != fi) {
                cause.module = results[worst].key.module();
                cause.result = worst;
                inputs = inputsOf(results, index, results[worst]);
                within = inputs.indices.empty() ? std::nullopt : inputsWithin(results, inputs);
                among = QStringLiteral(
                            "; of the %1 faulty parameter gradients of iteration %2 whose "
                            "inputs are within tolerance or not captured, this one is the "
                            "furthest off, %3x the relative error of the first, %4, which "
                            "only carries an error common to them (parameter gradients are "
                            "reduced, clipped and scaled together)")
                            .arg(candidates)
                            .arg(f.key.iteration)
                            .arg(formatValue(results[worst].judgedError() / f.judgedError()))
                            .arg(f.key.toString());
                if (!within) {
                    cause.reason = inputs.label + QStringLiteral(" not captured; ") +
                                   faultyPart(results[worst]) + among;
                    return cause;
                }
            }
        }
        if (within) {
            const std::size_t tightest = *within;
            cause.input = tightest;
            const QString withinText = inputs.indices.size() == 1
                                           ? describeWithinTolerance(results[tightest])
                                           : QStringLiteral("all within tolerance (") +
                                                 QString::number(inputs.indices.size()) +
                                                 QStringLiteral(" tensors, highest normalized ") +
                                                 formatValue(results[tightest].normalizedError) +
                                                 QLatin1Char(')');
            cause.reason = inputs.label + QLatin1Char(' ') + withinText + QStringLiteral(", ") +
                           faultyPart(results[cause.result]) + among;
            return cause;
        }

        // Inputs not captured: judge by the tensor just before it in the reference order.
        if (f.referenceSeq < 0) {
            continue;  // no place in the reference order, nothing to compare with
        }
        if (f.key.kind == TensorKind::OutputGrad) {
            cause.gradient = findGradientSource(results, order, pos);
            if (const auto upstream = cause.gradient->upstream) {
                // What the output gradient was computed from is its input.
                const TensorResult& u = results[*upstream];
                if (u.isFaulty()) {
                    continue;  // a cascade from there
                }
                cause.input = *upstream;
                cause.reason = gradientReason(*cause.gradient, u, f);
                return cause;
            }
        }
        const QString missing =
            inputs.label.isEmpty() ? QString() : inputs.label + QStringLiteral(" not captured; ");
        if (pos == 0) {
            cause.reason = missing +
                           QStringLiteral(
                               "first tensor of the reference order, nothing before "
                               "it is faulty; ") +
                           faultyPart(f);
            return cause;
        }
        const TensorResult& previous = results[order[pos - 1]];
        if (previous.referenceSeq < 0 || previous.isFaulty()) {
            continue;
        }
        cause.reason = missing + QStringLiteral("the preceding tensor ") + previous.key.toString() +
                       QStringLiteral(" is ") + describeWithinTolerance(previous) +
                       QStringLiteral(", ") + faultyPart(f);
        const bool wrongScale = f.fp8Scales && !f.fp8Scales->mismatches.empty();
        if (cause.gradient) {
            cause.reason += QStringLiteral(
                "; no module's backward comes before it in its micro-batch: its gradient comes "
                "from the loss (the loss, its scaling and any loss term added to this output are "
                "not captured), and went wrong there or on its way into this module");
        } else if (f.key.kind == TensorKind::Param) {
            cause.reason += QStringLiteral(
                "; no optimizer step came before iteration 0: the parameter was wrong as "
                "initialized or loaded (seeding per shard, or a checkpoint loaded into other "
                "shards)");
        } else if (inputs.label.isEmpty() && !wrongScale) {
            // A module's input or output gradient arrives from outside it: the value went
            // wrong between the preceding tensor and this one. (A wrong fp8 scale was set
            // where the module quantized it; its description says so.)
            cause.reason += QStringLiteral(
                "; the value went wrong on its way into this module (communication, pipeline "
                "transfer or the producer not captured)");
        }
        return cause;
    }

    RootCause cause;
    const TensorResult& first = results[*firstFaulty];
    cause.module = first.key.module();
    cause.result = *firstFaulty;
    cause.reason = QStringLiteral(
                       "no faulty tensor has its inputs within tolerance; the earliest "
                       "faulty tensor ") +
                   first.key.toString() +
                   QStringLiteral(
                       " has faulty or uncaptured inputs, so the cause may lie earlier "
                       "than what was captured; ") +
                   faultyPart(first);
    return cause;
}

}  // namespace ttrace

#pragma once

#include <QJsonObject>
#include <QString>
#include <QStringList>
#include <optional>
#include <utility>
#include <vector>

#include "trace/DType.h"
#include "trace/Diagnostic.h"
#include "trace/TensorKey.h"

namespace ttrace {

enum class RunRole { Distributed, Reference, PerturbedReference };
QString runRoleName(RunRole role);

struct ParallelConfig {
    int tp = 1, pp = 1, vpp = 1, dp = 1, cp = 1, ep = 1;
    bool sp = false;
    QString toString() const;  // "tp=2 pp=1 vpp=1 dp=2 cp=1 ep=1 sp=off"
};

// One router's top-k choices in a run that replayed the reference's routing
// (capture.routing_replay): the tokens it routed and those its own choice would have sent to
// other experts, summed over the ranks (docs/capture.md, "Routing replay").
struct RoutingChoices {
    QString router;
    qint64 tokens = 0;
    qint64 differing = 0;
};

struct RankEntry {
    int rank = 0;
    QString file;  // relative to the trace folder
    std::vector<int> coords;
};

// A format_version, "MAJOR.MINOR", as (major, minor); nullopt for anything else.
[[nodiscard]] std::optional<std::pair<int, int>> parseFormatVersion(const QString& text);

// manifest.json of a trace set (trace-format.md).
struct Manifest {
    static constexpr int kSupportedMajor = 1;
    // Far beyond any training job (2^24 ranks), far below what would exhaust memory.
    static constexpr int kMaxWorldSize = 1 << 24;
    // Objects and arrays nested deeper are refused: the manifest's own fields nest 3 deep, and
    // a report copies `model` into JSON that common parsers must read back (Python's json
    // gives up near 1000).
    static constexpr int kMaxNesting = 32;

    QString path;  // absolute path of manifest.json
    int versionMajor = 1;
    int versionMinor = 0;
    RunRole role = RunRole::Distributed;
    QString toolName;
    QString toolVersion;
    int worldSize = 1;
    ParallelConfig parallel;
    std::vector<QString> meshAxes;
    std::vector<int> meshShape;
    std::vector<RankEntry> ranks;  // ordered by rank
    QString recipe;                // fp32, bf16, fp16, fp8, fp4
    DType computeDtype = DType::F32;
    // The element format an fp8 or fp4 recipe rounds the GEMM operands that tensors of
    // `kind` pass through to: e4m3 (the forward operands of every fp8 recipe) or e2m1, and
    // for gradients the coarser of that and `gradientOperands`, but for one madeInForward;
    // none for the other recipes.
    std::optional<DType> operandDtype(TensorKind kind,
                                      std::optional<DType> stored = std::nullopt) const;
    // A gradient kind `stored` in the forward operands' format where the gradients' is
    // coarser: a backward GEMM's weight or input operand (torchao's tensorwise Float8Linear:
    // output_grad 2 and 4), made from the forward, not from gradients.
    bool madeInForward(TensorKind kind, DType stored) const;
    // dtype.grad_operands: the format a recipe rounds the backward's gradient operands to
    // where it is not the forward's (e5m2 in torchao's Float8Linear and "hybrid" fp8 recipes).
    std::optional<DType> gradientOperands;
    QJsonObject model;  // free description
    int numLayers = 1;
    std::vector<int> iterations;
    int microBatches = 1;
    std::optional<double> perturbation;          // perturbed-reference only
    std::vector<RoutingChoices> routingChoices;  // in the order the manifest names them
};

struct ManifestResult {
    std::optional<Manifest> manifest;  // empty when the manifest cannot be used at all
    Diagnostics diagnostics;
};

// Reads and validates `folder`/manifest.json. Never throws: every problem is a diagnostic
// naming the file and the field.
[[nodiscard]] ManifestResult readManifest(const QString& folder);

// The rank files (rank*.h5) in `folder` that `manifest` does not list, sorted by name: a trace
// set ignores them, with a warning.
[[nodiscard]] QStringList unlistedRankFiles(const QString& folder, const Manifest& manifest);

}  // namespace ttrace

#include "compare/Coverage.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "compare/FaultDescription.h"

namespace ttrace {

namespace {

// Module groups named one by one before the rest is summed up in a line.
constexpr std::size_t kModuleLines = 24;

// What one module lacks: which tensors, by kind, iteration and micro-batch.
struct ModuleGap {
    std::int64_t tensors = 0;
    std::int64_t moduleTensors = 0;  // the module's tensors in the run that has them
    std::int64_t order = 0;          // where the module first ran, to list gaps in run order
    std::set<QString> kinds;
    std::set<int> iterations;
    std::set<int> microBatches;
    std::set<int> ranks;  // that hold them, when known
};

// Tensors missing from the reference whose records are read to say which ranks hold them.
constexpr std::int64_t kTensorsWithRanks = 256;

// "forward_input[1]", or "weight param_grad" for a parameter's tensors.
QString kindLabel(const TensorKey& key) {
    if (isParameterKind(key.kind)) {
        const QString module = key.module();
        const QString leaf =
            key.name.size() > module.size() ? key.name.mid(module.size() + 1) : key.name;
        return leaf + QLatin1Char(' ') + tensorKindName(key.kind);
    }
    return key.kindText();
}

QString plural(std::int64_t n, const QString& one, const QString& many) {
    return QStringLiteral("%1 %2").arg(n).arg(n == 1 ? one : many);
}

QString describeGap(const ModuleGap& gap) {
    QStringList kinds(gap.kinds.begin(), gap.kinds.end());
    QString text = kinds.join(QStringLiteral(", "));
    const std::vector<int> iterations(gap.iterations.begin(), gap.iterations.end());
    text += (iterations.size() == 1 ? QStringLiteral("; iteration ")
                                    : QStringLiteral("; iterations ")) +
            formatRankList(iterations);
    if (!gap.microBatches.empty()) {
        const std::vector<int> batches(gap.microBatches.begin(), gap.microBatches.end());
        text += (batches.size() == 1 ? QStringLiteral("; micro-batch ")
                                     : QStringLiteral("; micro-batches ")) +
                formatRankList(batches);
    }
    if (!gap.ranks.empty()) {
        text += QStringLiteral("; on ") + formatRanks({gap.ranks.begin(), gap.ranks.end()});
    }
    return text;
}

// The message names the module or layers: a group of tensors, not one tensor key.
Diagnostic coverageWarning(const QString& folder, const QString& message) {
    Diagnostic d;
    d.severity = Severity::Warning;
    d.file = folder;
    d.message = message;
    return d;
}

void addToGap(ModuleGap& gap, const TensorKey& key) {
    ++gap.tensors;
    gap.kinds.insert(kindLabel(key));
    gap.iterations.insert(key.iteration);
    if (key.microBatch >= 0) {
        gap.microBatches.insert(key.microBatch);
    }
}

// One warning per module gap, in run order, the rest summed up in one line.
void reportGaps(const std::map<QString, ModuleGap>& gaps, const QString& folder,
                const QString& missingFrom, Diagnostics& diagnostics) {
    std::vector<std::pair<QString, const ModuleGap*>> ordered;
    for (const auto& [module, gap] : gaps) {
        ordered.emplace_back(module, &gap);
    }
    std::stable_sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) {
        return a.second->order < b.second->order;
    });
    std::int64_t restTensors = 0;
    for (std::size_t i = 0; i < ordered.size(); ++i) {
        const auto& [module, gap] = ordered[i];
        if (i >= kModuleLines) {
            restTensors += gap->tensors;
            continue;
        }
        const QString count =
            gap->tensors == gap->moduleTensors
                ? QStringLiteral("all %1 of its tensors are").arg(gap->tensors)
                : QStringLiteral("%1 of its %2 tensors %3")
                      .arg(gap->tensors)
                      .arg(gap->moduleTensors)
                      .arg(gap->tensors == 1 ? QStringLiteral("is") : QStringLiteral("are"));
        diagnostics.push_back(
            coverageWarning(folder, QStringLiteral("%1: %2 not in %3, not compared: %4")
                                        .arg(module, count, missingFrom, describeGap(*gap))));
    }
    if (ordered.size() > kModuleLines) {
        diagnostics.push_back(coverageWarning(
            folder,
            QStringLiteral("and %1 more with %2 not in %3, not compared")
                .arg(plural(static_cast<std::int64_t>(ordered.size() - kModuleLines),
                            QStringLiteral("module"), QStringLiteral("modules")),
                     plural(restTensors, QStringLiteral("tensor"), QStringLiteral("tensors")),
                     missingFrom)));
    }
}

}  // namespace

QString Coverage::describe(std::int64_t compared) const {
    QString text =
        QStringLiteral("%1 of %2 reference tensors compared").arg(compared).arg(referenceTensors);
    if (notCaptured > 0) {
        text += QStringLiteral("; %1 not captured").arg(notCaptured);
    }
    if (const auto failed = notCompared(compared); failed > 0) {
        text += QStringLiteral("; %1 not comparable").arg(failed);
    }
    if (notInReference > 0) {
        text += QStringLiteral("; %1 not in the reference")
                    .arg(plural(notInReference, QStringLiteral("distributed tensor"),
                                QStringLiteral("distributed tensors")));
    }
    if (blind > 0) {
        text += QStringLiteral("; %1 blind (threshold of 1 or more)").arg(blind);
    }
    return text;
}

Coverage measureCoverage(const TraceCatalog& catalog, const TrustedRun& trusted,
                         Diagnostics& diagnostics) {
    const std::vector<TrustedTensor>& reference = trusted.tensors;
    const std::vector<TensorKey>& refusedReference = trusted.refused;
    const std::vector<CatalogTensor>& distributed = catalog.tensors();
    const QString distributedFolder = catalog.folder();
    Coverage coverage;
    coverage.referenceTensors =
        static_cast<std::int64_t>(reference.size() + refusedReference.size());
    // Both lists are ordered by key.
    std::vector<TensorKey> distributedKeys;
    distributedKeys.reserve(distributed.size());
    for (const CatalogTensor& tensor : distributed) {
        distributedKeys.push_back(tensor.key);
    }
    const auto inReference = [&trusted, &refusedReference](const TensorKey& key) {
        return trusted.find(key) != nullptr ||
               std::binary_search(refusedReference.begin(), refusedReference.end(), key);
    };

    // Layers of the reference the distributed run lacks entirely: one line per run of them.
    std::map<int, std::pair<std::int64_t, std::int64_t>> layers;  // layer -> (tensors, missing)
    std::vector<bool> missing(reference.size());
    for (std::size_t i = 0; i < reference.size(); ++i) {
        missing[i] =
            !std::binary_search(distributedKeys.begin(), distributedKeys.end(), reference[i].key);
        coverage.notCaptured += missing[i] ? 1 : 0;
        if (reference[i].layer >= 0) {
            auto& [tensors, absent] = layers[reference[i].layer];
            ++tensors;
            absent += missing[i] ? 1 : 0;
        }
    }
    std::set<int> absentLayers;
    std::vector<std::pair<int, int>> runs;  // consecutive absent layers, first and last
    std::vector<std::int64_t> runTensors;
    for (const auto& [layer, counts] : layers) {
        if (counts.first != counts.second) {
            continue;
        }
        absentLayers.insert(layer);
        if (!runs.empty() && runs.back().second == layer - 1) {
            runs.back().second = layer;
            runTensors.back() += counts.first;
        } else {
            runs.emplace_back(layer, layer);
            runTensors.push_back(counts.first);
        }
    }
    for (std::size_t r = 0; r < runs.size(); ++r) {
        const auto [first, last] = runs[r];
        const bool one = first == last;
        const QString span = one ? QStringLiteral("layer %1").arg(first)
                                 : QStringLiteral("layers %1-%2").arg(first).arg(last);
        diagnostics.push_back(coverageWarning(
            distributedFolder,
            QStringLiteral("%1: none of %2 %3 reference tensors is in the distributed run: %4 "
                           "that never ran (a pipeline stage?) or that the capture left out")
                .arg(span, one ? QStringLiteral("its") : QStringLiteral("their"))
                .arg(runTensors[r])
                .arg(one ? QStringLiteral("a layer") : QStringLiteral("layers"))));
    }

    // The rest, module by module.
    std::map<QString, ModuleGap> notCaptured;
    std::map<QString, std::int64_t> moduleTensors;
    std::map<QString, std::int64_t> moduleOrder;
    for (std::size_t i = 0; i < reference.size(); ++i) {
        const QString module = reference[i].key.module();
        ++moduleTensors[module];
        const auto seq = reference[i].order;
        const auto [it, inserted] = moduleOrder.try_emplace(module, seq);
        it->second = std::min(it->second, seq);
        if (missing[i] && !absentLayers.count(reference[i].layer)) {
            addToGap(notCaptured[module], reference[i].key);
        }
    }
    // Reference tensors that did not assemble: their layer is unknown, so they are named
    // module by module when the distributed run lacks them too.
    for (const TensorKey& key : refusedReference) {
        const QString module = key.module();
        ++moduleTensors[module];
        moduleOrder.try_emplace(module, std::numeric_limits<std::int64_t>::max());
        if (!std::binary_search(distributedKeys.begin(), distributedKeys.end(), key)) {
            ++coverage.notCaptured;
            addToGap(notCaptured[module], key);
        }
    }
    for (auto& [module, gap] : notCaptured) {
        gap.moduleTensors = moduleTensors[module];
        gap.order = moduleOrder[module];
    }
    reportGaps(notCaptured, distributedFolder, QStringLiteral("the distributed run"), diagnostics);

    std::map<QString, ModuleGap> notInReference;
    std::map<QString, std::int64_t> distributedModuleTensors;
    std::int64_t ranksRead = 0;
    for (const CatalogTensor& tensor : distributed) {
        const QString module = tensor.key.module();
        ++distributedModuleTensors[module];
        if (!inReference(tensor.key)) {
            ++coverage.notInReference;
            ModuleGap& gap = notInReference[module];
            addToGap(gap, tensor.key);
            // Which ranks hold them: a capture that ran on some ranks only shows here.
            if (ranksRead++ < kTensorsWithRanks) {
                for (const TensorRecord& record :
                     catalog.records(tensor.key).value_or(std::vector<TensorRecord>{})) {
                    gap.ranks.insert(record.rank);
                }
            }
        }
    }
    for (auto& [module, gap] : notInReference) {
        gap.moduleTensors = distributedModuleTensors[module];
    }
    reportGaps(notInReference, trusted.catalog->folder(), QStringLiteral("the reference"),
               diagnostics);
    return coverage;
}

}  // namespace ttrace

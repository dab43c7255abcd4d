#include "mapping/AssembledTensor.h"

#include "mapping/CanonicalMapping.h"

namespace ttrace {

namespace {

Diagnostic tensorNotCompared(const TraceCatalog& catalog, const TensorKey& key,
                             const QString& why) {
    Diagnostic d;
    d.severity = Severity::Error;
    d.file = catalog.folder();
    d.tensor = key.toString();
    d.message = why + QStringLiteral("; tensor not compared");
    return d;
}

}  // namespace

AssembledTensor assembleTensor(const TraceCatalog& catalog, const TensorKey& key) {
    AssembledTensor assembled;
    auto records = catalog.records(key);
    if (!records) {
        assembled.problems.push_back(tensorNotCompared(
            catalog, key,
            QStringLiteral("its records could not be read back from the index cache")));
        return assembled;
    }
    assembled.records = std::move(*records);
    MappingResult mapping = buildLogicalTensors(catalog.manifest(), assembled.records);
    assembled.problems = std::move(mapping.diagnostics);
    if (mapping.tensors.size() == 1 && mapping.tensors.front().key == key) {
        assembled.tensor = std::move(mapping.tensors.front());
    } else if (assembled.problems.empty()) {
        // Listed by the catalog, but its index changed since (another check refilled it).
        assembled.problems.push_back(tensorNotCompared(
            catalog, key,
            QStringLiteral("its records are no longer in the index cache as the trace set was "
                           "opened with")));
    }
    return assembled;
}

}  // namespace ttrace

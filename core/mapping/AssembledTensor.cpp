#include "mapping/AssembledTensor.h"

#include "mapping/CanonicalMapping.h"

namespace ttrace {

AssembledTensor assembleTensor(const TraceCatalog& catalog, const TensorKey& key) {
    AssembledTensor assembled;
    auto records = catalog.records(key);
    if (!records) {
        Diagnostic d;
        d.severity = Severity::Error;
        d.file = catalog.folder();
        d.tensor = key.toString();
        d.message = QStringLiteral(
            "its records could not be read back from the index cache; tensor not compared");
        assembled.problems.push_back(std::move(d));
        return assembled;
    }
    assembled.records = std::move(*records);
    MappingResult mapping = buildLogicalTensors(catalog.manifest(), assembled.records);
    assembled.problems = std::move(mapping.diagnostics);
    if (mapping.tensors.size() == 1 && mapping.tensors.front().key == key) {
        assembled.tensor = std::move(mapping.tensors.front());
    } else if (assembled.problems.empty()) {
        // Listed by the catalog, but its index changed since (another check refilled it).
        Diagnostic d;
        d.severity = Severity::Error;
        d.file = catalog.folder();
        d.tensor = key.toString();
        d.message = QStringLiteral(
            "its records are no longer in the index cache as the trace set was opened with; "
            "tensor not compared");
        assembled.problems.push_back(std::move(d));
    }
    return assembled;
}

}  // namespace ttrace

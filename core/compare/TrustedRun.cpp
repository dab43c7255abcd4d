#include "compare/TrustedRun.h"

#include <algorithm>

#include "mapping/AssembledTensor.h"
#include "mapping/ExecutionOrder.h"

namespace ttrace {

const TrustedTensor* TrustedRun::find(const TensorKey& key) const {
    const auto it = std::lower_bound(
        tensors.begin(), tensors.end(), key,
        [](const TrustedTensor& tensor, const TensorKey& k) { return tensor.key < k; });
    return it != tensors.end() && it->key == key ? &*it : nullptr;
}

TrustedRun outlineTrustedRun(const TraceCatalog& catalog) {
    TrustedRun run;
    run.catalog = &catalog;
    std::vector<OrderedTensor> ordered;
    // The catalog lists its tensors by key, so both lists come out ordered by key.
    for (const CatalogTensor& listed : catalog.tensors()) {
        AssembledTensor assembled = assembleTensor(catalog, listed.key);
        run.diagnostics.insert(run.diagnostics.end(), assembled.problems.begin(),
                               assembled.problems.end());
        if (!assembled.tensor) {
            run.refused.push_back(listed.key);
            continue;
        }
        const LogicalTensor& tensor = *assembled.tensor;
        run.tensors.push_back(TrustedTensor{tensor.key, tensor.globalShape, tensor.dtype,
                                            tensor.layer, tensor.storedBytes(), -1});
        ordered.push_back(orderedTensor(tensor));
    }
    const auto order = executionOrder(ordered);
    for (std::size_t i = 0; i < order.size(); ++i) {
        run.tensors[i].order = order[i];
    }
    return run;
}

}  // namespace ttrace

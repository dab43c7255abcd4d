#include "trace/RankFileIndex.h"

namespace ttrace {

bool concernsTensor(const Diagnostic& d, const TensorKey& key) {
    return d.tensor.isEmpty() || d.tensor == key.toString();
}

RankFileIndex onlyTensor(RankFileIndex index, const TensorKey& key) {
    std::erase_if(index.records, [&key](const TensorRecord& r) { return !(r.key == key); });
    std::erase_if(index.diagnostics,
                  [&key](const Diagnostic& d) { return !concernsTensor(d, key); });
    return index;
}

}  // namespace ttrace

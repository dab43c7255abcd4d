#include "trace/TensorRecord.h"

#include "trace/StoredBox.h"

namespace ttrace {

std::int64_t TensorRecord::storedBytes() const {
    return datasetBytes(dtype, localShape);
}

}  // namespace ttrace

#include "trace/TensorRecord.h"

namespace ttrace {

std::int64_t TensorRecord::storedBytes() const {
    std::int64_t count = 1;
    for (const auto extent : localShape) {
        count *= extent;
    }
    return count * storageBytes(dtype);
}

}  // namespace ttrace

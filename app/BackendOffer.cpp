#include "BackendOffer.h"

#if defined(TTRACE_HAVE_CUDA)
#include "CudaBackend.h"
#endif

namespace ttrace {

CudaProbe cudaProbe() {
#if defined(TTRACE_HAVE_CUDA)
    return [] {
        const gpu::CudaAvailability available = gpu::probeCuda();
        CudaOffer offer;
        if (available.devices.empty()) {
            offer.unavailable = QString::fromStdString(available.reason);
        } else {
            offer.backend = gpu::makeCudaBackend(available);
        }
        return offer;
    };
#else
    return {};
#endif
}

}  // namespace ttrace

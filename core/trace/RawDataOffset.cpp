#include "trace/RawDataOffset.h"

#include "trace/Hdf5Handles.h"

namespace ttrace {

hid_t storedMemoryType(DType dtype) {
    switch (storageBytes(dtype)) {
        case 4:
            return H5T_NATIVE_FLOAT;
        case 2:
            return H5T_NATIVE_UINT16;
        default:
            return H5T_NATIVE_UINT8;
    }
}

std::optional<std::uint64_t> rawDataOffset(hid_t dataset, DType dtype) {
    const hdf5::PropertyList dcpl(H5Dget_create_plist(dataset));
    if (!dcpl || H5Pget_layout(dcpl.get()) != H5D_CONTIGUOUS ||
        H5Pget_external_count(dcpl.get()) != 0) {
        return std::nullopt;
    }
    const hdf5::Datatype fileType(H5Dget_type(dataset));
    if (!fileType || H5Tequal(fileType.get(), storedMemoryType(dtype)) <= 0) {
        return std::nullopt;
    }
    const haddr_t offset = H5Dget_offset(dataset);
    if (offset == HADDR_UNDEF) {
        return std::nullopt;  // never written: HDF5 reads the fill value
    }
    return static_cast<std::uint64_t>(offset);
}

}  // namespace ttrace

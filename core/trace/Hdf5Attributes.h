#pragma once

#include <hdf5.h>

#include <QString>
#include <cstdint>
#include <optional>
#include <vector>

namespace ttrace::hdf5 {

// Reads one attribute of an HDF5 object (file or dataset). On failure the value is empty and
// `problem` says why in words ("is missing", "must be an integer, not a string", ...).
// Strings may be variable-length (h5py's default) or fixed-length; integers any integer type.
struct AttributeReader {
    hid_t object;

    bool exists(const char* name) const;
    std::optional<QString> string(const char* name, QString* problem) const;
    std::optional<std::int64_t> integer(const char* name, QString* problem) const;
    std::optional<double> real(const char* name, QString* problem) const;
    std::optional<std::vector<std::int64_t>> integers(const char* name, QString* problem) const;
};

}  // namespace ttrace::hdf5

#pragma once

#include <hdf5.h>

#include <QString>
#include <utility>

#include "trace/Diagnostic.h"

namespace ttrace::hdf5 {

// Owns one HDF5 identifier and closes it with the matching H5?close function.
template <herr_t (*Close)(hid_t)>
class Handle {
public:
    Handle() = default;
    explicit Handle(hid_t id) : id_(id) {}
    ~Handle() { reset(); }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    Handle(Handle&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)) {}
    Handle& operator=(Handle&& other) noexcept {
        if (this != &other) {
            reset();
            id_ = std::exchange(other.id_, H5I_INVALID_HID);
        }
        return *this;
    }

    hid_t get() const { return id_; }
    bool valid() const { return id_ >= 0; }
    explicit operator bool() const { return valid(); }
    void reset() {
        if (id_ >= 0) {
            Close(id_);
        }
        id_ = H5I_INVALID_HID;
    }

private:
    hid_t id_ = H5I_INVALID_HID;
};

using File = Handle<H5Fclose>;
using Group = Handle<H5Gclose>;
using Dataset = Handle<H5Dclose>;
using Attribute = Handle<H5Aclose>;
using Dataspace = Handle<H5Sclose>;
using Datatype = Handle<H5Tclose>;
using PropertyList = Handle<H5Pclose>;

// Turns off HDF5's printing of its error stack to stderr. The stack is per thread in a
// thread-safe build, so every entry point that calls HDF5 calls this first.
void silenceErrors();

// The innermost messages of the calling thread's HDF5 error stack, so that a diagnostic keeps
// what HDF5 found wrong; clears the stack. Marked as libhdf5's words: appended to a message
// ("attribute 'ranges' cannot be read: " + takeErrorText()), separateLibraryWords() moves
// them from the message into the diagnostic's details. "" when the stack is empty.
QString takeErrorText();

// Moves libhdf5's words (takeErrorText) out of `d.message` into `d.details`, and the ": "
// that introduced them: where diagnostics leave the code that calls libhdf5 (indexRankFile,
// Hdf5Reader::read).
void separateLibraryWords(Diagnostic& d);

// Opens a rank file read-only without taking a file lock (trace folders may live on
// read-only or shared file systems). Invalid handle on failure, with HDF5's reason in `error`.
File openReadOnly(const QString& path, QString* error);

}  // namespace ttrace::hdf5

#pragma once

#include <hdf5.h>

#include <QString>
#include <optional>
#include <string>

#include "trace/Hdf5Handles.h"

// Nothing outside a trace folder is read: a rank file whose contents point at another file
// (an external link, a soft link through one, external storage, a virtual dataset) is refused
// where it says so, and the other file is never opened (trace-format.md, "Nothing outside the
// rank file").
namespace ttrace::hdf5 {

// Access properties that make HDF5 refuse to follow an external link: HDF5 asks before it
// opens the link's file, and the answer is no. The target is kept for the message.
// One per rank file being read; not copyable, since HDF5 holds its address.
class ExternalLinkGuard {
public:
    ExternalLinkGuard();
    ExternalLinkGuard(const ExternalLinkGuard&) = delete;
    ExternalLinkGuard& operator=(const ExternalLinkGuard&) = delete;

    // For H5Lget_info / H5Lexists, H5Gopen2 and H5Dopen2.
    hid_t links() const { return links_.get(); }
    hid_t groups() const { return groups_.get(); }
    hid_t datasets() const { return datasets_.get(); }

    // The external link the last refused traversal met ("/data in the file other.h5"), or
    // empty when none was; clears it.
    QString takeRefused();

private:
    std::string refused_;
    PropertyList links_;
    PropertyList groups_;
    PropertyList datasets_;
};

// Why the link `name` below `location` may not be followed: an external link (its file and
// object named) or a user-defined kind of link; nullopt for hard and soft links (a soft link
// that leads out of the file through an external link is refused by the guard when opened).
[[nodiscard]] std::optional<QString> linkProblem(hid_t location, const char* name,
                                                 const ExternalLinkGuard& guard);

// Why an open dataset's data may not be read: kept in other files (external storage, each
// file named) or mapped from other datasets (a virtual dataset, its sources named). Asks only
// the dataset's creation properties, which opens none of those files.
[[nodiscard]] std::optional<QString> storageProblem(hid_t dataset);

// The message for a link that leads out of the rank file, `refused` as takeRefused() says.
[[nodiscard]] QString leavesTheFile(const QString& refused);

}  // namespace ttrace::hdf5

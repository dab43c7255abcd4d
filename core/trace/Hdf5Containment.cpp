#include "trace/Hdf5Containment.h"

#include <QStringList>
#include <algorithm>
#include <cstring>
#include <vector>

namespace ttrace::hdf5 {

namespace {

// A name read from the file, as a user can read it: damaged files hold names of any length.
QString quoted(const char* text, std::size_t length) {
    constexpr std::size_t kLongest = 200;
    QString name = QString::fromUtf8(text, static_cast<qsizetype>(std::min(length, kLongest)));
    return length > kLongest ? name + QStringLiteral("...") : name;
}

QString target(const char* file, const char* object) {
    return QStringLiteral("%1 in the file %2")
        .arg(quoted(object, std::strlen(object)), quoted(file, std::strlen(file)));
}

herr_t refuseExternalLink(const char* /*parentFile*/, const char* /*parentGroup*/,
                          const char* childFile, const char* childObject, unsigned* /*flags*/,
                          hid_t /*fapl*/, void* data) {
    *static_cast<std::string*>(data) =
        target(childFile ? childFile : "", childObject ? childObject : "").toStdString();
    return -1;  // HDF5 then fails the traversal without opening childFile
}

PropertyList guarded(hid_t propertyClass, std::string* refused) {
    PropertyList list(H5Pcreate(propertyClass));
    if (list && H5Pset_elink_cb(list.get(), refuseExternalLink, refused) < 0) {
        list.reset();
    }
    return list;
}

// "a.bin", "a.bin and b.bin", "a.bin, b.bin, c.bin and 4 more"
QString listed(const QStringList& names, std::size_t total) {
    if (names.isEmpty()) {
        return QStringLiteral("%1 whose names cannot be read").arg(total);
    }
    QString text = names.mid(0, names.size() - 1).join(QStringLiteral(", "));
    if (total > static_cast<std::size_t>(names.size())) {
        return names.join(QStringLiteral(", ")) +
               QStringLiteral(" and %1 more").arg(total - static_cast<std::size_t>(names.size()));
    }
    return names.size() == 1 ? names.front() : text + QStringLiteral(" and ") + names.back();
}

constexpr std::size_t kNamed = 3;
const char* const kWhy =
    "a rank file must hold its tensors' data itself, and nothing outside a trace folder is read";

}  // namespace

ExternalLinkGuard::ExternalLinkGuard()
    : links_(guarded(H5P_LINK_ACCESS, &refused_)),
      groups_(guarded(H5P_GROUP_ACCESS, &refused_)),
      datasets_(guarded(H5P_DATASET_ACCESS, &refused_)) {}

QString ExternalLinkGuard::takeRefused() {
    QString text = QString::fromStdString(refused_);
    refused_.clear();
    return text;
}

std::optional<QString> linkProblem(hid_t location, const char* name,
                                   const ExternalLinkGuard& guard) {
    H5L_info_t info{};
    if (H5Lget_info(location, name, &info, guard.links()) < 0) {
        return std::nullopt;  // opening it says why, in its own words
    }
    if (info.type == H5L_TYPE_HARD || info.type == H5L_TYPE_SOFT) {
        return std::nullopt;
    }
    if (info.type == H5L_TYPE_EXTERNAL) {
        std::vector<char> value(info.u.val_size + 1, '\0');
        unsigned flags = 0;
        const char* file = nullptr;
        const char* object = nullptr;
        if (H5Lget_val(location, name, value.data(), info.u.val_size, guard.links()) >= 0 &&
            H5Lunpack_elink_val(value.data(), info.u.val_size, &flags, &file, &object) >= 0 &&
            file && object) {
            return QStringLiteral(
                       "is an external link to %1, outside this rank file: %2; the "
                       "link was not followed")
                .arg(target(file, object), QLatin1String(kWhy));
        }
        return QStringLiteral(
                   "is an external link (to a file its value does not say), outside "
                   "this rank file: %1; the link was not followed")
            .arg(QLatin1String(kWhy));
    }
    return QStringLiteral(
               "is a user-defined link (type %1), not a dataset: %2; the link was not "
               "followed")
        .arg(static_cast<int>(info.type))
        .arg(QLatin1String(kWhy));
}

std::optional<QString> storageProblem(hid_t dataset) {
    const PropertyList dcpl(H5Dget_create_plist(dataset));
    if (!dcpl) {
        return QStringLiteral("has unreadable storage properties: ") + takeErrorText();
    }
    if (H5Pget_layout(dcpl.get()) == H5D_VIRTUAL) {
        std::size_t count = 0;
        H5Pget_virtual_count(dcpl.get(), &count);
        QStringList sources;
        for (std::size_t i = 0; i < count && i < kNamed; ++i) {
            char file[4096] = {};
            char object[4096] = {};
            const ssize_t fileLength = H5Pget_virtual_filename(dcpl.get(), i, file, sizeof file);
            const ssize_t objectLength =
                H5Pget_virtual_dsetname(dcpl.get(), i, object, sizeof object);
            if (fileLength < 0 || objectLength < 0) {
                continue;
            }
            sources << (QByteArrayView(file) == QByteArrayView(".")
                            ? QStringLiteral("%1 in this rank file")
                                  .arg(quoted(object, static_cast<std::size_t>(objectLength)))
                            : target(file, object));
        }
        return QStringLiteral(
                   "is a virtual dataset, a view of %1%2, not data of its own: %3; "
                   "its sources were not opened")
            .arg(sources.isEmpty() ? QStringLiteral("other datasets") : listed(sources, count),
                 count > 1 ? QStringLiteral(" (%1 sources)").arg(count) : QString(),
                 QLatin1String(kWhy));
    }
    const int external = H5Pget_external_count(dcpl.get());
    if (external > 0) {
        QStringList files;
        for (unsigned i = 0; i < static_cast<unsigned>(external) && i < kNamed; ++i) {
            char name[4096] = {};
            off_t offset = 0;
            hsize_t size = 0;
            if (H5Pget_external(dcpl.get(), i, sizeof name - 1, name, &offset, &size) >= 0) {
                files << quoted(name, std::strlen(name));
            }
        }
        return QStringLiteral(
                   "keeps its data outside this rank file, in %1 %2 (HDF5 external "
                   "storage): %3; %4 not opened")
            .arg(external == 1 ? QStringLiteral("the file") : QStringLiteral("the files"),
                 listed(files, static_cast<std::size_t>(external)), QLatin1String(kWhy),
                 external == 1 ? QStringLiteral("it was") : QStringLiteral("they were"));
    }
    return std::nullopt;
}

QString leavesTheFile(const QString& refused) {
    return QStringLiteral(
               "leads out of this rank file through an external link to %1: %2; the "
               "link was not followed")
        .arg(refused, QLatin1String(kWhy));
}

}  // namespace ttrace::hdf5

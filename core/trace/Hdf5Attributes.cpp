#include "trace/Hdf5Attributes.h"

#include "trace/Hdf5Handles.h"

namespace ttrace::hdf5 {

namespace {

QString className(H5T_class_t typeClass) {
    switch (typeClass) {
        case H5T_INTEGER:
            return QStringLiteral("an integer");
        case H5T_FLOAT:
            return QStringLiteral("a float");
        case H5T_STRING:
            return QStringLiteral("a string");
        case H5T_ENUM:
            return QStringLiteral("an enum");
        case H5T_COMPOUND:
            return QStringLiteral("a compound");
        case H5T_ARRAY:
            return QStringLiteral("an array type");
        default:
            break;
    }
    return QStringLiteral("an unsupported HDF5 type");
}

// An open attribute with its file type and element count.
struct OpenAttribute {
    Attribute attribute;
    Datatype type;
    H5T_class_t typeClass = H5T_NO_CLASS;
    hssize_t elements = -1;  // -1 when the dataspace is H5S_NULL (h5py's empty)
};

std::optional<OpenAttribute> open(hid_t object, const char* name, QString* problem) {
    const htri_t exists = H5Aexists(object, name);
    if (exists <= 0) {
        *problem = exists == 0 ? QStringLiteral("is missing")
                               : QStringLiteral("cannot be looked up: ") + takeErrorText();
        return std::nullopt;
    }
    OpenAttribute out;
    out.attribute = Attribute(H5Aopen(object, name, H5P_DEFAULT));
    if (!out.attribute) {
        *problem = QStringLiteral("cannot be opened: ") + takeErrorText();
        return std::nullopt;
    }
    out.type = Datatype(H5Aget_type(out.attribute.get()));
    const Dataspace space(H5Aget_space(out.attribute.get()));
    if (!out.type || !space) {
        *problem = QStringLiteral("cannot be read: ") + takeErrorText();
        return std::nullopt;
    }
    out.typeClass = H5Tget_class(out.type.get());
    if (H5Sget_simple_extent_type(space.get()) != H5S_NULL) {
        out.elements = H5Sget_simple_extent_npoints(space.get());
    }
    return out;
}

bool expectSingle(const OpenAttribute& attribute, QString* problem) {
    if (attribute.elements != 1) {
        *problem = QStringLiteral("must hold one value, not %1")
                       .arg(std::max<hssize_t>(attribute.elements, 0));
        return false;
    }
    return true;
}

}  // namespace

bool AttributeReader::exists(const char* name) const {
    return H5Aexists(object, name) > 0;
}

std::optional<QString> AttributeReader::string(const char* name, QString* problem) const {
    auto attribute = open(object, name, problem);
    if (!attribute) {
        return std::nullopt;
    }
    if (attribute->typeClass != H5T_STRING) {
        *problem = QStringLiteral("must be a string, not %1").arg(className(attribute->typeClass));
        return std::nullopt;
    }
    if (!expectSingle(*attribute, problem)) {
        return std::nullopt;
    }
    const hid_t fileType = attribute->type.get();
    const H5T_cset_t cset = H5Tget_cset(fileType);
    Datatype memType(H5Tcopy(H5T_C_S1));
    H5Tset_cset(memType.get(), cset == H5T_CSET_ERROR ? H5T_CSET_ASCII : cset);

    const htri_t variable = H5Tis_variable_str(fileType);
    if (variable > 0) {
        H5Tset_size(memType.get(), H5T_VARIABLE);
        char* text = nullptr;
        if (H5Aread(attribute->attribute.get(), memType.get(), &text) < 0) {
            *problem = QStringLiteral("cannot be read: ") + takeErrorText();
            return std::nullopt;
        }
        QString value = text ? QString::fromUtf8(text) : QString();
        H5free_memory(text);
        return value;
    }
    const std::size_t size = H5Tget_size(fileType);
    if (variable < 0 || size == 0) {
        *problem = QStringLiteral("has an unreadable string type: ") + takeErrorText();
        return std::nullopt;
    }
    // A damaged type can claim any length; no attribute of the format comes near this.
    constexpr std::size_t kMaxStringBytes = std::size_t{16} << 20;
    if (size > kMaxStringBytes) {
        *problem = QStringLiteral(
                       "is a string of %1 bytes, longer than any attribute of the "
                       "format (at most %2 are read)")
                       .arg(size)
                       .arg(kMaxStringBytes);
        return std::nullopt;
    }
    // Fixed-length strings may be null-padded, null-terminated or space-padded; read the raw
    // bytes and trim the padding.
    H5Tset_size(memType.get(), size);
    H5Tset_strpad(memType.get(), H5T_STR_NULLPAD);
    QByteArray bytes(static_cast<qsizetype>(size), '\0');
    if (H5Aread(attribute->attribute.get(), memType.get(), bytes.data()) < 0) {
        *problem = QStringLiteral("cannot be read: ") + takeErrorText();
        return std::nullopt;
    }
    const auto nul = bytes.indexOf('\0');
    if (nul >= 0) {
        bytes.truncate(nul);
    }
    if (H5Tget_strpad(fileType) == H5T_STR_SPACEPAD) {
        while (bytes.endsWith(' ')) {
            bytes.chop(1);
        }
    }
    return QString::fromUtf8(bytes);
}

std::optional<std::int64_t> AttributeReader::integer(const char* name, QString* problem) const {
    auto attribute = open(object, name, problem);
    if (!attribute) {
        return std::nullopt;
    }
    if (attribute->typeClass != H5T_INTEGER) {
        *problem =
            QStringLiteral("must be an integer, not %1").arg(className(attribute->typeClass));
        return std::nullopt;
    }
    if (!expectSingle(*attribute, problem)) {
        return std::nullopt;
    }
    std::int64_t value = 0;
    if (H5Aread(attribute->attribute.get(), H5T_NATIVE_INT64, &value) < 0) {
        *problem = QStringLiteral("cannot be read as a 64-bit integer: ") + takeErrorText();
        return std::nullopt;
    }
    return value;
}

std::optional<double> AttributeReader::real(const char* name, QString* problem) const {
    auto attribute = open(object, name, problem);
    if (!attribute) {
        return std::nullopt;
    }
    if (attribute->typeClass != H5T_FLOAT && attribute->typeClass != H5T_INTEGER) {
        *problem = QStringLiteral("must be a number, not %1").arg(className(attribute->typeClass));
        return std::nullopt;
    }
    if (!expectSingle(*attribute, problem)) {
        return std::nullopt;
    }
    double value = 0.0;
    if (H5Aread(attribute->attribute.get(), H5T_NATIVE_DOUBLE, &value) < 0) {
        *problem = QStringLiteral("cannot be read as a number: ") + takeErrorText();
        return std::nullopt;
    }
    return value;
}

std::optional<std::vector<std::int64_t>> AttributeReader::integers(const char* name,
                                                                   QString* problem) const {
    auto attribute = open(object, name, problem);
    if (!attribute) {
        return std::nullopt;
    }
    if (attribute->typeClass != H5T_INTEGER) {
        *problem =
            QStringLiteral("must be an integer array, not %1").arg(className(attribute->typeClass));
        return std::nullopt;
    }
    // A damaged dataspace can claim any count: the vector is made only for what a shape holds.
    constexpr hssize_t kMaxIntegers = 4096;
    if (attribute->elements > kMaxIntegers) {
        *problem = QStringLiteral("holds %1 integers, more than any shape (at most %2 are read)")
                       .arg(attribute->elements)
                       .arg(kMaxIntegers);
        return std::nullopt;
    }
    std::vector<std::int64_t> values(
        static_cast<std::size_t>(std::max<hssize_t>(attribute->elements, 0)));
    if (values.empty()) {
        return values;  // a 0-d tensor's shape
    }
    if (H5Aread(attribute->attribute.get(), H5T_NATIVE_INT64, values.data()) < 0) {
        *problem = QStringLiteral("cannot be read as 64-bit integers: ") + takeErrorText();
        return std::nullopt;
    }
    return values;
}

}  // namespace ttrace::hdf5

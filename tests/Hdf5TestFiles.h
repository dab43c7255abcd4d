#pragma once

#include <hdf5.h>

#include <QByteArray>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QString>
#include <cstdint>
#include <vector>

// Writes rank files through the HDF5 C API for the cases the Python writer (h5py) never
// produces: fixed-length string attributes, 32-bit integer attributes, fp8/fp16 words,
// repeated seq numbers. Only for tests of the reader's tolerance of valid variations.
namespace ttrace::test {

class RankFileWriter {
public:
    RankFileWriter(const QString& path, int rank) {
        file_ =
            H5Fcreate(QFile::encodeName(path).constData(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        fixedString(file_, "format_version", "1.0");
        int32(file_, "rank", rank);
        group_ = H5Gcreate2(file_, "tensors", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    }
    ~RankFileWriter() {
        H5Gclose(group_);
        H5Fclose(file_);
    }
    RankFileWriter(const RankFileWriter&) = delete;
    RankFileWriter& operator=(const RankFileWriter&) = delete;

    bool valid() const { return file_ >= 0 && group_ >= 0; }
    hid_t file() const { return file_; }

    // Creates /tensors/NAME of `fileType` with `dims`, written from `data` in `memType`.
    // Returns the dataset id; close it with H5Dclose after adding attributes.
    // `createPlist` sets the storage (chunks, filters); `data` null leaves it unwritten.
    hid_t dataset(const char* name, hid_t fileType, hid_t memType, const std::vector<hsize_t>& dims,
                  const void* data, hid_t createPlist = H5P_DEFAULT) {
        const hid_t space =
            dims.empty() ? H5Screate(H5S_SCALAR)
                         : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
        const hid_t dataset =
            H5Dcreate2(group_, name, fileType, space, H5P_DEFAULT, createPlist, H5P_DEFAULT);
        if (data) {
            H5Dwrite(dataset, memType, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
        }
        H5Sclose(space);
        return dataset;
    }

    // Per-block fp8 scales of /tensors/NAME: its 'scale_block' attribute and the float64
    // dataset /scale_inv/NAME of shape `grid` (trace-format.md).
    void blockScales(hid_t dataset, const char* name, const std::vector<std::int32_t>& block,
                     const std::vector<hsize_t>& grid, const std::vector<double>& scales) {
        int32Array(dataset, "scale_block", block);
        if (H5Lexists(file_, "scale_inv", H5P_DEFAULT) <= 0) {
            H5Gclose(H5Gcreate2(file_, "scale_inv", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
        }
        const hid_t group = H5Gopen2(file_, "scale_inv", H5P_DEFAULT);
        const hid_t space = H5Screate_simple(static_cast<int>(grid.size()), grid.data(), nullptr);
        const hid_t data =
            H5Dcreate2(group, name, H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        H5Dwrite(data, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, scales.data());
        H5Dclose(data);
        H5Sclose(space);
        H5Gclose(group);
    }

    static void fixedString(hid_t object, const char* name, const QByteArray& value) {
        const hid_t type = H5Tcopy(H5T_C_S1);
        // Space-padded and longer than the text, to exercise the padding rules.
        H5Tset_size(type, static_cast<std::size_t>(value.size()) + 3);
        H5Tset_strpad(type, H5T_STR_SPACEPAD);
        QByteArray padded = value + QByteArray(3, ' ');
        write(object, name, type, H5Screate(H5S_SCALAR), padded.constData());
        H5Tclose(type);
    }
    static void variableString(hid_t object, const char* name, const QByteArray& value) {
        const hid_t type = H5Tcopy(H5T_C_S1);
        H5Tset_size(type, H5T_VARIABLE);
        H5Tset_cset(type, H5T_CSET_UTF8);
        const char* text = value.constData();
        write(object, name, type, H5Screate(H5S_SCALAR), &text);
        H5Tclose(type);
    }
    static void int32(hid_t object, const char* name, std::int32_t value) {
        write(object, name, H5T_STD_I32LE, H5Screate(H5S_SCALAR), &value, H5T_NATIVE_INT32);
    }
    static void uint8(hid_t object, const char* name, std::uint8_t value) {
        write(object, name, H5T_STD_U8LE, H5Screate(H5S_SCALAR), &value, H5T_NATIVE_UINT8);
    }
    static void float64(hid_t object, const char* name, double value) {
        write(object, name, H5T_IEEE_F64LE, H5Screate(H5S_SCALAR), &value, H5T_NATIVE_DOUBLE);
    }
    static void int32Array(hid_t object, const char* name, const std::vector<std::int32_t>& v) {
        const hsize_t n = v.size();
        write(object, name, H5T_STD_I32LE, H5Screate_simple(1, &n, nullptr), v.data(),
              H5T_NATIVE_INT32);
    }

    // The attributes every dataset needs, with fixed-length strings and 32-bit integers.
    static void standardAttributes(hid_t dataset, const QByteArray& name, const QByteArray& kind,
                                   std::int32_t seq, const QByteArray& dtype,
                                   const std::vector<std::int32_t>& globalShape) {
        fixedString(dataset, "name", name);
        fixedString(dataset, "kind", kind);
        int32(dataset, "index", 0);
        int32(dataset, "iteration", 0);
        int32(dataset, "micro_batch", kind == "param" ? -1 : 0);
        int32(dataset, "seq", seq);
        uint8(dataset, "layer", 0);  // any integer type is accepted
        int32(dataset, "expert", -1);
        fixedString(dataset, "dtype", dtype);
        int32Array(dataset, "global_shape", globalShape);
    }

private:
    static void write(hid_t object, const char* name, hid_t fileType, hid_t space, const void* data,
                      hid_t memType = -1) {
        const hid_t attribute = H5Acreate2(object, name, fileType, space, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(attribute, memType < 0 ? fileType : memType, data);
        H5Aclose(attribute);
        H5Sclose(space);
    }

    hid_t file_ = -1;
    hid_t group_ = -1;
};

// A manifest.json for `worldSize` ranks on one mesh axis `axis` (empty axis: a reference); a
// perturbed reference says it was perturbed by bf16's unit round-off.
inline bool writeManifest(const QString& folder, int worldSize, const QString& axis,
                          const QString& role = QStringLiteral("distributed")) {
    QJsonArray ranks;
    for (int r = 0; r < worldSize; ++r) {
        ranks.append(QJsonObject{
            {QStringLiteral("rank"), r},
            {QStringLiteral("file"), QStringLiteral("rank%1.h5").arg(r, 5, 10, QLatin1Char('0'))},
            {QStringLiteral("coords"), axis.isEmpty() ? QJsonArray{} : QJsonArray{r}}});
    }
    QJsonObject manifest{
        {QStringLiteral("format"), QStringLiteral("ttrace")},
        {QStringLiteral("format_version"), QStringLiteral("1.0")},
        {QStringLiteral("role"), role},
        {QStringLiteral("capture_tool"),
         QJsonObject{{QStringLiteral("name"), QStringLiteral("test")},
                     {QStringLiteral("version"), QStringLiteral("0")}}},
        {QStringLiteral("world_size"), worldSize},
        {QStringLiteral("parallel"), QJsonObject{{QStringLiteral("tp"), worldSize},
                                                 {QStringLiteral("pp"), 1},
                                                 {QStringLiteral("vpp"), 1},
                                                 {QStringLiteral("dp"), 1},
                                                 {QStringLiteral("cp"), 1},
                                                 {QStringLiteral("ep"), 1},
                                                 {QStringLiteral("sp"), false}}},
        {QStringLiteral("mesh"),
         QJsonObject{
             {QStringLiteral("axes"), axis.isEmpty() ? QJsonArray{} : QJsonArray{axis}},
             {QStringLiteral("shape"), axis.isEmpty() ? QJsonArray{} : QJsonArray{worldSize}}}},
        {QStringLiteral("ranks"), ranks},
        {QStringLiteral("dtype"), QJsonObject{{QStringLiteral("recipe"), QStringLiteral("fp8")},
                                              {QStringLiteral("compute"), QStringLiteral("bf16")}}},
        {QStringLiteral("model"), QJsonObject{{QStringLiteral("num_layers"), 1}}},
        {QStringLiteral("capture"), QJsonObject{{QStringLiteral("iterations"), QJsonArray{0}},
                                                {QStringLiteral("micro_batches"), 1}}},
    };
    if (role == QStringLiteral("perturbed-reference")) {
        manifest[QStringLiteral("perturbation")] =
            QJsonObject{{QStringLiteral("relative"), 0.00390625}, {QStringLiteral("seed"), 1}};
    }
    QFile file(folder + QStringLiteral("/manifest.json"));
    if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate)) {
        return false;
    }
    return file.write(QJsonDocument(manifest).toJson()) > 0;
}

}  // namespace ttrace::test

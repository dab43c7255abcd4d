#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QJsonParseError>
#include <QStringList>
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "trace/FileStamp.h"
#include "trace/Hdf5Attributes.h"
#include "trace/Hdf5Containment.h"
#include "trace/Hdf5Handles.h"
#include "trace/Hdf5Step.h"
#include "trace/Manifest.h"
#include "trace/RankFileIndex.h"
#include "trace/RawDataOffset.h"
#include "trace/ScaleFormat.h"
#include "trace/ShapeText.h"
#include "trace/StoredBox.h"

namespace ttrace {

namespace {

// "{tp: Shard(1), dp: Replicate}"
QString placementsText(const std::vector<AxisPlacement>& placements) {
    QStringList parts;
    for (const auto& p : placements) {
        parts << p.axis + QStringLiteral(": ") + p.placement.toString();
    }
    return QLatin1Char('{') + parts.join(QStringLiteral(", ")) + QLatin1Char('}');
}

// Indexes one dataset of a rank file, collecting every problem rather than stopping at the
// first, so that the user sees all of them at once.
class DatasetIndexer {
public:
    DatasetIndexer(const QString& file, const QByteArray& name, hdf5::ExternalLinkGuard& guard,
                   Hdf5Trail* trail)
        : file_(file),
          name_(name),
          dataset_(QStringLiteral("/tensors/") + QString::fromUtf8(name)),
          datasetPath_(dataset_.toUtf8()),
          guard_(guard),
          trail_(trail) {}

    std::optional<TensorRecord> index(hid_t group, const QByteArray& name) {
        mark(Hdf5Step::OpeningDataset);
        // Nothing outside the trace folder is read: links out of the file are not followed,
        // data kept elsewhere is not read, before anything else is asked of the dataset.
        if (auto problem = hdf5::linkProblem(group, name.constData(), guard_)) {
            error(*problem);
            return std::nullopt;
        }
        const hdf5::Dataset dataset(H5Dopen2(group, name.constData(), guard_.datasets()));
        if (!dataset) {
            const QString refused = guard_.takeRefused();
            error(refused.isEmpty()
                      ? QStringLiteral("cannot be opened as a dataset: ") + hdf5::takeErrorText()
                      : hdf5::leavesTheFile(refused));
            return std::nullopt;
        }
        TensorRecord record;
        record.file = file_;
        record.dataset = dataset_;
        const auto outside = hdf5::storageProblem(dataset.get());
        mark(Hdf5Step::ReadingAttributes);
        readIdentity(dataset.get(), record);
        if (outside) {
            // The refusal alone, naming the tensor where the attributes can.
            diagnostics_.clear();
            error(*outside);
            nameTensor(record);
            return std::nullopt;
        }
        readLayout(dataset.get(), record);
        mark(Hdf5Step::ReadingScales);
        readScales(dataset.get(), record);
        if (diagnostics_.empty()) {
            checkScaleFormat(dataset.get(), record);
        }
        if (diagnostics_.empty()) {
            applyTensorScale(dataset.get(), record);
        }
        const bool ok = diagnostics_.empty();
        if (ok) {
            mark(Hdf5Step::LocatingData);
            record.dataOffset = rawDataOffset(dataset.get(), record.dtype);
        }
        nameTensor(record);
        if (!ok) {
            return std::nullopt;
        }
        return record;
    }

    Diagnostics takeDiagnostics() { return std::move(diagnostics_); }

private:
    void nameTensor(const TensorRecord& record) {
        if (keyKnown_) {
            for (auto& d : diagnostics_) {
                d.tensor = record.key.toString();
            }
        }
    }
    void mark(Hdf5Step step) {
        markStep(trail_, step, std::string_view(datasetPath_.constData(), datasetPath_.size()));
    }
    void error(const QString& message) {
        Diagnostic d;
        d.severity = Severity::Error;
        d.file = file_;
        d.dataset = dataset_;
        d.message = message;
        diagnostics_.push_back(std::move(d));
    }
    void attributeError(const char* attribute, const QString& problem) {
        error(QStringLiteral("attribute '%1' %2").arg(QLatin1String(attribute), problem));
    }

    std::optional<int> smallInteger(const hdf5::AttributeReader& attrs, const char* attribute) {
        QString problem;
        const auto value = attrs.integer(attribute, &problem);
        if (!value) {
            attributeError(attribute, problem);
            return std::nullopt;
        }
        if (*value < std::numeric_limits<int>::min() || *value > std::numeric_limits<int>::max()) {
            attributeError(attribute, QStringLiteral("is %1, out of range").arg(*value));
            return std::nullopt;
        }
        return static_cast<int>(*value);
    }

    void readIdentity(hid_t dataset, TensorRecord& record) {
        const hdf5::AttributeReader attrs{dataset};
        QString problem;
        bool keyOk = true;
        if (const auto name = attrs.string("name", &problem); name && !name->isEmpty()) {
            record.key.name = *name;
        } else {
            attributeError("name", name ? QStringLiteral("is empty") : problem);
            keyOk = false;
        }
        if (const auto kind = attrs.string("kind", &problem)) {
            if (const auto parsed = tensorKindFromName(*kind)) {
                record.key.kind = *parsed;
            } else {
                attributeError("kind",
                               QStringLiteral("is '%1', not a known tensor kind").arg(*kind));
                keyOk = false;
            }
        } else {
            attributeError("kind", problem);
            keyOk = false;
        }
        const auto index = smallInteger(attrs, "index");
        const auto iteration = smallInteger(attrs, "iteration");
        const auto microBatch = smallInteger(attrs, "micro_batch");
        keyOk = keyOk && index && iteration && microBatch;
        record.key.index = index.value_or(0);
        record.key.iteration = iteration.value_or(0);
        record.key.microBatch = microBatch.value_or(0);
        keyKnown_ = keyOk;

        if (const auto seq = attrs.integer("seq", &problem)) {
            record.seq = *seq;
        } else {
            attributeError("seq", problem);
        }
        record.layer = smallInteger(attrs, "layer").value_or(-1);
        record.expert = smallInteger(attrs, "expert").value_or(-1);

        if (const auto dtype = attrs.string("dtype", &problem)) {
            if (const auto parsed = dtypeFromName(*dtype)) {
                record.dtype = *parsed;
                dtypeKnown_ = true;
            } else {
                attributeError("dtype", QStringLiteral("is '%1', not fp32, fp16, bf16, fp8_e4m3, "
                                                       "fp8_e5m2 or fp4_e2m1")
                                            .arg(*dtype));
            }
        } else {
            attributeError("dtype", problem);
        }
    }

    // fp8 and fp4: per tensor, the scalar attribute scale_inv; per block, the attribute
    // scale_block and the dataset /scale_inv/<name> holding one scale_inv per block.
    void readScales(hid_t dataset, TensorRecord& record) {
        if (!dtypeKnown_ || !isScaled(record.dtype)) {
            return;
        }
        const hdf5::AttributeReader attrs{dataset};
        QString problem;
        if (!attrs.exists("scale_block")) {
            if (const auto scale = attrs.real("scale_inv", &problem)) {
                if (!std::isfinite(*scale) || *scale <= 0.0) {
                    attributeError(
                        "scale_inv",
                        QStringLiteral("is %1, not a positive finite number").arg(*scale));
                }
                record.scales.scaleInv = {*scale};
            } else {
                attributeError("scale_inv", problem + QStringLiteral(" (required for fp8)"));
            }
            return;
        }
        if (attrs.exists("scale_inv")) {
            error(
                QStringLiteral("has both a per-tensor 'scale_inv' and a 'scale_block': one "
                               "scaling, not two"));
            return;
        }
        const auto block = attrs.integers("scale_block", &problem);
        if (!block) {
            attributeError("scale_block", problem);
            return;
        }
        if (block->size() != record.localShape.size() ||
            std::any_of(block->begin(), block->end(), [](auto e) { return e < 1; })) {
            attributeError("scale_block",
                           QStringLiteral("%1 must give a block extent of at least 1 for each of "
                                          "the dataset's %2 dimensions")
                               .arg(formatShape(*block))
                               .arg(record.localShape.size()));
            return;
        }
        BlockScales scales;
        scales.block = *block;
        const auto grid = scales.grid(record.localShape);
        const QByteArray path = QByteArrayLiteral("/scale_inv/") + name_;
        const QString where = QStringLiteral("its scales dataset ") + QString::fromUtf8(path);
        if (auto outside = hdf5::linkProblem(dataset, path.constData(), guard_)) {
            error(where + QLatin1Char(' ') + *outside);
            return;
        }
        const hdf5::Dataset data(H5Dopen2(dataset, path.constData(), guard_.datasets()));
        if (!data) {
            const QString refused = guard_.takeRefused();
            error(refused.isEmpty()
                      ? QString(where +
                                QStringLiteral(" (required by 'scale_block') cannot be "
                                               "opened: ") +
                                hdf5::takeErrorText())
                      : QString(where + QLatin1Char(' ') + hdf5::leavesTheFile(refused)));
            return;
        }
        if (auto outside = hdf5::storageProblem(data.get())) {
            error(where + QLatin1Char(' ') + *outside);
            return;
        }
        const hdf5::Datatype type(H5Dget_type(data.get()));
        const hdf5::Dataspace space(H5Dget_space(data.get()));
        const int rank = space ? H5Sget_simple_extent_ndims(space.get()) : -1;
        if (!type || H5Tget_class(type.get()) != H5T_FLOAT || rank < 0) {
            error(where + QStringLiteral(" must hold floats"));
            return;
        }
        std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
        H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
        if (!std::equal(dims.begin(), dims.end(), grid.begin(), grid.end())) {
            error(where + QStringLiteral(" has shape %1, but blocks of %2 tile the dataset's "
                                         "shape %3 in %4")
                              .arg(formatShape(std::vector<std::int64_t>(dims.begin(), dims.end())),
                                   formatShape(*block), formatShape(record.localShape),
                                   formatShape(grid)));
            return;
        }
        // A damaged local shape can claim more blocks than memory holds; real recipes have a
        // few per row at most.
        constexpr std::size_t kMaxBlocks = std::size_t{1} << 28;
        std::size_t count = 1;
        bool tooMany = false;
        for (const auto extent : grid) {
            const auto blocks = static_cast<std::size_t>(extent);
            tooMany = tooMany || (blocks > 0 && count > kMaxBlocks / blocks);
            count *= tooMany ? 1 : blocks;
        }
        if (tooMany && count > 0) {
            error(where + QStringLiteral(" would hold more than %1 scales").arg(kMaxBlocks));
            return;
        }
        scales.scaleInv.assign(count, 0.0);
        if (count > 0 && H5Dread(data.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                                 scales.scaleInv.data()) < 0) {
            error(where + QStringLiteral(" cannot be read: ") + hdf5::takeErrorText());
            return;
        }
        const auto bad = std::find_if(scales.scaleInv.begin(), scales.scaleInv.end(),
                                      [](double s) { return !std::isfinite(s) || s <= 0.0; });
        if (bad != scales.scaleInv.end()) {
            error(where + QStringLiteral(" holds %1 at flat index %2, not a positive finite "
                                         "scale_inv")
                              .arg(*bad)
                              .arg(bad - scales.scaleInv.begin()));
            return;
        }
        record.scales = std::move(scales);
    }

    // fp8 and fp4: the format the recipe stored its scales in, where the dataset says one
    // (trace-format.md, `scale_format`). MX recipes' E8M0 scales are powers of two, NVFP4's
    // E4M3 block scales fp8 e4m3 numbers; one the format cannot hold was not what the GEMM
    // used: the recipe or the capture wrote another number.
    void checkScaleFormat(hid_t dataset, TensorRecord& record) {
        if (!dtypeKnown_ || !isScaled(record.dtype)) {
            return;
        }
        const hdf5::AttributeReader attrs{dataset};
        if (!attrs.exists("scale_format")) {
            return;  // float64 scales, whatever the recipe rounded them to
        }
        QString problem;
        const auto format = attrs.string("scale_format", &problem);
        if (!format) {
            attributeError("scale_format", problem);
            return;
        }
        const auto parsed = scaleFormatFromName(*format);
        if (!parsed) {
            attributeError("scale_format",
                           QStringLiteral("is '%1', not e8m0 or e4m3").arg(*format));
            return;
        }
        const auto& scales = record.scales.scaleInv;
        const auto outside = std::find_if(scales.begin(), scales.end(),
                                          [&](double s) { return !holdsScale(*parsed, s); });
        if (outside != scales.end()) {
            const QString where = record.scales.perTensor()
                                      ? QString()
                                      : QStringLiteral(" (at flat index %1 of /scale_inv/%2)")
                                            .arg(outside - scales.begin())
                                            .arg(QString::fromUtf8(name_));
            error(QStringLiteral("its scale_format is %1, but its scale_inv %2%3 is not %4")
                      .arg(*format, QString::number(*outside, 'g', 17), where,
                           scaleFormatRange(*parsed)));
            return;
        }
        record.scales.format = parsed;
    }

    // Two-level scaling (NVFP4, fp4 only): the attribute tensor_scale_inv multiplies every block's
    // scale_inv. It is folded into them here, exactly (an E4M3 scale times an fp32 one fits
    // in float64), so that the scales compared and applied are the ones each block decodes by.
    void applyTensorScale(hid_t dataset, TensorRecord& record) {
        const hdf5::AttributeReader attrs{dataset};
        if (!attrs.exists("tensor_scale_inv")) {
            return;
        }
        if (!dtypeKnown_) {
            return;  // the dtype's own error says enough
        }
        if (record.dtype != DType::FP4E2M1 || record.scales.perTensor()) {
            attributeError("tensor_scale_inv",
                           record.dtype == DType::FP4E2M1
                               ? QStringLiteral("is given without 'scale_block': it scales "
                                                "per-block scales")
                               : QStringLiteral("is given for a %1 tensor: it scales the block "
                                                "scales of fp4 tensors (NVFP4)")
                                     .arg(dtypeName(record.dtype)));
            return;
        }
        QString problem;
        const auto scale = attrs.real("tensor_scale_inv", &problem);
        if (!scale) {
            attributeError("tensor_scale_inv", problem);
            return;
        }
        if (!std::isfinite(*scale) || *scale <= 0.0) {
            attributeError("tensor_scale_inv",
                           QStringLiteral("is %1, not a positive finite number").arg(*scale));
            return;
        }
        for (double& s : record.scales.scaleInv) {
            s *= *scale;
        }
        record.scales.tensorScale = true;
    }

    void readLayout(hid_t dataset, TensorRecord& record) {
        checkStorage(dataset, record);

        const hdf5::Dataspace space(H5Dget_space(dataset));
        const int rank = space ? H5Sget_simple_extent_ndims(space.get()) : -1;
        if (rank < 0) {
            error(QStringLiteral("has an unreadable shape: ") + hdf5::takeErrorText());
            return;
        }
        std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
        H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
        const std::vector<std::int64_t> words(dims.begin(), dims.end());
        if (dtypeKnown_ && elementsPerWord(record.dtype) > 1 && words.empty()) {
            error(QStringLiteral("is %1 without dimensions: fp4 packs two elements a byte "
                                 "along the last dimension, so it needs one")
                      .arg(dtypeName(record.dtype)));
            return;
        }
        record.localShape = dtypeKnown_ ? elementShape(record.dtype, words) : words;

        const hdf5::AttributeReader attrs{dataset};
        QString problem;
        const auto global = attrs.integers("global_shape", &problem);
        if (!global) {
            attributeError("global_shape", problem);
            return;
        }
        if (std::any_of(global->begin(), global->end(), [](auto e) { return e < 0; })) {
            attributeError("global_shape",
                           QStringLiteral("%1 has a negative extent").arg(formatShape(*global)));
            return;
        }
        record.globalShape = *global;

        if (attrs.exists("ranges")) {
            readRanges(attrs, record);
        } else {
            record.ranges = ShardRanges::whole(record.globalShape);
            if (record.localShape != record.globalShape) {
                error(QStringLiteral("local shape %1 differs from global_shape %2, and there is "
                                     "no 'ranges' attribute saying where it sits")
                          .arg(formatShape(record.localShape), formatShape(record.globalShape)));
            }
        }
        const std::size_t problems = diagnostics_.size();
        if (attrs.exists("placements")) {
            readPlacements(attrs, record);
        }
        if (diagnostics_.size() == problems) {  // unreadable placements are said once
            checkPlacementsAgainstRanges(record);
        }
    }

    void checkStorage(hid_t dataset, const TensorRecord& record) {
        const hdf5::Datatype type(H5Dget_type(dataset));
        if (!type) {
            error(QStringLiteral("has an unreadable element type: ") + hdf5::takeErrorText());
            return;
        }
        if (!dtypeKnown_) {
            return;
        }
        const H5T_class_t typeClass = H5Tget_class(type.get());
        const std::size_t size = H5Tget_size(type.get());
        const bool isUnsigned = typeClass == H5T_INTEGER && H5Tget_sign(type.get()) == H5T_SGN_NONE;
        const auto bytes = static_cast<std::size_t>(storageBytes(record.dtype));
        const bool matches = record.dtype == DType::F32 ? typeClass == H5T_FLOAT && size == 4
                                                        : isUnsigned && size == bytes;
        if (!matches) {
            QString stored;
            if (typeClass == H5T_FLOAT) {
                stored = QStringLiteral("%1-bit floats").arg(size * 8);
            } else if (typeClass == H5T_INTEGER) {
                stored =
                    QStringLiteral("%1-bit %2 integers")
                        .arg(size * 8)
                        .arg(isUnsigned ? QStringLiteral("unsigned") : QStringLiteral("signed"));
            } else {
                stored = QStringLiteral("a %1-byte non-numeric type").arg(size);
            }
            const QString expected =
                record.dtype == DType::F32
                    ? QStringLiteral("32-bit floats")
                    : QStringLiteral("%1-bit unsigned integers").arg(bytes * 8);
            error(QStringLiteral("dtype %1 must be stored as %2, but the dataset stores %3")
                      .arg(dtypeName(record.dtype), expected, stored));
        }
    }

    void readRanges(const hdf5::AttributeReader& attrs, TensorRecord& record) {
        QString problem;
        const auto text = attrs.string("ranges", &problem);
        if (!text) {
            attributeError("ranges", problem);
            return;
        }
        QJsonParseError parseError;
        const auto document = QJsonDocument::fromJson(text->toUtf8(), &parseError);
        if (parseError.error != QJsonParseError::NoError) {
            // One arg() call: trace text must not have its own %1 substituted.
            attributeError("ranges", QStringLiteral("'%1' is not valid JSON: %2 at offset %3")
                                         .arg(*text, parseError.errorString(),
                                              QString::number(parseError.offset)));
            return;
        }
        const QString expectedForm =
            QStringLiteral("'%1' must list, per dimension, [start, stop] pairs").arg(*text);
        if (!document.isArray()) {
            attributeError("ranges", expectedForm);
            return;
        }
        ShardRanges ranges;
        for (const auto& dimValue : document.array()) {
            if (!dimValue.isArray() || dimValue.toArray().isEmpty()) {
                attributeError("ranges", expectedForm);
                return;
            }
            std::vector<IndexRange> dim;
            for (const auto& rangeValue : dimValue.toArray()) {
                const auto pair = rangeValue.toArray();
                // Whole numbers a double holds exactly; beyond 2^53 (or 2^63, where the cast
                // below would be undefined) no tensor reaches.
                const auto whole = [](const QJsonValue& v) {
                    constexpr double kLargest = 9007199254740992.0;  // 2^53
                    return v.isDouble() && std::floor(v.toDouble()) == v.toDouble() &&
                           std::abs(v.toDouble()) <= kLargest;
                };
                if (!rangeValue.isArray() || pair.size() != 2 || !whole(pair[0]) ||
                    !whole(pair[1])) {
                    attributeError("ranges", expectedForm);
                    return;
                }
                dim.push_back({static_cast<std::int64_t>(pair[0].toDouble()),
                               static_cast<std::int64_t>(pair[1].toDouble())});
            }
            ranges.dims.push_back(std::move(dim));
        }
        if (ranges.dims.size() != record.globalShape.size()) {
            attributeError("ranges",
                           QStringLiteral("%1 has %2 dimensions but global_shape %3 has %4")
                               .arg(ranges.toString())
                               .arg(ranges.dims.size())
                               .arg(formatShape(record.globalShape))
                               .arg(record.globalShape.size()));
            return;
        }
        bool ok = true;
        for (std::size_t d = 0; d < ranges.dims.size(); ++d) {
            auto sorted = ranges.dims[d];
            for (const auto& range : sorted) {
                if (range.start < 0 || range.stop > record.globalShape[d] ||
                    range.start >= range.stop) {
                    attributeError("ranges", QStringLiteral("range [%1, %2) in dimension %3 is "
                                                            "empty or outside [0, %4)")
                                                 .arg(range.start)
                                                 .arg(range.stop)
                                                 .arg(d)
                                                 .arg(record.globalShape[d]));
                    ok = false;
                }
            }
            std::sort(sorted.begin(), sorted.end());
            for (std::size_t i = 1; ok && i < sorted.size(); ++i) {
                if (sorted[i].start < sorted[i - 1].stop) {
                    attributeError("ranges", QStringLiteral("ranges in dimension %1 overlap "
                                                            "each other: %2")
                                                 .arg(d)
                                                 .arg(ranges.toString()));
                    ok = false;
                }
            }
        }
        if (!ok) {
            return;
        }
        if (ranges.localShape() != record.localShape) {
            error(QStringLiteral("local shape %1 does not match its ranges %2, which cover %3")
                      .arg(formatShape(record.localShape), ranges.toString(),
                           formatShape(ranges.localShape())));
            return;
        }
        record.ranges = std::move(ranges);
    }

    void readPlacements(const hdf5::AttributeReader& attrs, TensorRecord& record) {
        QString problem;
        const auto text = attrs.string("placements", &problem);
        if (!text) {
            attributeError("placements", problem);
            return;
        }
        QJsonParseError parseError;
        const auto document = QJsonDocument::fromJson(text->toUtf8(), &parseError);
        if (parseError.error != QJsonParseError::NoError || !document.isObject()) {
            attributeError("placements",
                           QStringLiteral("'%1' must be a JSON object of mesh axis to placement%2")
                               .arg(*text, parseError.error != QJsonParseError::NoError
                                               ? QStringLiteral(" (") + parseError.errorString() +
                                                     QLatin1Char(')')
                                               : QString()));
            return;
        }
        const auto object = document.object();
        // A device mesh has a handful of axes: thousands are damage, said in one line.
        constexpr qsizetype kMaxAxes = 64;
        if (object.size() > kMaxAxes) {
            attributeError("placements", QStringLiteral("names %1 mesh axes, more than any mesh "
                                                        "has (at most %2 are read)")
                                             .arg(object.size())
                                             .arg(kMaxAxes));
            return;
        }
        for (auto it = object.constBegin(); it != object.constEnd(); ++it) {
            const auto placement =
                it.value().isString() ? Placement::parse(it.value().toString()) : std::nullopt;
            if (!placement) {
                attributeError("placements",
                               QStringLiteral("axis '%1': %2")
                                   .arg(it.key(), Placement::unsupportedReason(
                                                      it.value().toVariant().toString())));
                continue;
            }
            if (placement->type == Placement::Type::Shard &&
                static_cast<std::size_t>(placement->dim) >= record.globalShape.size()) {
                attributeError("placements",
                               QStringLiteral("axis '%1': %2 but the tensor has %3 dimensions")
                                   .arg(it.key(), placement->toString(),
                                        QString::number(record.globalShape.size())));
                continue;
            }
            record.placements.push_back({it.key(), *placement});
        }
    }

    // The ranges may cut only dimensions that a placement shards: `Shard(1)` with ranges that
    // split dimension 0 says two different things about where the piece sits.
    void checkPlacementsAgainstRanges(const TensorRecord& record) {
        // Without placements too: a piece cut from a tensor says which mesh axis cut it.
        if (record.ranges.dims.size() != record.globalShape.size()) {
            return;
        }
        for (std::size_t d = 0; d < record.globalShape.size(); ++d) {
            const auto& dim = record.ranges.dims[d];
            const bool whole =
                dim.size() == 1 && dim.front() == IndexRange{0, record.globalShape[d]};
            const bool sharded = std::any_of(
                record.placements.begin(), record.placements.end(), [d](const AxisPlacement& p) {
                    return p.placement.type == Placement::Type::Shard &&
                           static_cast<std::size_t>(p.placement.dim) == d;
                });
            if (!whole && !sharded) {
                error(record.placements.empty()
                          ? QStringLiteral("its ranges %1 cut dimension %2, but it has no "
                                           "placements saying which mesh axis shards it")
                                .arg(record.ranges.toString())
                                .arg(d)
                          : QStringLiteral("its ranges %1 cut dimension %2, which none of its "
                                           "placements %3 shards")
                                .arg(record.ranges.toString())
                                .arg(d)
                                .arg(placementsText(record.placements)));
                return;
            }
        }
    }

    QString file_;
    QByteArray name_;  // in /tensors
    QString dataset_;
    QByteArray datasetPath_;  // dataset_ as the trail takes it
    hdf5::ExternalLinkGuard& guard_;
    Hdf5Trail* trail_;
    Diagnostics diagnostics_;
    bool keyKnown_ = false;
    bool dtypeKnown_ = false;
};

void readFileAttributes(hid_t file, const QString& path, RankFileIndex& index) {
    const hdf5::AttributeReader attrs{file};
    QString problem;
    if (const auto version = attrs.string("format_version", &problem)) {
        index.formatVersion = *version;
    } else {
        index.diagnostics.push_back(fileDiagnostic(
            Severity::Warning, path, QStringLiteral("file attribute 'format_version' ") + problem));
    }
    if (const auto rank = attrs.integer("rank", &problem)) {
        if (*rank >= 0 && *rank <= std::numeric_limits<int>::max()) {
            index.fileRank = static_cast<int>(*rank);
        } else {
            index.diagnostics.push_back(fileDiagnostic(
                Severity::Error, path,
                QStringLiteral("file attribute 'rank' is %1, not a rank number").arg(*rank)));
        }
    } else {
        index.diagnostics.push_back(fileDiagnostic(
            Severity::Error, path, QStringLiteral("file attribute 'rank' ") + problem));
    }
}

// Marks each record that the file attribute `recomputations` says activation checkpointing
// recomputed differently (trace-format.md). A malformed attribute or an entry naming no tensor
// of the file is a warning: the tensors are still compared, their recomputations unchecked.
void readRecomputations(hid_t file, const QString& path, RankFileIndex& index) {
    const hdf5::AttributeReader attrs{file};
    if (!attrs.exists("recomputations")) {
        return;
    }
    QString problem;
    const auto text = attrs.string("recomputations", &problem);
    const auto recomputations = text ? parseRecomputations(text->toUtf8(), &problem) : std::nullopt;
    if (!recomputations) {
        index.diagnostics.push_back(fileDiagnostic(
            Severity::Warning, path,
            QStringLiteral("file attribute 'recomputations' %1: whether activation "
                           "checkpointing's recomputed forwards repeated the first ones is "
                           "not known")
                .arg(problem)));
        return;
    }
    std::map<TensorKey, TensorRecord*> forwards;  // the first dataset of each key, by seq
    for (auto& record : index.records) {
        forwards.emplace(record.key, &record);
    }
    for (const auto& [key, difference] : recomputations->differing) {
        const auto found = forwards.find(key);
        if (found == forwards.end()) {
            Diagnostic d = fileDiagnostic(
                Severity::Warning, path,
                QStringLiteral("file attribute 'recomputations' says the recomputation of %1 "
                               "differs from its first forward in %2, but the file holds no "
                               "such tensor")
                    .arg(key.toString(), describeDifference(difference)));
            d.tensor = key.toString();
            index.diagnostics.push_back(std::move(d));
            continue;
        }
        found->second->recomputation = difference;
    }
}

// The names of the group's links in name order, in one pass: looking each up by its index
// walks an old-style group from its start every time, quadratic in the datasets of a file
// (100,000 took 22 minutes).
// A damaged group stops the listing: `damage` then says why, and the names before it are kept.
std::vector<QByteArray> linkNames(hid_t group, QString* damage) {
    std::vector<QByteArray> names;
    hsize_t position = 0;
    const herr_t listed = H5Literate(
        group, H5_INDEX_NAME, H5_ITER_INC, &position,
        [](hid_t, const char* name, const H5L_info_t*, void* data) -> herr_t {
            static_cast<std::vector<QByteArray>*>(data)->emplace_back(name);
            return 0;
        },
        &names);
    if (listed < 0) {
        *damage = hdf5::takeErrorText();
        if (damage->isEmpty()) {
            *damage = QStringLiteral("HDF5 gave no reason");
        }
    }
    return names;
}

// Indexes the open rank file `file` into `index`.
void indexOpenFile(hid_t file, const QString& path, RankFileIndex& index,
                   const std::atomic<bool>* cancel, Hdf5Trail* trail) {
    // The file as its data offsets are found: they are used only while it stays so.
    const auto stamp = fileStamp(path);
    markStep(trail, Hdf5Step::ReadingFileAttributes);
    readFileAttributes(file, path, index);
    if (!index.formatVersion.isEmpty()) {
        // As the manifest's: another major version, or no version at all, changes what every
        // dataset means.
        const auto version = parseFormatVersion(index.formatVersion);
        if (!version || version->first != Manifest::kSupportedMajor) {
            index.diagnostics.push_back(fileDiagnostic(
                Severity::Error, path,
                (version ? QStringLiteral("rank file format %1 is not supported by this ttrace "
                                          "(%2.x)")
                         : QStringLiteral("file attribute 'format_version' is '%1', not a "
                                          "version of the form MAJOR.MINOR (this ttrace reads "
                                          "%2.x)"))
                    .arg(index.formatVersion)
                    .arg(Manifest::kSupportedMajor)));
            return;
        }
    }
    markStep(trail, Hdf5Step::ListingDatasets);
    hdf5::ExternalLinkGuard guard;
    if (H5Lexists(file, "tensors", guard.links()) <= 0) {
        index.diagnostics.push_back(
            fileDiagnostic(Severity::Error, path, QStringLiteral("has no /tensors group")));
        return;
    }
    if (auto problem = hdf5::linkProblem(file, "tensors", guard)) {
        index.diagnostics.push_back(
            fileDiagnostic(Severity::Error, path, QStringLiteral("/tensors ") + *problem));
        return;
    }
    const hdf5::Group group(H5Gopen2(file, "tensors", guard.groups()));
    if (!group) {
        const QString refused = guard.takeRefused();
        index.diagnostics.push_back(fileDiagnostic(
            Severity::Error, path,
            refused.isEmpty() ? QStringLiteral("cannot open /tensors: ") + hdf5::takeErrorText()
                              : QStringLiteral("/tensors ") + hdf5::leavesTheFile(refused)));
        return;
    }
    QString damage;
    const std::vector<QByteArray> names = linkNames(group.get(), &damage);
    if (!damage.isEmpty()) {
        index.diagnostics.push_back(fileDiagnostic(
            Severity::Error, path,
            QStringLiteral("its list of the datasets in /tensors is damaged after %1 of them: "
                           "the datasets past the damage are not read: ")
                    .arg(names.size()) +
                damage));
    }
    for (const auto& name : names) {
        // A file of 100,000 datasets takes seconds: Ctrl-C and Cancel stop it between two.
        if (cancel && cancel->load(std::memory_order_relaxed)) {
            index.cancelled = true;
            break;
        }
        DatasetIndexer indexer(path, name, guard, trail);
        auto record = indexer.index(group.get(), name);
        for (auto& d : indexer.takeDiagnostics()) {
            index.diagnostics.push_back(std::move(d));
        }
        if (record) {
            record->rank = index.fileRank.value_or(-1);
            record->fileStamp = stamp;
            index.records.push_back(std::move(*record));
        }
    }
    std::stable_sort(index.records.begin(), index.records.end(),
                     [](const TensorRecord& a, const TensorRecord& b) { return a.seq < b.seq; });
    for (std::size_t i = 1; i < index.records.size(); ++i) {
        if (index.records[i].seq == index.records[i - 1].seq) {
            Diagnostic d = fileDiagnostic(
                Severity::Warning, path,
                QStringLiteral("seq %1 is used by both %2 and %3; execution order is ambiguous")
                    .arg(index.records[i].seq)
                    .arg(index.records[i - 1].dataset, index.records[i].dataset));
            d.dataset = index.records[i].dataset;
            index.diagnostics.push_back(std::move(d));
        }
    }
    readRecomputations(file, path, index);
}

}  // namespace

RankFileIndex indexRankFile(const QString& path, const std::atomic<bool>* cancel,
                            Hdf5Trail* trail) {
    hdf5::silenceErrors();
    RankFileIndex index;
    QString openError;
    markStep(trail, Hdf5Step::OpeningFile);
    hdf5::File file = hdf5::openReadOnly(path, &openError);
    if (file) {
        index.opened = true;
        indexOpenFile(file.get(), path, index, cancel, trail);
        markStep(trail, Hdf5Step::ClosingFile);
        file.reset();
    } else {
        index.diagnostics.push_back(fileDiagnostic(
            Severity::Error, path,
            QStringLiteral("is not a readable HDF5 file: cut short, overwritten or not HDF5 at "
                           "all: ") +
                openError));
    }
    for (Diagnostic& d : index.diagnostics) {
        hdf5::separateLibraryWords(d);
    }
    return index;
}

}  // namespace ttrace

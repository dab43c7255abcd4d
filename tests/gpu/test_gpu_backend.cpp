// The CUDA backend's algorithm against the CPU backend, the oracle: on the host through Thrust
// everywhere (CI has no GPU), on the device where one can be used; and what the programs say
// when none can.
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "BundledSamples.h"
#include "CopyPlan.h"
#include "CudaBackend.h"
#include "CudaDevices.h"
#include "CudaEngine.h"
#include "Hdf5TestFiles.h"
#include "HostCompare.h"
#include "StoredOperand.h"
#include "compare/ComparisonJob.h"
#include "compare/ElementErrors.h"
#include "compare/MetricsBackend.h"
#include "compare/StoredRun.h"
#include "trace/BlockScales.h"
#include "trace/BoxCopy.h"
#include "trace/DType.h"
#include "trace/ShapeText.h"
#include "trace/StoredBox.h"
#include "trace/TraceSet.h"

using namespace ttrace;
using gpu::StoredType;

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

DType dtypeOf(StoredType type) {
    switch (type) {
        case StoredType::F32:
            return DType::F32;
        case StoredType::F16:
            return DType::F16;
        case StoredType::BF16:
            return DType::BF16;
        case StoredType::E4M3:
            return DType::FP8E4M3;
        case StoredType::E5M2:
            return DType::FP8E5M2;
        case StoredType::E2M1:
            return DType::FP4E2M1;
    }
    return DType::F32;
}

// One side of a comparison: its stored words, and their values decoded the CPU path's way
// (decode, then the fp8 scale in float, as BlockScales::apply).
struct Side {
    StoredType type = StoredType::F32;
    float scaleInv = 1.0F;
    std::vector<std::uint8_t> words;
    std::vector<float> values;

    std::size_t size() const {
        return words.size() / static_cast<std::size_t>(gpu::storedBytes(type));
    }
    // Row k of a run at element k * stride.
    gpu::Operand operand(std::size_t stride) const {
        gpu::Operand operand;
        operand.data = words.data();
        operand.type = type;
        operand.stride = stride;
        operand.scaleInv = scaleInv;
        return operand;
    }
    void decodeAll() {
        values.resize(size());
        decode(dtypeOf(type), words.data(), values.data(), values.size());
        if (type == StoredType::E4M3 || type == StoredType::E5M2) {
            for (float& v : values) {
                v *= scaleInv;
            }
        }
    }
};

std::uint32_t wordAt(const Side& side, std::size_t i) {
    std::uint32_t word = 0;
    std::memcpy(&word,
                side.words.data() + i * static_cast<std::size_t>(gpu::storedBytes(side.type)),
                static_cast<std::size_t>(gpu::storedBytes(side.type)));
    return word;
}

void setWord(Side& side, std::size_t i, std::uint32_t word) {
    std::memcpy(side.words.data() + i * static_cast<std::size_t>(gpu::storedBytes(side.type)),
                &word, static_cast<std::size_t>(gpu::storedBytes(side.type)));
}

// A random finite word of `type` with magnitudes over several decades (fp8: any byte but NaN).
std::uint32_t randomWord(StoredType type, std::mt19937& rng) {
    std::normal_distribution<float> normal(0.0F, 1.0F);
    std::uniform_int_distribution<int> decade(-4, 4);
    float value = normal(rng) * std::pow(10.0F, static_cast<float>(decade(rng)));
    std::uint32_t bits = 0;
    std::memcpy(&bits, &value, 4);
    switch (type) {
        case StoredType::F32:
            return bits;
        case StoredType::BF16:
            return bits >> 16;
        case StoredType::F16: {  // random sign, exponent below 31 (finite), mantissa
            std::uniform_int_distribution<std::uint32_t> exponent(0, 30), mantissa(0, 0x3ff);
            return ((bits >> 16) & 0x8000U) | (exponent(rng) << 10) | mantissa(rng);
        }
        case StoredType::E4M3:
        case StoredType::E5M2: {
            std::uniform_int_distribution<std::uint32_t> byte(0, 255);
            std::uint32_t b = byte(rng);
            const bool nan = type == StoredType::E4M3 ? (b & 0x7fU) == 0x7fU : (b & 0x7cU) == 0x7cU;
            return nan ? b & 0xbbU : b;
        }
        case StoredType::E2M1:  // two elements, every byte a pair of values
            return std::uniform_int_distribution<std::uint32_t>(0, 255)(rng);
    }
    return 0;
}

// R random; D close to R in most elements (a few units of the last place of the stored word),
// equal in some, unrelated in a few: what a comparison sees.
std::pair<Side, Side> randomPair(StoredType type, std::size_t n, std::uint32_t seed,
                                 float scaleInv = 1.0F) {
    std::mt19937 rng(seed);
    Side r, d;
    r.type = d.type = type;
    r.scaleInv = d.scaleInv = scaleInv;
    const auto bytes = static_cast<std::size_t>(gpu::storedBytes(type));
    r.words.resize(n * bytes);
    d.words.resize(n * bytes);
    std::uniform_int_distribution<int> what(0, 9), units(-3, 3);
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint32_t word = randomWord(type, rng);
        setWord(r, i, word);
        const int choice = what(rng);
        std::uint32_t other = word;
        if (choice < 7) {
            const std::uint32_t mask = bytes == 4 ? 0x7fffffU : (bytes == 2 ? 0x7fU : 0x3U);
            other = (word & ~mask) | ((word + static_cast<std::uint32_t>(units(rng))) & mask);
        } else if (choice == 9) {
            other = randomWord(type, rng);
        }
        setWord(d, i, other);
    }
    r.decodeAll();
    d.decodeAll();
    return {r, d};
}

// Sums agree up to the order of their additions (n terms, each rounding by at most 2^-53 of
// the running magnitude): the same bound for every dtype, because every dtype decodes exactly
// into fp32 and everything after is the same double arithmetic. Maxima, their positions and
// the counts depend on no order: they must be equal.
double sumTolerance(std::int64_t n) {
    return 4.0 * static_cast<double>(std::max<std::int64_t>(n, 1)) * std::ldexp(1.0, -53);
}

bool closeSum(double a, double b, double scale, std::int64_t n) {
    if (std::isinf(a) || std::isinf(b)) {
        return a == b;
    }
    return std::fabs(a - b) <= sumTolerance(n) * scale + 1e-300;
}

// The ratio |D-R|/|R| at position `at` of the run (positions are offsets into D).
double ratioAt(const std::vector<float>& r, std::size_t referenceStride,
               const std::vector<float>& d, std::size_t rowLength, std::int64_t at) {
    const auto i = static_cast<std::size_t>(at);
    const float rv = r[(i / rowLength) * referenceStride + i % rowLength];
    const float dv = d[i];
    if (!std::isfinite(rv) || !std::isfinite(dv)) {
        return std::numeric_limits<double>::infinity();
    }
    return std::fabs(double{dv} - double{rv}) / std::fabs(double{rv});
}

void agree(const ErrorAccumulator& got, const ErrorAccumulator& cpu, const std::vector<float>& r,
           std::size_t referenceStride, const std::vector<float>& d, std::size_t rowLength) {
    QCOMPARE(got.count, cpu.count);
    QCOMPARE(got.nanRef, cpu.nanRef);
    QCOMPARE(got.infRef, cpu.infRef);
    QCOMPARE(got.nanDist, cpu.nanDist);
    QCOMPARE(got.infDist, cpu.infDist);
    QCOMPARE(got.zeroRefMismatches, cpu.zeroRefMismatches);
    QCOMPARE(got.bitDifferences, cpu.bitDifferences);
    QCOMPARE(got.maxAbsPos, cpu.maxAbsPos);
    QCOMPARE(got.maxAbsError, cpu.maxAbsError);
    // The CPU compares ratios by cross-multiplication: among ratios equal to the last bit it
    // may keep another element than the first. Any element at the maximum will do.
    QCOMPARE(got.maxRelPos < 0, cpu.maxRelPos < 0);
    if (cpu.maxRelPos >= 0) {
        QVERIFY2(got.maxRelError == cpu.maxRelError ||
                     std::fabs(got.maxRelError - cpu.maxRelError) <= 1e-15 * cpu.maxRelError,
                 qPrintable(
                     QStringLiteral("max rel %1 vs %2").arg(got.maxRelError).arg(cpu.maxRelError)));
        if (got.maxRelPos != cpu.maxRelPos) {
            const double at = ratioAt(r, referenceStride, d, rowLength, got.maxRelPos);
            QVERIFY2(std::fabs(at - cpu.maxRelError) <= 1e-15 * cpu.maxRelError,
                     qPrintable(QStringLiteral("position %1 holds %2, not the maximum %3")
                                    .arg(got.maxRelPos)
                                    .arg(at)
                                    .arg(cpu.maxRelError)));
        }
    }
    const std::int64_t n = cpu.count;
    QVERIFY2(
        closeSum(got.sumSqDiff, cpu.sumSqDiff, cpu.sumSqDiff, n),
        qPrintable(QStringLiteral("sumSqDiff %1 vs %2").arg(got.sumSqDiff).arg(cpu.sumSqDiff)));
    QVERIFY(closeSum(got.sumSqRef, cpu.sumSqRef, cpu.sumSqRef, n));
    QVERIFY(closeSum(got.sumSqDist, cpu.sumSqDist, cpu.sumSqDist, n));
    // The CPU's fast path derives the dot product from the three other sums: its error is
    // relative to their size.
    QVERIFY2(closeSum(got.sumDot, cpu.sumDot, cpu.sumSqRef + cpu.sumSqDist, n),
             qPrintable(QStringLiteral("sumDot %1 vs %2").arg(got.sumDot).arg(cpu.sumDot)));
}

// Where the algorithm under test runs.
enum class Runner { Host, HostSmallChunks, Device };

const std::optional<gpu::CudaAvailability>& availability() {
    static std::optional<gpu::CudaAvailability> available;
    if (!available) {
        available = gpu::probeCuda();
    }
    return available;
}

ErrorAccumulator runOn(Runner runner, const gpu::RowRun& run) {
    switch (runner) {
        case Runner::Host:
            return gpu::compareOnHost(run);
        case Runner::HostSmallChunks:
            return gpu::compareOnHost(run, 1000);
        case Runner::Device: {
            static const gpu::CudaEngine engine(availability()->devices, std::size_t{1} << 16);
            return engine.compare(run);
        }
    }
    return {};
}

// The element-error profile of R against D seen as rows x columns, on `runner` and on the CPU
// backend: every count and pixel must be equal (the same double arithmetic, the same edges).
void profileAgrees(Runner runner, const std::vector<float>& r, const std::vector<float>& d,
                   std::size_t rows, std::size_t columns) {
    ErrorImage image;
    image.rows = static_cast<std::int64_t>(rows);
    image.columns = static_cast<std::int64_t>(columns);
    image.height = static_cast<int>(std::min<std::size_t>(rows, 17));
    image.width = static_cast<int>(std::min<std::size_t>(columns, 23));
    image.maxError.assign(static_cast<std::size_t>(image.height * image.width), 0.0F);
    std::vector<int> pixelRows(rows), pixelColumns(columns);
    for (std::size_t k = 0; k < rows; ++k) {
        pixelRows[k] = image.pixelRowOf(static_cast<std::int64_t>(k));
    }
    for (std::size_t j = 0; j < columns; ++j) {
        pixelColumns[j] = image.pixelColumnOf(static_cast<std::int64_t>(j));
    }
    const ProfilePiece piece{r.data(), d.data(),         columns,
                             rows,     pixelRows.data(), pixelColumns.data()};
    ErrorHistogram expectedHistogram, gotHistogram;
    ErrorImage expectedImage = image, gotImage = image;
    makeCpuBackend()->profile(piece, expectedHistogram, expectedImage);
    switch (runner) {
        case Runner::Host:
            gpu::profileOnHost(piece, gotHistogram, gotImage);
            break;
        case Runner::HostSmallChunks:
            gpu::profileOnHost(piece, gotHistogram, gotImage, 1000);
            break;
        case Runner::Device: {
            static const gpu::CudaEngine engine(availability()->devices, std::size_t{1} << 16);
            engine.profile(piece, gotHistogram, gotImage);
            break;
        }
    }
    QCOMPARE(gotHistogram.total(), static_cast<std::int64_t>(rows * columns));
    QCOMPARE(gotHistogram.bins, expectedHistogram.bins);
    QCOMPARE(gotHistogram.exact, expectedHistogram.exact);
    QCOMPARE(gotHistogram.below, expectedHistogram.below);
    QCOMPARE(gotHistogram.above, expectedHistogram.above);
    QCOMPARE(gotImage.maxError, expectedImage.maxError);
}

// R against D, both `n` elements in one row.
gpu::RowRun oneRow(const Side& r, const Side& d, std::size_t n) {
    gpu::RowRun run;
    run.reference = r.operand(n);
    run.distributed = d.operand(n);
    run.rowLength = n;
    run.rows = 1;
    return run;
}

void compareRun(Runner runner, const Side& r, std::size_t referenceStride, const Side& d,
                std::size_t rowLength, std::size_t rows) {
    gpu::RowRun run;
    run.reference = r.operand(referenceStride);
    run.distributed = d.operand(rowLength);
    run.rowLength = rowLength;
    run.rows = rows;
    const ErrorAccumulator got = runOn(runner, run);
    const ErrorAccumulator cpu = makeCpuBackend()->compareRows(r.values.data(), referenceStride,
                                                               d.values.data(), rowLength, rows);
    agree(got, cpu, r.values, referenceStride, d.values, rowLength);
}

bool noDevice() {
    return availability()->devices.empty();
}

constexpr StoredType kTypes[] = {StoredType::F32, StoredType::F16, StoredType::BF16,
                                 StoredType::E4M3, StoredType::E5M2};

// Hand-made pairs: every kind of special value against every other, signed zeros, subnormals,
// the largest finite values, ties.
std::pair<Side, Side> edgePair(StoredType type) {
    std::vector<std::uint32_t> special;  // words of `type`
    switch (type) {
        case StoredType::F32:
            special = {0x7fc00000U, 0x7f800000U, 0xff800000U, 0x00000000U,
                       0x80000000U, 0x00000001U, 0x00400000U, 0x7f7fffffU,
                       0xff7fffffU, 0x3f800000U, 0xbf800000U, 0x7fa00000U};
            break;
        case StoredType::BF16:
            special = {0x7fc0U, 0x7f80U, 0xff80U, 0x0000U, 0x8000U, 0x0001U,
                       0x0040U, 0x7f7fU, 0xff7fU, 0x3f80U, 0xbf80U};
            break;
        case StoredType::F16:
            special = {0x7e00U, 0x7c00U, 0xfc00U, 0x0000U, 0x8000U, 0x0001U,
                       0x0200U, 0x7bffU, 0xfbffU, 0x3c00U, 0xbc00U, 0x7c01U};
            break;
        case StoredType::E4M3:
            special = {0x7fU, 0xffU, 0x00U, 0x80U, 0x01U, 0x07U, 0x7eU, 0xfeU, 0x38U, 0xb8U};
            break;
        case StoredType::E5M2:
            special = {0x7cU, 0xfcU, 0x7dU, 0x7fU, 0x00U, 0x80U, 0x01U, 0x03U, 0x7bU, 0xfbU, 0x3cU};
            break;
        case StoredType::E2M1:  // scaled, packed: storedWordsWithBlockScales covers it
            break;
    }
    Side r, d;
    r.type = d.type = type;
    r.scaleInv = d.scaleInv = (type == StoredType::E4M3 || type == StoredType::E5M2) ? 0.25F : 1.0F;
    const std::size_t n = special.size() * special.size();
    const auto bytes = static_cast<std::size_t>(gpu::storedBytes(type));
    r.words.resize(n * bytes);
    d.words.resize(n * bytes);
    for (std::size_t a = 0; a < special.size(); ++a) {
        for (std::size_t b = 0; b < special.size(); ++b) {
            setWord(r, a * special.size() + b, special[a]);
            setWord(d, a * special.size() + b, special[b]);
        }
    }
    r.decodeAll();
    d.decodeAll();
    return {r, d};
}

// ttrace-check on a bundled sample with `backend`, its JSON report to `json`.
struct CheckerRun {
    int code = -1;
    QString out, err;
};

CheckerRun runChecker(const test::BundledSample& sample, const QString& backend,
                      const QString& json) {
    QProcess process;
    process.start(qEnvironmentVariable("TTRACE_CHECK"),
                  {sample.folder() + QStringLiteral("/dist"),
                   sample.folder() + QStringLiteral("/ref"), QStringLiteral("--perturbed"),
                   sample.folder() + QStringLiteral("/pert"), QStringLiteral("--no-cache"),
                   QStringLiteral("--backend"), backend, QStringLiteral("--json"), json});
    process.waitForFinished(120000);
    return {process.exitCode(), QString::fromUtf8(process.readAllStandardOutput()),
            QString::fromUtf8(process.readAllStandardError())};
}

std::int64_t product(const std::vector<std::int64_t>& extents) {
    std::int64_t n = 1;
    for (const auto e : extents) {
        n *= e;
    }
    return n;
}

// What a rank file holds for a scaled tensor: its stored words and block scales.
struct ScaledDataset {
    DType dtype = DType::FP8E4M3;
    std::vector<std::int64_t> shape;  // elements
    std::vector<std::uint8_t> words;  // storedShape(dtype, shape), row-major
    BlockScales scales;

    // The box's stored words as Hdf5Reader::readWords leaves them.
    std::vector<std::uint8_t> wordsOf(const std::vector<std::int64_t>& start,
                                      const std::vector<std::int64_t>& count) const {
        const StoredBox box = storedBox(dtype, shape, start, count);
        const auto wordBytes = static_cast<std::size_t>(storageBytes(dtype));
        std::vector<std::uint8_t> out(box.words() * wordBytes);
        copyBox(reinterpret_cast<const std::byte*>(words.data()), box.shape, box.start, box.count,
                wordBytes, reinterpret_cast<std::byte*>(out.data()));
        return out;
    }
    // The box as the CPU path reads it (Hdf5Reader::read): decoded, then scaled.
    std::vector<float> read(const std::vector<std::int64_t>& start,
                            const std::vector<std::int64_t>& count) const {
        const std::vector<std::uint8_t> stored = wordsOf(start, count);
        std::vector<float> out(static_cast<std::size_t>(product(count)));
        decodeBox(dtype, storedBox(dtype, shape, start, count), count, stored.data(), out.data());
        scales.apply(shape, start, count, out.data());
        return out;
    }
};

// Random words (fp8 without NaN, so that the sums mean something) and scales over decades.
ScaledDataset randomDataset(DType dtype, std::vector<std::int64_t> shape,
                            std::vector<std::int64_t> block, std::uint32_t seed) {
    std::mt19937 rng(seed);
    ScaledDataset data;
    data.dtype = dtype;
    data.shape = std::move(shape);
    data.words.resize(static_cast<std::size_t>(product(storedShape(dtype, data.shape))));
    std::uniform_int_distribution<int> byte(0, 255);
    for (auto& word : data.words) {
        word = static_cast<std::uint8_t>(byte(rng));
        if (dtype != DType::FP4E2M1 && (word & 0x7fU) >= 0x7cU) {
            word &= 0xbbU;  // no e4m3 NaN, no e5m2 Inf or NaN
        }
    }
    data.scales.block = std::move(block);
    std::uniform_real_distribution<double> exponent(-8.0, 8.0);
    data.scales.scaleInv.resize(static_cast<std::size_t>(product(data.scales.grid(data.shape))));
    for (double& scale : data.scales.scaleInv) {
        scale = std::exp2(exponent(rng));
    }
    return data;
}

// R's words with the last bit of some flipped, and some of its scales nudged: a D to compare.
ScaledDataset nearby(const ScaledDataset& r, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> percent(0, 99);
    ScaledDataset d = r;
    for (auto& word : d.words) {
        if (percent(rng) < 30) {
            word ^= 0x01U;
        }
    }
    for (double& scale : d.scales.scaleInv) {
        if (percent(rng) < 10) {
            scale *= 1.0 + 0x1p-10;
        }
    }
    return d;
}

// The box [start, start + count) of `data` in its stored words, and the run of `rows` rows of
// `rowLength` at `offset` (the box's row and column) in it.
struct BoxWords {
    std::vector<std::uint8_t> words;
    std::vector<float> table;
    StoredWords stored;
};

BoxWords boxWords(const ScaledDataset& data, const std::vector<std::int64_t>& start,
                  const std::vector<std::int64_t>& count, std::size_t offsetRow,
                  std::size_t offsetColumn) {
    BoxWords box;
    box.words = data.wordsOf(start, count);
    const StoredBox stored = storedBox(data.dtype, data.shape, start, count);
    box.stored.data = box.words.data();
    box.stored.dtype = data.dtype;
    box.stored.scales = data.scales.boxScales(data.dtype, data.shape, start, count, box.table);
    box.stored.stride = static_cast<std::size_t>(stored.count.back() * elementsPerWord(data.dtype));
    box.stored.origin = stored.skip + offsetRow * box.stored.stride + offsetColumn;
    return box;
}

// The CUDA backend's algorithm on the host, given stored words as the CUDA backend is: how the
// comparison job's words path (BlockComparer) runs without a GPU. Floats go to the CPU
// backend, as they would to any backend; chunks of 1000 split the job's runs further.
class HostWordsBackend final : public MetricsBackend {
public:
    std::string name() const override { return "the CUDA algorithm on the host"; }
    ErrorAccumulator compare(const float* reference, const float* distributed,
                             std::size_t n) const override {
        return cpu_->compare(reference, distributed, n);
    }
    ErrorAccumulator compareRows(const float* reference, std::size_t referenceStride,
                                 const float* distributed, std::size_t rowLength,
                                 std::size_t rows) const override {
        return cpu_->compareRows(reference, referenceStride, distributed, rowLength, rows);
    }
    bool comparesStoredWords() const override { return true; }
    std::size_t summandsPerSide() const override { return gpu::kMaxSummands; }
    ErrorAccumulator compareStored(const StoredRun& run) const override {
        if (run.reference.dtype == DType::F32) {
            floatReferenceElements_ += run.elements();
        }
        const auto rowRun = gpu::rowRunOf(run);
        return rowRun ? gpu::compareOnHost(*rowRun, 1000) : MetricsBackend::compareStored(run);
    }
    void profile(const ProfilePiece& piece, ErrorHistogram& histogram,
                 ErrorImage& image) const override {
        cpu_->profile(piece, histogram, image);
    }

    // Elements whose reference side came as fp32 words so far: decoded on the host where the
    // trace holds narrower words.
    std::size_t floatReferenceElements() const { return floatReferenceElements_; }

private:
    std::unique_ptr<MetricsBackend> cpu_ = makeCpuBackend();
    mutable std::atomic<std::size_t> floatReferenceElements_ = 0;
};

QString rankFileIn(const QString& folder, int rank) {
    return folder + QStringLiteral("/rank%1.h5").arg(rank, 5, 10, QLatin1Char('0'));
}

// One scaled tensor of a trace set: its reference, perturbed reference and distributed values
// (whole tensors), and how the distributed run splits it over two TP ranks.
struct ScaledTensor {
    QByteArray name, kind;
    ScaledDataset reference, perturbed, distributed;
    int shardDim = 0;  // Shard(shardDim) over tp = 2; its halves hold whole scale blocks
    // Where set, the distributed run holds the tensor as partial sums over tp instead:
    // `distributed` on rank 0, this on rank 1.
    std::optional<ScaledDataset> secondSummand;
    // A trusted run laid out over tp: its rank 1 scales its piece this many times its rank
    // 0's (per-tensor scaling from each rank's own amax).
    double rank1TrustedScale = 1.0;
};

// Writes `tensor`'s box [start, start + count) of `data` as dataset `index` of `w`, with the
// scale blocks inside it, and with its ranges and `placement` over tp where one is given.
void writeScaledBox(test::RankFileWriter& w, int index, const ScaledTensor& tensor,
                    const ScaledDataset& data, const std::vector<std::int64_t>& start,
                    const std::vector<std::int64_t>& count, const QByteArray& placement) {
    const QByteArray id = QByteArray::number(index).rightJustified(6, '0');
    const std::vector<std::uint8_t> words = data.wordsOf(start, count);
    const auto stored = storedShape(data.dtype, count);
    const std::vector<hsize_t> dims(stored.begin(), stored.end());
    const hid_t ds = w.dataset(id.constData(), H5T_STD_U8LE, H5T_NATIVE_UINT8, dims, words.data());
    const std::vector<std::int32_t> globalShape(data.shape.begin(), data.shape.end());
    test::RankFileWriter::standardAttributes(ds, tensor.name, tensor.kind, index,
                                             dtypeName(data.dtype).toUtf8(), globalShape);
    if (data.scales.perTensor()) {
        test::RankFileWriter::float64(ds, "scale_inv", data.scales.scaleInv.front());
    } else {
        const auto grid = data.scales.grid(data.shape);
        std::vector<std::int64_t> gridStart(count.size()), gridCount(count.size());
        for (std::size_t d = 0; d < count.size(); ++d) {
            gridStart[d] = start[d] / data.scales.block[d];
            gridCount[d] = (count[d] + data.scales.block[d] - 1) / data.scales.block[d];
        }
        std::vector<double> scales(static_cast<std::size_t>(product(gridCount)));
        copyBox(reinterpret_cast<const std::byte*>(data.scales.scaleInv.data()), grid, gridStart,
                gridCount, sizeof(double), reinterpret_cast<std::byte*>(scales.data()));
        w.blockScales(ds, id.constData(),
                      std::vector<std::int32_t>(data.scales.block.begin(), data.scales.block.end()),
                      std::vector<hsize_t>(gridCount.begin(), gridCount.end()), scales);
    }
    if (!placement.isEmpty()) {
        QByteArray ranges = "[";
        for (std::size_t d = 0; d < count.size(); ++d) {
            ranges += (d ? ",[[" : "[[") + QByteArray::number(start[d]) + "," +
                      QByteArray::number(start[d] + count[d]) + "]]";
        }
        test::RankFileWriter::variableString(ds, "ranges", ranges + "]");
        test::RankFileWriter::variableString(ds, "placements", "{\"tp\": \"" + placement + "\"}");
    }
    H5Dclose(ds);
}

// dist (tp = 2), ref and pert folders in `root` holding `tensors`; with `laidOutTrusted`, the
// trusted runs split each tensor over tp as the distributed run does (partial sums aside: a
// trusted run holds their whole sum, split as the tensor's shardDim says).
bool writeScaledTraces(const QString& root, const std::vector<ScaledTensor>& tensors,
                       bool laidOutTrusted = false) {
    const QString ref = root + QStringLiteral("/ref"), pert = root + QStringLiteral("/pert"),
                  dist = root + QStringLiteral("/dist");
    for (const QString& folder : {ref, pert, dist}) {
        if (!QDir().mkpath(folder)) {
            return false;
        }
    }
    const int trustedRanks = laidOutTrusted ? 2 : 1;
    const QString trustedAxis = laidOutTrusted ? QStringLiteral("tp") : QString();
    if (!test::writeManifest(ref, trustedRanks, trustedAxis, QStringLiteral("reference")) ||
        !test::writeManifest(pert, trustedRanks, trustedAxis,
                             QStringLiteral("perturbed-reference")) ||
        !test::writeManifest(dist, 2, QStringLiteral("tp"))) {
        return false;
    }
    for (const auto& [folder, trusted] : {std::pair{ref, 0}, std::pair{pert, 1}}) {
        for (int rank = 0; rank < trustedRanks; ++rank) {
            test::RankFileWriter w(rankFileIn(folder, rank), rank);
            for (std::size_t t = 0; t < tensors.size(); ++t) {
                const ScaledDataset& data =
                    trusted == 0 ? tensors[t].reference : tensors[t].perturbed;
                std::vector<std::int64_t> start(data.shape.size(), 0), count = data.shape;
                if (!laidOutTrusted) {
                    writeScaledBox(w, static_cast<int>(t), tensors[t], data, start, count, {});
                    continue;
                }
                const auto dim = static_cast<std::size_t>(tensors[t].shardDim);
                count[dim] /= 2;
                start[dim] = rank * count[dim];
                ScaledDataset scaled = data;
                for (double& scale : scaled.scales.scaleInv) {
                    scale *= rank == 1 ? tensors[t].rank1TrustedScale : 1.0;
                }
                writeScaledBox(w, static_cast<int>(t), tensors[t], scaled, start, count,
                               "Shard(" + QByteArray::number(tensors[t].shardDim) + ")");
            }
        }
    }
    for (int rank = 0; rank < 2; ++rank) {
        test::RankFileWriter w(rankFileIn(dist, rank), rank);
        for (std::size_t t = 0; t < tensors.size(); ++t) {
            const ScaledDataset& data = tensors[t].distributed;
            std::vector<std::int64_t> start(data.shape.size(), 0), count = data.shape;
            if (tensors[t].secondSummand) {
                writeScaledBox(w, static_cast<int>(t), tensors[t],
                               rank == 0 ? data : *tensors[t].secondSummand, start, count,
                               "Partial(sum)");
                continue;
            }
            const auto dim = static_cast<std::size_t>(tensors[t].shardDim);
            count[dim] /= 2;
            start[dim] = rank * count[dim];
            writeScaledBox(w, static_cast<int>(t), tensors[t], data, start, count,
                           "Shard(" + QByteArray::number(tensors[t].shardDim) + ")");
        }
    }
    return true;
}

// A random tensor of `dtype` with scale blocks `block`, its perturbed and distributed values
// nearby, split over tp along `shardDim`.
ScaledTensor scaledTensor(QByteArray name, QByteArray kind, DType dtype,
                          std::vector<std::int64_t> shape, std::vector<std::int64_t> block,
                          int shardDim, std::uint32_t seed) {
    ScaledTensor tensor;
    tensor.name = std::move(name);
    tensor.kind = std::move(kind);
    tensor.reference = randomDataset(dtype, std::move(shape), std::move(block), seed);
    tensor.perturbed = nearby(tensor.reference, seed + 1);
    tensor.distributed = nearby(tensor.reference, seed + 2);
    tensor.shardDim = shardDim;
    return tensor;
}

// The backend that decodes stored words on `runner`: the CUDA backend on the device, its
// algorithm on the host.
std::unique_ptr<MetricsBackend> wordsBackend(Runner runner) {
    if (runner == Runner::Device) {
        return gpu::makeCudaBackend(*availability());
    }
    return std::make_unique<HostWordsBackend>();
}

bool nearlyEqual(double a, double b) {
    return a == b || std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b));
}

// Two comparisons of the same traces: every tensor's metrics, shards and copies the same, up
// to the order of the sums (1e-9 relative).
void sameComparison(const ComparisonOutput& got, const ComparisonOutput& cpu) {
    QCOMPARE(got.results.size(), cpu.results.size());
    const auto sameMetrics = [](const ErrorMetrics& a, const ErrorMetrics& b) {
        return a.count == b.count && a.bitDifferences == b.bitDifferences &&
               a.maxAbsError == b.maxAbsError && a.maxAbsIndex == b.maxAbsIndex &&
               nearlyEqual(a.maxRelError, b.maxRelError) &&
               nearlyEqual(a.relativeError, b.relativeError) && nearlyEqual(a.cosine, b.cosine) &&
               a.zeroRefMismatches == b.zeroRefMismatches && a.nanDist == b.nanDist &&
               a.infDist == b.infDist && a.nanRef == b.nanRef && a.infRef == b.infRef;
    };
    for (std::size_t i = 0; i < cpu.results.size(); ++i) {
        const TensorResult& a = got.results[i];
        const TensorResult& b = cpu.results[i];
        const QString what = b.key.toString() + QStringLiteral(": ");
        QCOMPARE(a.key.toString(), b.key.toString());
        QVERIFY2(sameMetrics(a.metrics, b.metrics),
                 qPrintable(what + QStringLiteral("relative error %1 vs %2, max %3 vs %4")
                                       .arg(a.metrics.relativeError)
                                       .arg(b.metrics.relativeError)
                                       .arg(a.metrics.maxAbsError)
                                       .arg(b.metrics.maxAbsError)));
        QCOMPARE(a.perturbation.has_value(), b.perturbation.has_value());
        if (b.perturbation) {
            QVERIFY2(sameMetrics(*a.perturbation, *b.perturbation),
                     qPrintable(what + QStringLiteral("the perturbations differ")));
        }
        QVERIFY2(nearlyEqual(a.normalizedError, b.normalizedError), qPrintable(what));
        QCOMPARE(a.bytesCompared, b.bytesCompared);
        QCOMPARE(a.shards.size(), b.shards.size());
        for (std::size_t k = 0; k < b.shards.size(); ++k) {
            QVERIFY2(sameMetrics(a.shards[k].metrics, b.shards[k].metrics),
                     qPrintable(what + QStringLiteral("shard copy %1 differs").arg(k)));
        }
        QCOMPARE(a.replicaMismatches.size(), b.replicaMismatches.size());
        for (std::size_t k = 0; k < b.replicaMismatches.size(); ++k) {
            QCOMPARE(a.replicaMismatches[k].differingElements,
                     b.replicaMismatches[k].differingElements);
            QCOMPARE(a.replicaMismatches[k].maxAbsDifference,
                     b.replicaMismatches[k].maxAbsDifference);
        }
    }
}

// `tensors` written as traces (writeScaledTraces) and compared by `words` as by the CPU
// backend, in blocks of the job that start inside a row and a byte, and in larger ones.
void sameOnScaledTraces(const std::vector<ScaledTensor>& tensors, bool laidOutTrusted,
                        const MetricsBackend& words) {
    QTemporaryDir dir;
    QVERIFY(writeScaledTraces(dir.path(), tensors, laidOutTrusted));
    const TraceSet dist = openTraceSet(dir.filePath(QStringLiteral("dist")));
    const TraceSet ref = openTraceSet(dir.filePath(QStringLiteral("ref")));
    const TraceSet pert = openTraceSet(dir.filePath(QStringLiteral("pert")));
    for (const TraceSet* set : {&dist, &ref, &pert}) {
        for (const Diagnostic& diagnostic : set->diagnostics) {
            QFAIL(qPrintable(diagnostic.toString()));
        }
    }
    const auto cpu = makeCpuBackend();
    for (const std::int64_t chunk : {std::int64_t{37}, std::int64_t{1000}}) {
        ComparisonOptions options;
        options.chunkElements = chunk;
        options.backend = cpu.get();
        const ComparisonOutput expected = compareTraceSets(dist, ref, &pert, options);
        QCOMPARE(expected.results.size(), tensors.size());
        options.backend = &words;
        sameComparison(compareTraceSets(dist, ref, &pert, options), expected);
    }
}

}  // namespace

class TestGpuBackend : public QObject {
    Q_OBJECT

private:
    static void addRunners() {
        QTest::addColumn<int>("runner");
        QTest::newRow("host") << static_cast<int>(Runner::Host);
        QTest::newRow("host, chunks of 1000") << static_cast<int>(Runner::HostSmallChunks);
        QTest::newRow("device") << static_cast<int>(Runner::Device);
    }
private Q_SLOTS:
    void initTestCase() {
        qInfo("host system: %s; CUDA: %s", gpu::hostSystemName(),
              noDevice() ? availability()->reason.c_str()
                         : availability()->devices.front().name.c_str());
    }

    void copyPlansPackWhatTheKernelReads() {
        // How a chunk's operand crosses to the device (CopyPlan), emulated here with the same
        // packing cudaMemcpy2D does: every element the kernel then reads decodes to the bits
        // of the host's, for spans, packed and strided rows, fp4 at either nibble, and scale
        // tables read contiguously, by spaced rows and across box rows. The device runs the
        // same plans (CudaEngine's queueCopy); only the copies are its own.
        struct Case {
            std::size_t origin, stride, rowLength, rows;
            // the scales: box rows of `pitch` elements, blocks of `block` columns
            std::size_t scaleOrigin, scaleStride, pitch, block;
            std::int64_t shift;
        };
        const Case cases[] = {
            {0, 0, 100, 1, 0, 0, 128, 32, 0},                // a span
            {7, 0, 33, 1, 7, 0, 64, 16, 0},                  // a span inside a box row
            {5, 48, 48, 9, 5, 64, 64, 16, 0},                // packed rows, scales by box rows
            {3, 50, 33, 20, 3, 64, 64, 32, 0},               // strided rows, one box row each
            {4, 64, 16, 12, 16, 3 * 64, 64, 16, 0},          // spaced rows: a shard's, tp 3
            {9, 71, 30, 12, 9 + 128, 2 * 128, 128, 32, 16},  // spaced, blocks shifted
            {1, 40, 40, 25, 17, 40, 64, 16, 0},              // rows across box rows
            {0, 7, 5, 30, 0, 7, 32, 32, 0},                  // fp4: an odd stride, one span
        };
        std::mt19937 rng(2028);
        std::uniform_int_distribution<int> byte(0, 255);
        std::uniform_real_distribution<float> scale(0.01F, 100.0F);
        std::vector<StoredType> types(std::begin(kTypes), std::end(kTypes));
        types.push_back(StoredType::E2M1);
        for (const StoredType type : types) {
            for (const Case& c : cases) {
                const std::size_t elements = c.origin + (c.rows - 1) * c.stride + c.rowLength;
                std::vector<std::uint8_t> words(gpu::bytesThroughElement(type, elements) + 3);
                for (auto& w : words) {
                    w = static_cast<std::uint8_t>(byte(rng));
                }
                const std::size_t boxElements =
                    c.scaleOrigin + (c.rows - 1) * c.scaleStride + c.rowLength;
                const std::size_t rowEntries = (c.pitch + c.block - 1) / c.block + 1;
                std::vector<float> table((boxElements / c.pitch + 1) * rowEntries);
                for (float& t : table) {
                    t = scale(rng);
                }
                gpu::Operand host;
                host.data = words.data();
                host.type = type;
                host.origin = c.origin;
                host.stride = c.stride;
                if (gpu::isScaledType(type)) {
                    host.scales = table.data();
                    host.scaleOrigin = c.scaleOrigin;
                    host.scaleStride = c.scaleStride;
                    host.pitch = c.pitch;
                    host.rowEntries = rowEntries;
                    host.blockColumns = c.block;
                    host.columnShift = c.shift;
                }
                const gpu::CopyPlan plan = gpu::planCopy(host, c.rowLength, c.rows);
                const auto reads = [](const gpu::CopyRows& rows) {
                    return rows.rows == 0 ? 0
                                          : rows.first + (rows.rows - 1) * rows.pitch + rows.width;
                };
                QVERIFY(reads(plan.words) <= words.size());
                QVERIFY(reads(plan.scales) <= table.size());
                std::vector<std::uint8_t> deviceWords(plan.words.units());
                std::vector<float> deviceScales(plan.scales.units());
                gpu::gatherRows(words.data(), plan.words, 1, deviceWords.data());
                gpu::gatherRows(table.data(), plan.scales, sizeof(float), deviceScales.data());
                const gpu::Operand device =
                    gpu::placed(plan, deviceWords.data(), deviceScales.data());
                for (std::size_t k = 0; k < c.rows; ++k) {
                    for (std::size_t j = 0; j < c.rowLength; ++j) {
                        const std::uint32_t want = gpu::bitsOfFloat(gpu::load(host, k, j));
                        const std::uint32_t got = gpu::bitsOfFloat(gpu::load(device, k, j));
                        if (want != got) {
                            QFAIL(qPrintable(QStringLiteral("%1, origin %2 stride %3: element "
                                                            "(%4, %5) reads %6, not %7")
                                                 .arg(QLatin1String(gpu::storedTypeName(type)))
                                                 .arg(c.origin)
                                                 .arg(c.stride)
                                                 .arg(k)
                                                 .arg(j)
                                                 .arg(got, 0, 16)
                                                 .arg(want, 0, 16)));
                        }
                    }
                }
                // Nothing crosses that the chunk does not read: whole rows of words at most,
                // and a spaced run's table rows, not the rows between them.
                QVERIFY(plan.words.units() <= gpu::bytesThroughElement(type, elements));
                if (host.scales != nullptr && c.scaleStride > c.pitch) {
                    QCOMPARE(plan.scales.units(), c.rows * rowEntries);
                }
            }
        }
    }

    void decodingMatchesTheCpuPath() {
        // Every word of the 8- and 16-bit types, through the shared decoder and core's.
        for (const StoredType type : kTypes) {
            if (type == StoredType::F32) {
                continue;
            }
            const std::size_t count = gpu::storedBytes(type) == 1 ? 256 : 65536;
            Side side;
            side.type = type;
            side.scaleInv = gpu::storedBytes(type) == 1 ? 0.375F : 1.0F;
            side.words.resize(count * static_cast<std::size_t>(gpu::storedBytes(type)));
            for (std::size_t i = 0; i < count; ++i) {
                setWord(side, i, static_cast<std::uint32_t>(i));
            }
            side.decodeAll();
            for (std::size_t i = 0; i < count; ++i) {
                const float shared = gpu::load(side.operand(0), 0, i);
                const float core = side.values[i];
                QVERIFY2(
                    (std::isnan(shared) && std::isnan(core)) || std::memcmp(&shared, &core, 4) == 0,
                    qPrintable(QStringLiteral("%1 word %2: %3 vs %4")
                                   .arg(QLatin1String(storedTypeName(type)))
                                   .arg(i)
                                   .arg(shared)
                                   .arg(core)));
            }
        }
    }

    void arithmeticKeepsTheCpusNanBits() {
        // What the device does to decoded values (scale, add partial sums) gives x86's bits:
        // checked here against the host's own arithmetic, which is the CPU path's.
        const std::uint32_t words[] = {0x7fc00000U, 0xffc00000U, 0x7f810000U, 0x7fa12345U,
                                       0x7f800000U, 0xff800000U, 0x00000000U, 0x80000000U,
                                       0x3f800000U, 0xc0400000U, 0x00000001U, 0x7f7fffffU};
        for (const std::uint32_t x : words) {
            for (const std::uint32_t y : words) {
                const float a = gpu::floatFromBits(x), b = gpu::floatFromBits(y);
                volatile const float va = a, vb = b;  // computed at run time, not folded
                const float sum = va + vb;
                const float product = va * vb;
                QCOMPARE(gpu::bitsOfFloat(gpu::sumAsOnTheCpu(a, b)), gpu::bitsOfFloat(sum));
                QCOMPARE(gpu::bitsOfFloat(gpu::productAsOnTheCpu(a, b)), gpu::bitsOfFloat(product));
            }
        }
    }

    void randomInputs_data() { addRunners(); }
    void randomInputs() {
        QFETCH(int, runner);
        const auto on = static_cast<Runner>(runner);
        if (on == Runner::Device && noDevice()) {
            QSKIP(qPrintable(QStringLiteral("no CUDA device: ") +
                             QString::fromStdString(availability()->reason)));
        }
        std::uint32_t seed = 1;
        for (const StoredType type : kTypes) {
            for (const std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{4096},
                                        std::size_t{4097}, std::size_t{100003}}) {
                const float scale = gpu::storedBytes(type) == 1 ? 0.0625F : 1.0F;
                const auto [r, d] = randomPair(type, n, seed++, scale);
                compareRun(on, r, n, d, n, 1);
                if (QTest::currentTestFailed()) {
                    qWarning("failed: %s, %zu elements", storedTypeName(type), n);
                    return;
                }
            }
        }
    }

    void stridedRows_data() { addRunners(); }
    void stridedRows() {
        // A shard's columns of a reference block (referenceStride > rowLength), with rows
        // shorter and longer than a chunk.
        QFETCH(int, runner);
        const auto on = static_cast<Runner>(runner);
        if (on == Runner::Device && noDevice()) {
            QSKIP("no CUDA device");
        }
        struct Shape {
            std::size_t rowLength, stride, rows;
        };
        std::uint32_t seed = 100;
        for (const StoredType type : kTypes) {
            for (const Shape shape :
                 {Shape{33, 50, 1000}, Shape{5000, 6000, 3}, Shape{1, 7, 999}}) {
                const std::size_t span = (shape.rows - 1) * shape.stride + shape.rowLength;
                auto [r, unused] = randomPair(type, span, seed++);
                auto [d, unused2] = randomPair(type, shape.rowLength * shape.rows, seed++);
                // D close to R's elements in the shard.
                for (std::size_t row = 0; row < shape.rows; ++row) {
                    for (std::size_t j = 0; j < shape.rowLength; j += 2) {
                        setWord(d, row * shape.rowLength + j, wordAt(r, row * shape.stride + j));
                    }
                }
                d.decodeAll();
                compareRun(on, r, shape.stride, d, shape.rowLength, shape.rows);
                if (QTest::currentTestFailed()) {
                    qWarning("failed: %s, rows of %zu", storedTypeName(type), shape.rowLength);
                    return;
                }
            }
        }
    }

    void edgeCases_data() { addRunners(); }
    void edgeCases() {
        QFETCH(int, runner);
        const auto on = static_cast<Runner>(runner);
        if (on == Runner::Device && noDevice()) {
            QSKIP("no CUDA device");
        }
        for (const StoredType type : kTypes) {
            const auto [r, d] = edgePair(type);
            compareRun(on, r, r.size(), d, d.size(), 1);
            // Each pair alone, so that no other element hides what it does to the maxima.
            for (std::size_t i = 0; i < r.size() && !QTest::currentTestFailed(); ++i) {
                Side ri = r, di = d;
                ri.words.assign(
                    r.words.begin() + static_cast<std::ptrdiff_t>(i * gpu::storedBytes(type)),
                    r.words.begin() +
                        static_cast<std::ptrdiff_t>((i + 1) * gpu::storedBytes(type)));
                di.words.assign(
                    d.words.begin() + static_cast<std::ptrdiff_t>(i * gpu::storedBytes(type)),
                    d.words.begin() +
                        static_cast<std::ptrdiff_t>((i + 1) * gpu::storedBytes(type)));
                ri.decodeAll();
                di.decodeAll();
                compareRun(on, ri, 1, di, 1, 1);
            }
            // All equal: every maximum a tie, the first element wins.
            compareRun(on, r, r.size(), r, r.size(), 1);
            if (QTest::currentTestFailed()) {
                qWarning("failed: %s", storedTypeName(type));
                return;
            }
        }
        // Nothing to compare.
        gpu::RowRun empty;
        const ErrorAccumulator none = runOn(on, empty);
        QCOMPARE(none.count, 0);
        QCOMPARE(none.maxAbsPos, -1);
    }

    void storedWordsWithBlockScales_data() { addRunners(); }
    void storedWordsWithBlockScales() {
        // What compareStored is given: the stored words of a reference block and of a shard
        // piece with their scale tables, against the CPU path's decoded and scaled values. fp8
        // and fp4 (odd column starts: runs begin in the middle of a byte), scales per tensor,
        // per row, per block along the rows (MXFP8, NVFP4) and over 2-D blocks; a piece of
        // the block in place (strided rows) and the whole dataset.
        QFETCH(int, runner);
        const auto on = static_cast<Runner>(runner);
        if (on == Runner::Device && noDevice()) {
            QSKIP("no CUDA device");
        }
        struct Layout {
            std::vector<std::int64_t> shape, block;
            std::vector<std::int64_t> blockStart, blockCount;   // a reference block
            std::vector<std::int64_t> pieceOffset, pieceCount;  // a piece in it, 1 leading row
        };
        const Layout layouts[] = {
            {{37, 70}, {}, {2, 5}, {30, 51}, {3, 6}, {20, 33}},
            {{37, 70}, {1, 70}, {2, 5}, {30, 51}, {3, 7}, {20, 33}},
            {{37, 70}, {1, 32}, {2, 5}, {30, 51}, {3, 6}, {20, 33}},
            {{37, 70}, {1, 16}, {1, 3}, {30, 64}, {0, 1}, {29, 50}},
            {{37, 70}, {4, 8}, {2, 5}, {30, 51}, {3, 6}, {20, 33}},
            {{3, 11, 48}, {1, 1, 16}, {1, 2, 5}, {2, 7, 37}, {1, 2, 6}, {1, 4, 25}},
            {{3, 11, 48}, {2, 4, 16}, {0, 1, 3}, {3, 9, 40}, {2, 0, 1}, {1, 9, 30}}};
        std::uint32_t seed = 900;
        const auto cpu = makeCpuBackend();
        for (const DType dtype : {DType::FP8E4M3, DType::FP8E5M2, DType::FP4E2M1}) {
            for (const Layout& layout : layouts) {
                ScaledDataset r = randomDataset(dtype, layout.shape, layout.block, seed++);
                if (dtype != DType::FP4E2M1) {  // NaN and Inf keep their bits through scaling
                    r.words[5] = dtype == DType::FP8E4M3 ? 0x7f : 0x7d;
                    r.words[17] = dtype == DType::FP8E4M3 ? 0xff : 0xfc;
                }
                const ScaledDataset d = nearby(r, seed++);
                const std::size_t rank = layout.shape.size();
                // A piece in place: rows of the block's box, each a run of the piece's columns.
                std::vector<std::int64_t> pieceStart(rank);
                for (std::size_t k = 0; k < rank; ++k) {
                    pieceStart[k] = layout.blockStart[k] + layout.pieceOffset[k];
                }
                const auto blockColumns = static_cast<std::size_t>(layout.blockCount.back());
                std::size_t offsetRow = 0;  // the piece's first row among the block's rows
                for (std::size_t k = 0; k + 1 < rank; ++k) {
                    offsetRow = offsetRow * static_cast<std::size_t>(layout.blockCount[k]) +
                                static_cast<std::size_t>(layout.pieceOffset[k]);
                }
                const auto offsetColumn = static_cast<std::size_t>(layout.pieceOffset.back());
                StoredRun piece;
                const BoxWords referenceBlock =
                    boxWords(r, layout.blockStart, layout.blockCount, offsetRow, offsetColumn);
                const BoxWords distributedPiece = boxWords(d, pieceStart, layout.pieceCount, 0, 0);
                piece.reference = referenceBlock.stored;
                piece.distributed = distributedPiece.stored;
                piece.rowLength = static_cast<std::size_t>(layout.pieceCount.back());
                piece.rows = static_cast<std::size_t>(product(layout.pieceCount)) / piece.rowLength;
                const std::vector<float> blockValues = r.read(layout.blockStart, layout.blockCount);
                const std::vector<float> rValues(
                    blockValues.begin() +
                        static_cast<std::ptrdiff_t>(offsetRow * blockColumns + offsetColumn),
                    blockValues.end());
                const std::vector<float> dValues = d.read(pieceStart, layout.pieceCount);
                // The whole dataset, both sides packed.
                const std::vector<std::int64_t> origin(rank, 0);
                StoredRun whole;
                const BoxWords rWhole = boxWords(r, origin, layout.shape, 0, 0);
                const BoxWords dWhole = boxWords(d, origin, layout.shape, 0, 0);
                whole.reference = rWhole.stored;
                whole.distributed = dWhole.stored;
                whole.rowLength = static_cast<std::size_t>(layout.shape.back());
                whole.rows = static_cast<std::size_t>(product(layout.shape)) / whole.rowLength;
                const std::vector<float> rAll = r.read(origin, layout.shape);
                const std::vector<float> dAll = d.read(origin, layout.shape);

                const auto check = [&](const StoredRun& run, const std::vector<float>& rv,
                                       std::size_t referenceStride, const std::vector<float>& dv) {
                    const ErrorAccumulator expected = cpu->compareRows(
                        rv.data(), referenceStride, dv.data(), run.rowLength, run.rows);
                    QVERIFY(expected.bitDifferences > 0);
                    if (on == Runner::Device) {
                        static const auto backend = gpu::makeCudaBackend(*availability());
                        agree(backend->compareStored(run), expected, rv, referenceStride, dv,
                              run.rowLength);
                        // Chunks of 7: copies that start inside a row, a block and a byte,
                        // rows gathered with their scales, both slots in turn.
                        static const gpu::CudaEngine small(availability()->devices, 7);
                        agree(small.compare(*gpu::rowRunOf(run)), expected, rv, referenceStride, dv,
                              run.rowLength);
                        return;
                    }
                    const gpu::RowRun rowRun = *gpu::rowRunOf(run);
                    agree(runOn(on, rowRun), expected, rv, referenceStride, dv, run.rowLength);
                    // Chunks shorter than a row: runs that start inside a row and a block.
                    agree(gpu::compareOnHost(rowRun, 7), expected, rv, referenceStride, dv,
                          run.rowLength);
                    // The host decoding every backend may fall back on.
                    agree(cpu->compareStored(run), expected, rv, referenceStride, dv,
                          run.rowLength);
                };
                check(piece, rValues, blockColumns, dValues);
                check(whole, rAll, whole.rowLength, dAll);
                // D held as partial sums: a second copy's words added in order, in fp32, as
                // readReplicaSum adds them (NaNs too: the first operand's, made quiet).
                const ScaledDataset e = nearby(d, seed++);
                const BoxWords eWhole = boxWords(e, origin, layout.shape, 0, 0);
                StoredRun summed = whole;
                summed.moreDistributed = std::span(&eWhole.stored, 1);
                std::vector<float> dSum = dAll;
                const std::vector<float> eAll = e.read(origin, layout.shape);
                for (std::size_t i = 0; i < dSum.size(); ++i) {
                    dSum[i] += eAll[i];
                }
                check(summed, rAll, whole.rowLength, dSum);
                if (QTest::currentTestFailed()) {
                    qWarning("failed: %s, shape %s, block %s", qPrintable(dtypeName(dtype)),
                             qPrintable(formatShape(layout.shape)),
                             qPrintable(formatShape(layout.block)));
                    return;
                }
            }
        }
    }

    void comparisonJobOnStoredWords_data() {
        QTest::addColumn<int>("runner");
        QTest::newRow("host") << static_cast<int>(Runner::Host);
        QTest::newRow("device") << static_cast<int>(Runner::Device);
    }
    void comparisonJobOnStoredWords() {
        // The comparison job gives a backend that decodes stored words the words and scales it
        // read (BlockComparer::compareStoredWords): the same results as the CPU backend's
        // floats on fp8 and fp4 traces split over TP ranks (MXFP8-like blocks along the rows,
        // NVFP4-like blocks of 16, per-row and 2-D blocks), in blocks of the job that start
        // inside a row and a byte, and on the bundled samples (bf16, partial sums, replicas).
        QFETCH(int, runner);
        const auto on = static_cast<Runner>(runner);
        if (on == Runner::Device && noDevice()) {
            QSKIP("no CUDA device");
        }
        const std::unique_ptr<MetricsBackend> words = wordsBackend(on);
        QVERIFY(words->comparesStoredWords());
        std::vector<ScaledTensor> tensors = {
            scaledTensor("layers.0.mlp.fc1", "param", DType::FP8E4M3, {16, 96}, {1, 32}, 0, 10),
            scaledTensor("layers.0.mlp.fc2", "forward_input", DType::FP4E2M1, {12, 64}, {1, 16}, 1,
                         20),
            scaledTensor("layers.0.attn.proj", "forward_output", DType::FP8E5M2, {10, 40}, {1, 20},
                         1, 30),
            scaledTensor("layers.0.attn.qkv", "forward_input", DType::FP8E4M3, {2, 6, 32},
                         {1, 3, 16}, 1, 40),
            scaledTensor("layers.0.norm", "forward_input", DType::FP4E2M1, {4, 34}, {}, 0, 50),
            // heads split over TP: pieces that are not equally spaced rows of the block
            scaledTensor("layers.1.attn.core", "forward_input", DType::FP8E5M2, {2, 3, 4, 16}, {},
                         2, 60),
            // one index of the middle dimension a shard: every other row of the block, one run
            scaledTensor("layers.1.mlp.experts", "forward_output", DType::FP8E4M3, {4, 2, 16},
                         {1, 1, 16}, 1, 70),
            // partial sums over tp, each an fp8 summand with its own block scales
            scaledTensor("layers.1.mlp.fc2", "forward_output", DType::FP8E4M3, {6, 48}, {1, 16}, 0,
                         80)};
        tensors.back().secondSummand = randomDataset(DType::FP8E4M3, {6, 48}, {1, 16}, 90);
        sameOnScaledTraces(tensors, false, *words);
        if (QTest::currentTestFailed()) {
            return;
        }
        const auto cpu = makeCpuBackend();
        // The test fixtures where they were written (CTest's "traces", scripts/gpu-check.sh):
        // partial sums in bf16 and fp32, replicas, every layout, references laid out.
        const QString fixtures = qEnvironmentVariable("TTRACE_FIXTURES");
        const QStringList cases = fixtures.isEmpty()
                                      ? QStringList()
                                      : QDir(fixtures).entryList(QDir::Dirs | QDir::NoDotAndDotDot);
        qInfo("test fixtures: %lld cases", static_cast<long long>(cases.size()));
        for (const QString& name : cases) {
            const QString folder = fixtures + QLatin1Char('/') + name;
            if (name == QStringLiteral("bad") || !QFile::exists(folder + QStringLiteral("/ref"))) {
                continue;
            }
            const TraceSet caseDist = openTraceSet(folder + QStringLiteral("/dist"));
            const TraceSet caseRef = openTraceSet(folder + QStringLiteral("/ref"));
            const TraceSet casePert = openTraceSet(folder + QStringLiteral("/pert"));
            ComparisonOptions options;
            options.chunkElements = 50;  // blocks that cut rows and pieces
            options.backend = cpu.get();
            const ComparisonOutput expected =
                compareTraceSets(caseDist, caseRef, &casePert, options);
            options.backend = words.get();
            sameComparison(compareTraceSets(caseDist, caseRef, &casePert, options), expected);
            if (QTest::currentTestFailed()) {
                qWarning("failed: fixture %s", qPrintable(name));
                return;
            }
        }
        for (const test::BundledSample& sample : test::bundledSamples()) {
            const TraceSet sampleDist = openTraceSet(sample.folder() + QStringLiteral("/dist"));
            const TraceSet sampleRef = openTraceSet(sample.folder() + QStringLiteral("/ref"));
            const TraceSet samplePert = openTraceSet(sample.folder() + QStringLiteral("/pert"));
            ComparisonOptions options;
            options.backend = cpu.get();
            const ComparisonOutput expected =
                compareTraceSets(sampleDist, sampleRef, &samplePert, options);
            QVERIFY2(!expected.results.empty(), qPrintable(sample.name));
            options.backend = words.get();
            sameComparison(compareTraceSets(sampleDist, sampleRef, &samplePert, options), expected);
            if (QTest::currentTestFailed()) {
                qWarning("failed: sample %s", qPrintable(sample.name));
                return;
            }
        }
    }

    void laidOutTrustedRunsCrossAsStoredWords_data() { comparisonJobOnStoredWords_data(); }
    void laidOutTrustedRunsCrossAsStoredWords() {
        // A trusted run laid out over ranks reaches a backend that decodes stored words as its
        // pieces' words and scales pasted together wherever every piece has the same dtype
        // (fp4 on whole bytes), and per-tensor scales (differing ones as a table), or block
        // scales on one grid that no two pieces share: no element of it decoded on the host
        // (counted on the host runner), the same results as the CPU backend's floats. Blocks
        // that straddle two pieces, and per-tensor scales that differ on one-column pieces,
        // are still assembled in fp32, with the same results. Then distributed runs taken as
        // the trusted ones: bf16 over pp x dp x tp (partial sums, data-parallel copies checked
        // on words) and copies that disagree (the same diagnostics as the CPU backend's).
        QFETCH(int, runner);
        const auto on = static_cast<Runner>(runner);
        if (on == Runner::Device && noDevice()) {
            QSKIP("no CUDA device");
        }
        const std::unique_ptr<MetricsBackend> words = wordsBackend(on);
        const auto* host = dynamic_cast<const HostWordsBackend*>(words.get());
        const auto cpu = makeCpuBackend();
        std::vector<ScaledTensor> pasted = {
            scaledTensor("layers.0.mlp.fc1", "forward_input", DType::FP8E4M3, {16, 96}, {}, 0, 110),
            scaledTensor("layers.0.attn.proj", "forward_output", DType::FP8E5M2, {10, 40}, {}, 1,
                         120),
            scaledTensor("layers.0.attn.qkv", "forward_input", DType::FP8E4M3, {2, 6, 32}, {}, 1,
                         130),
            scaledTensor("layers.1.mlp.fc2", "forward_output", DType::FP8E4M3, {6, 48}, {}, 1, 140),
            // block scales: MXFP8-like along the rows, split by rows and by whole blocks of
            // columns; a scale per row of each column shard; 2-D blocks split in the middle
            scaledTensor("layers.1.mlp.fc1", "param", DType::FP8E4M3, {16, 96}, {1, 32}, 0, 160),
            scaledTensor("layers.1.attn.proj", "forward_input", DType::FP8E4M3, {12, 64}, {1, 16},
                         1, 170),
            scaledTensor("layers.1.attn.out", "forward_output", DType::FP8E5M2, {10, 40}, {1, 20},
                         1, 180),
            scaledTensor("layers.1.attn.qkv", "forward_input", DType::FP8E4M3, {2, 6, 32},
                         {1, 3, 16}, 1, 190),
            // fp4 split by rows and by columns (whole bytes), per tensor and NVFP4-like blocks
            // of 16 along the rows
            scaledTensor("layers.2.norm", "forward_input", DType::FP4E2M1, {4, 34}, {}, 0, 200),
            scaledTensor("layers.2.mlp.fc1", "forward_input", DType::FP4E2M1, {6, 68}, {}, 1, 210),
            scaledTensor("layers.2.mlp.fc2", "forward_input", DType::FP4E2M1, {6, 64}, {1, 16}, 1,
                         220),
            scaledTensor("layers.2.attn.qkv", "forward_input", DType::FP4E2M1, {8, 64}, {1, 16}, 0,
                         230),
            // per-tensor scales that differ from rank to rank, split by rows (a batch), by
            // columns at 17, and fp4 by columns
            scaledTensor("layers.3.mlp.fc1", "forward_input", DType::FP8E4M3, {16, 48}, {}, 0, 240),
            scaledTensor("layers.3.mlp.fc2", "forward_output", DType::FP8E5M2, {6, 34}, {}, 1, 250),
            scaledTensor("layers.3.attn.qkv", "forward_input", DType::FP4E2M1, {4, 36}, {}, 1,
                         260)};
        pasted[3].secondSummand = randomDataset(DType::FP8E4M3, {6, 48}, {}, 150);
        for (std::size_t t = pasted.size() - 3; t < pasted.size(); ++t) {
            pasted[t].rank1TrustedScale = 4.0;
        }
        const std::size_t decodedBefore = host ? host->floatReferenceElements() : 0;
        sameOnScaledTraces(pasted, true, *words);
        if (QTest::currentTestFailed()) {
            return;
        }
        if (host) {
            QCOMPARE(host->floatReferenceElements() - decodedBefore, std::size_t{0});
        }
        // blocks of 32 columns cut at 24 by the shards, whose halves may carry two scales;
        // per-tensor scales that differ on shards of one column (a table would hold a float
        // an element): each assembled in fp32
        std::vector<ScaledTensor> inFloats = {
            scaledTensor("layers.0.mlp.fc2", "forward_input", DType::FP8E4M3, {6, 48}, {1, 32}, 1,
                         270),
            scaledTensor("layers.0.norm", "forward_input", DType::FP8E4M3, {8, 2}, {}, 1, 280)};
        inFloats[1].rank1TrustedScale = 4.0;
        for (const ScaledTensor& tensor : inFloats) {
            const std::size_t start = host ? host->floatReferenceElements() : 0;
            sameOnScaledTraces({tensor}, true, *words);
            if (QTest::currentTestFailed()) {
                return;
            }
            if (host) {
                QVERIFY2(host->floatReferenceElements() > start, tensor.name.constData());
            }
        }
        const QString fixtures = qEnvironmentVariable("TTRACE_FIXTURES");
        if (fixtures.isEmpty()) {
            return;  // none written: CTest's "traces" and scripts/gpu-check.sh write them
        }
        for (const QString& name : {QStringLiteral("combined"), QStringLiteral("bug_replica")}) {
            const QString folder = fixtures + QLatin1Char('/') + name;
            const TraceSet trusted = openTraceSet(folder + QStringLiteral("/dist"));
            const TraceSet checked = openTraceSet(folder + QStringLiteral("/ref"));
            ComparisonOptions options;
            options.chunkElements = 50;
            options.backend = cpu.get();
            const ComparisonOutput expected = compareTraceSets(checked, trusted, nullptr, options);
            QVERIFY2(!expected.results.empty(), qPrintable(name));
            options.backend = words.get();
            const std::size_t before = host ? host->floatReferenceElements() : 0;
            const ComparisonOutput got = compareTraceSets(checked, trusted, nullptr, options);
            sameComparison(got, expected);
            QStringList gotText, expectedText;
            for (const Diagnostic& diagnostic : got.diagnostics) {
                gotText << diagnostic.toString();
            }
            for (const Diagnostic& diagnostic : expected.diagnostics) {
                expectedText << diagnostic.toString();
            }
            QCOMPARE(gotText, expectedText);
            // bug_replica's trusted copies of a gradient differ: the tensor is not compared
            QCOMPARE(
                expectedText.join(QLatin1Char('\n')).contains(QStringLiteral("cannot be trusted")),
                name == QStringLiteral("bug_replica"));
            if (host && name == QStringLiteral("combined")) {  // bf16 (bug_replica is fp32)
                QCOMPARE(host->floatReferenceElements() - before, std::size_t{0});
            }
        }
    }

    void elementProfile_data() { addRunners(); }
    void elementProfile() {
        // The histogram and image the GUI shows: random pairs of every dtype (so errors over
        // every decade, exact ones and unrelated ones), and the special values.
        QFETCH(int, runner);
        const auto on = static_cast<Runner>(runner);
        if (on == Runner::Device && noDevice()) {
            QSKIP("no CUDA device");
        }
        std::uint32_t seed = 500;
        for (const StoredType type : kTypes) {
            const auto [r, d] = randomPair(type, 37 * 301, seed++);
            profileAgrees(on, r.values, d.values, 37, 301);
            const auto [rs, ds] = edgePair(type);
            profileAgrees(on, rs.values, ds.values, 1, rs.values.size());
            profileAgrees(on, rs.values, ds.values, rs.values.size(), 1);
            if (QTest::currentTestFailed()) {
                qWarning("failed: %s", storedTypeName(type));
                return;
            }
        }
    }

    void concurrentCallers() {
        // The comparison job calls from every worker thread at once.
        if (noDevice()) {
            QSKIP("no CUDA device");
        }
        const auto [r, d] = randomPair(StoredType::BF16, 300001, 7);
        const ErrorAccumulator cpu =
            makeCpuBackend()->compare(r.values.data(), d.values.data(), r.values.size());
        std::vector<ErrorAccumulator> got(8);
        std::vector<std::thread> threads;
        for (std::size_t t = 0; t < got.size(); ++t) {
            threads.emplace_back([&, t] {
                const gpu::RowRun run = oneRow(r, d, r.size());
                got[t] = runOn(Runner::Device, run);
            });
        }
        for (auto& thread : threads) {
            thread.join();
        }
        for (const auto& acc : got) {
            agree(acc, cpu, r.values, r.size(), d.values, d.size());
        }
    }

    void beyondTwoToThe31Elements_data() {
        QTest::addColumn<int>("runner");
        QTest::newRow("host") << static_cast<int>(Runner::Host);
        QTest::newRow("device") << static_cast<int>(Runner::Device);
    }
    void beyondTwoToThe31Elements() {
        // Positions past 2^31 survive the chunking: fp8, so that it fits in a few GB.
        QFETCH(int, runner);
        const auto on = static_cast<Runner>(runner);
        if (on == Runner::Device && noDevice()) {
            QSKIP("no CUDA device");
        }
        if (kSanitized) {
            QSKIP("2^31 elements take minutes under the sanitizers; the unsanitized build runs it");
        }
        const std::size_t n = (std::size_t{1} << 31) + 4099;
        const std::size_t planted = (std::size_t{1} << 31) + 77;
        Side r, d;
        r.type = d.type = StoredType::E4M3;
        r.scaleInv = d.scaleInv = 0.5F;
        r.words.resize(n);
        d.words.resize(n);
        std::uint64_t state = 88172645463325252ULL;
        for (std::size_t i = 0; i < n; i += 8) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            const std::uint64_t word = state & 0x3f3f3f3f3f3f3f3fULL;  // finite, |x| < 2
            std::memcpy(r.words.data() + i, &word, std::min<std::size_t>(8, n - i));
        }
        d.words = r.words;
        for (std::size_t i = 0; i < n; i += 1000003) {
            d.words[i] ^= 0x01;  // the last bit of the mantissa
        }
        r.words[planted] = 0x38;  // 1.0 -> 448 * ... : the largest error
        d.words[planted] = 0x7e;
        const gpu::RowRun run = oneRow(r, d, n);
        const ErrorAccumulator got = runOn(on, run);
        // The oracle, chunk by chunk.
        const auto cpu = makeCpuBackend();
        ErrorAccumulator expected;
        const std::size_t chunk = std::size_t{1} << 22;
        std::vector<float> rv(chunk), dv(chunk);
        for (std::size_t start = 0; start < n; start += chunk) {
            const std::size_t m = std::min(chunk, n - start);
            decode(DType::FP8E4M3, r.words.data() + start, rv.data(), m);
            decode(DType::FP8E4M3, d.words.data() + start, dv.data(), m);
            for (std::size_t i = 0; i < m; ++i) {
                rv[i] *= 0.5F;
                dv[i] *= 0.5F;
            }
            ErrorAccumulator part = cpu->compare(rv.data(), dv.data(), m);
            part.maxAbsPos += part.maxAbsPos >= 0 ? static_cast<std::int64_t>(start) : 0;
            part.maxRelPos += part.maxRelPos >= 0 ? static_cast<std::int64_t>(start) : 0;
            expected.merge(part);
        }
        QCOMPARE(got.count, static_cast<std::int64_t>(n));
        QCOMPARE(got.maxAbsPos, static_cast<std::int64_t>(planted));
        QCOMPARE(got.maxAbsPos, expected.maxAbsPos);
        QCOMPARE(got.maxAbsError, expected.maxAbsError);
        QCOMPARE(got.bitDifferences, expected.bitDifferences);
        QCOMPARE(got.maxRelError, expected.maxRelError);
        QVERIFY(closeSum(got.sumSqDiff, expected.sumSqDiff, expected.sumSqDiff, got.count));
        QVERIFY(closeSum(got.sumSqRef, expected.sumSqRef, expected.sumSqRef, got.count));
        QVERIFY(closeSum(got.sumDot, expected.sumDot, expected.sumSqRef + expected.sumSqDist,
                         got.count));
    }

    void everyBundledSampleAgreesWithTheCpu() {
        // gpu-check's comparison of the backends on real traces: on every bundled sample the
        // CUDA backend gives the CPU backend's exit code, verdict and localization, and every
        // tensor's relative error and threshold up to the order of the sums (1e-9 relative).
        if (noDevice()) {
            QSKIP(qPrintable(QStringLiteral("no CUDA device: ") +
                             QString::fromStdString(availability()->reason)));
        }
        const auto samples = test::bundledSamples();
        QVERIFY(!samples.empty());
        QTemporaryDir out;
        for (const test::BundledSample& sample : samples) {
            QJsonObject reports[2];
            int codes[2] = {-1, -1};
            for (const int side : {0, 1}) {
                const QString json =
                    out.filePath(sample.name + (side ? QStringLiteral(".cuda.json")
                                                     : QStringLiteral(".cpu.json")));
                codes[side] =
                    runChecker(sample, side ? QStringLiteral("cuda") : QStringLiteral("cpu"), json)
                        .code;
                QFile file(json);
                QVERIFY2(file.open(QIODevice::ReadOnly), qPrintable(json));
                reports[side] = QJsonDocument::fromJson(file.readAll()).object();
            }
            const QString what = sample.name + QStringLiteral(": ");
            QCOMPARE(codes[1], codes[0]);
            QCOMPARE(codes[0], sample.exitCode);
            QVERIFY2(reports[1][QStringLiteral("verdict")] == reports[0][QStringLiteral("verdict")],
                     qPrintable(what + QStringLiteral("the verdicts differ")));
            QVERIFY2(reports[1][QStringLiteral("localization")] ==
                         reports[0][QStringLiteral("localization")],
                     qPrintable(what + QStringLiteral("the localizations differ")));
            const QJsonArray a = reports[0][QStringLiteral("tensors")].toArray();
            const QJsonArray b = reports[1][QStringLiteral("tensors")].toArray();
            QCOMPARE(b.size(), a.size());
            for (qsizetype i = 0; i < a.size(); ++i) {
                for (const auto& field :
                     {QStringLiteral("judged_error"), QStringLiteral("normalized_error")}) {
                    const double x = a[i][field].toDouble(), y = b[i][field].toDouble();
                    QVERIFY2(std::fabs(x - y) <= 1e-9 * std::max(1.0, std::fabs(x)),
                             qPrintable(what + QStringLiteral("tensor %1's %2: %3 vs %4")
                                                   .arg(i)
                                                   .arg(field)
                                                   .arg(x)
                                                   .arg(y)));
                }
            }
        }
    }

    void checkerSaysWhichBackendRan() {
        // The real binary on a bundled sample: with a GPU, CUDA runs and agrees with the CPU;
        // without one, --backend cuda exits 2 with the reason and auto runs on the CPU, saying
        // why.
        const test::BundledSample sample = test::bundledSample(QStringLiteral("clean"));
        QVERIFY(!sample.name.isEmpty());
        QTemporaryDir out;
        const auto check = [&](const QString& backend, const QString& json) {
            const CheckerRun run = runChecker(sample, backend, json);
            return std::tuple{run.code, run.out, run.err};
        };
        const QString cpuJson = out.filePath(QStringLiteral("cpu.json"));
        const auto [cpuCode, cpuOut, cpuErr] = check(QStringLiteral("cpu"), cpuJson);
        QCOMPARE(cpuCode, 0);
        QVERIFY2(cpuOut.contains(QStringLiteral("backend: CPU\n")), qPrintable(cpuOut));
        const auto& available = *availability();
        const QString cudaJson = out.filePath(QStringLiteral("cuda.json"));
        const auto [cudaCode, cudaOut, cudaErr] = check(QStringLiteral("cuda"), cudaJson);
        const auto [autoCode, autoOut, autoErr] =
            check(QStringLiteral("auto"), out.filePath(QStringLiteral("auto.json")));
        QCOMPARE(autoCode, 0);
        if (available.devices.empty()) {
            const QString reason = QString::fromStdString(available.reason);
            QVERIFY(!reason.isEmpty());
            QCOMPARE(cudaCode, 2);
            QVERIFY2(cudaErr.contains(
                         QStringLiteral("--backend cuda: the CUDA backend cannot run: ") + reason),
                     qPrintable(cudaErr));
            QVERIFY2(autoOut.contains(QStringLiteral("backend: CPU (CUDA not used: ") + reason +
                                      QStringLiteral(")")),
                     qPrintable(autoOut));
            return;
        }
        QCOMPARE(cudaCode, 0);
        QVERIFY2(cudaOut.contains(QStringLiteral("backend: CUDA on ")), qPrintable(cudaOut));
        QVERIFY2(autoOut.contains(QStringLiteral("backend: CUDA on ")), qPrintable(autoOut));
        // Every tensor's normalized error as on the CPU, up to the order of the sums.
        const auto results = [](const QString& path) {
            QFile file(path);
            file.open(QIODevice::ReadOnly);
            return QJsonDocument::fromJson(file.readAll())[QStringLiteral("tensors")].toArray();
        };
        const QJsonArray a = results(cpuJson), b = results(cudaJson);
        QVERIFY(!a.isEmpty());
        QCOMPARE(a.size(), b.size());
        for (qsizetype i = 0; i < a.size(); ++i) {
            const double x = a[i][QStringLiteral("normalized_error")].toDouble();
            const double y = b[i][QStringLiteral("normalized_error")].toDouble();
            QVERIFY2(std::fabs(x - y) <= 1e-9 * std::max(1.0, std::fabs(x)),
                     qPrintable(QStringLiteral("result %1: %2 vs %3").arg(i).arg(x).arg(y)));
        }
    }
};

QTEST_GUILESS_MAIN(TestGpuBackend)
#include "test_gpu_backend.moc"

// libFuzzer: any bytes as a rank file, indexed and read as a check does, with HDF5 in worker
// processes (IsolatedHdf5.h; $TTRACE_HDF5_WORKER names the worker). libhdf5 crashes, aborts
// and hangs on many such files: each must end as a diagnostic, never take this process down.
#include <QTemporaryDir>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "FuzzInput.h"
#include "trace/Hdf5Reader.h"
#include "trace/IsolatedHdf5.h"

namespace {

// Boxes larger than this are not read: the values, not their size, are what is fuzzed.
constexpr std::int64_t kMaxElements = std::int64_t{1} << 20;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    ttrace::Hdf5Isolation isolation;
    isolation.workerPath = qEnvironmentVariable("TTRACE_HDF5_WORKER");
    isolation.limits.stallSeconds = 5;
    isolation.limits.memoryBytes = std::int64_t{1} << 30;
    if (isolation.workerPath.isEmpty()) {
        std::fputs("fuzz_rank_file: set TTRACE_HDF5_WORKER to the ttrace-hdf5-worker\n", stderr);
        std::exit(2);
    }
    ttrace::isolateHdf5(isolation);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const QTemporaryDir folder;
    const QString path = folder.filePath(QStringLiteral("rank00000.h5"));
    ttrace::fuzz::writeFile(path, data, size);
    const ttrace::RankFileIndex index = ttrace::indexRankFileIsolated(path, nullptr);
    if (!index.opened && index.diagnostics.empty()) {
        std::abort();  // an unreadable file always says why
    }
    // A reader per input: the file at this path is a new one each time.
    ttrace::Hdf5Reader reader;
    for (const auto& record : index.records) {
        std::int64_t elements = 1;
        for (const auto extent : record.localShape) {
            elements = extent > 0 && elements <= kMaxElements / extent ? elements * extent
                                                                       : kMaxElements + 1;
        }
        if (elements > kMaxElements) {
            continue;
        }
        std::vector<float> values(static_cast<std::size_t>(elements));
        const std::vector<std::int64_t> start(record.localShape.size(), 0);
        static_cast<void>(reader.read(record, start, record.localShape, values.data()));
    }
    return 0;
}

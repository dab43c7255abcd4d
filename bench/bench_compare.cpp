// Measures, on one trace set, the throughput of (a) merely reading every dataset the
// comparison reads and (b) the full comparison, in trace bytes per second, with the peak
// resident memory of the process. Each mode runs in its own process (bench/run_bench.sh) so
// that peak memory belongs to one mode only.
#include <sys/resource.h>

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTextStream>
#include <atomic>
#include <thread>
#include <vector>

#include "BackendOffer.h"
#include "compare/BackendChoice.h"
#include "compare/ComparisonJob.h"
#include "mapping/BlockPlan.h"
#include "trace/Hdf5Reader.h"
#include "trace/TraceSet.h"

using namespace ttrace;

namespace {

double peakRssMb() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

// Reads every dataset of the given sets block by block on `threads` threads, decoding to
// float like the comparison does, and computes nothing.
std::int64_t readEverything(const std::vector<const TraceSet*>& sets, int threads,
                            std::int64_t chunkElements, QString* error) {
    std::vector<const TensorRecord*> records;
    for (const auto* set : sets) {
        for (const auto& record : set->records) {
            records.push_back(&record);
        }
    }
    Hdf5Reader reader;
    std::atomic<std::size_t> next{0};
    std::atomic<std::int64_t> bytes{0};
    std::atomic<bool> failed{false};
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&] {
            std::vector<float> buffer(static_cast<std::size_t>(chunkElements));
            for (std::size_t i = next++; i < records.size() && !failed; i = next++) {
                const auto& record = *records[i];
                for (const auto& block :
                     planBlocks(ShardRanges::whole(record.localShape), chunkElements)) {
                    if (reader.read(record, block.localStart, block.count, buffer.data())) {
                        failed = true;
                        return;
                    }
                }
                bytes += record.storedBytes();
            }
        });
    }
    for (auto& worker : workers) {
        worker.join();
    }
    if (failed) {
        *error = QStringLiteral("a dataset could not be read");
    }
    return bytes;
}

}  // namespace

int main(int argc, char** argv) {
    QCoreApplication app(argc, argv);
    QTextStream out(stdout);
    QTextStream err(stderr);
    const QStringList args = QCoreApplication::arguments();
    if (args.size() < 4 || (args[1] != u"read" && args[1] != u"compare")) {
        err << "usage: bench_compare read|compare DIST REF [PERT] [THREADS] [CHUNK_ELEMENTS]\n";
        return 2;
    }
    const bool compare = args[1] == u"compare";
    // Where the comparison runs, as ttrace-check --backend: auto unless TTRACE_BENCH_BACKEND.
    const QString backendName =
        qEnvironmentVariable("TTRACE_BENCH_BACKEND", QStringLiteral("auto"));
    const auto backendKind = backendKindFromName(backendName);
    if (!backendKind) {
        err << "bench_compare: TTRACE_BENCH_BACKEND takes auto, cpu or cuda\n";
        return 2;
    }
    const BackendChoice backend = chooseBackend(*backendKind, cudaProbe());
    if (!backend.backend) {
        err << "bench_compare: " << backend.error << '\n';
        return 2;
    }
    const int threads =
        args.size() > 5 ? args[5].toInt() : static_cast<int>(std::thread::hardware_concurrency());
    const std::int64_t chunkElements =
        args.size() > 6 ? args[6].toLongLong() : kDefaultChunkElements;

    const TraceSet distributed = openTraceSet(args[2]);
    const TraceSet reference = openTraceSet(args[3]);
    std::optional<TraceSet> perturbed;
    if (args.size() > 4 && !args[4].isEmpty()) {
        perturbed = openTraceSet(args[4]);
    }
    if (!distributed.usable() || !reference.usable() || (perturbed && !perturbed->usable())) {
        err << "bench_compare: the trace sets are not usable\n";
        return 2;
    }

    QElapsedTimer timer;
    timer.start();
    std::int64_t bytes = 0;
    std::size_t tensors = 0;
    std::int64_t elements = 0;  // of the distributed run, compared
    if (compare) {
        ComparisonOptions options;
        options.threads = threads;
        options.chunkElements = chunkElements;
        options.backend = backend.backend.get();
        const auto output =
            compareTraceSets(distributed, reference, perturbed ? &*perturbed : nullptr, options);
        bytes = output.bytesCompared;
        tensors = output.results.size();
        for (const TensorResult& result : output.results) {
            elements += result.metrics.count;
        }
    } else {
        std::vector<const TraceSet*> sets{&distributed, &reference};
        if (perturbed) {
            sets.push_back(&*perturbed);
        }
        QString error;
        bytes = readEverything(sets, threads, chunkElements, &error);
        if (!error.isEmpty()) {
            err << "bench_compare: " << error << '\n';
            return 2;
        }
    }
    const double seconds = static_cast<double>(timer.nsecsElapsed()) / 1e9;
    const QJsonObject result{
        {QStringLiteral("mode"), args[1]},
        {QStringLiteral("threads"), threads},
        {QStringLiteral("backend"),
         compare ? QString::fromStdString(backend.backend->name()) : QStringLiteral("none")},
        {QStringLiteral("bytes"), static_cast<double>(bytes)},
        {QStringLiteral("tensors"), static_cast<double>(tensors)},
        {QStringLiteral("elements"), static_cast<double>(elements)},
        {QStringLiteral("bytes_to_device"),
         compare ? static_cast<double>(backend.backend->bytesToDevice()) : 0.0},
        {QStringLiteral("seconds"), seconds},
        {QStringLiteral("gb_per_s"), static_cast<double>(bytes) / seconds / 1e9},
        {QStringLiteral("peak_rss_mb"), peakRssMb()}};
    out << QJsonDocument(result).toJson(QJsonDocument::Compact);
    return 0;
}

// The GUI at scale: opens a checked trace set in the real window (offscreen platform) with its
// results in the cache and times each step of the drill-down to the first fault, with the
// resident memory after each step and the peak; then the time until the tensor's element view
// is computed. Prints one JSON line.
// Usage: bench_gui DIST REF PERT (run ttrace-check on them first: the window then loads the
// stored results instead of comparing; TTRACE_CACHE_DIR names the cache of both).
#include <QApplication>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTextStream>

#include "ElementProfileController.h"
#include "HeatmapView.h"
#include "MainWindow.h"
#include "TensorDetailPanel.h"

using namespace ttrace;

namespace {

// A field of /proc/self/status in MiB ("VmRSS", "VmHWM").
double statusMiB(const char* field) {
    QFile status(QStringLiteral("/proc/self/status"));
    if (!status.open(QIODevice::ReadOnly)) {
        return -1;
    }
    const QByteArray prefix = QByteArray(field) + ':';
    for (const QByteArray& line : status.readAll().split('\n')) {
        if (line.startsWith(prefix)) {
            return line.mid(prefix.size()).trimmed().split(' ').front().toDouble() / 1024.0;
        }
    }
    return -1;
}

double seconds(const QElapsedTimer& timer) {
    return static_cast<double>(timer.nsecsElapsed()) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
    qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("ttrace-bench"));
    const QStringList args = QApplication::arguments();
    if (args.size() != 4) {
        QTextStream(stderr) << "usage: bench_gui DIST REF PERT\n";
        return 2;
    }
    QJsonObject timings;
    const auto step = [&](const QString& name, const QElapsedTimer& timer) {
        timings[name + QStringLiteral("_s")] = seconds(timer);
        timings[name + QStringLiteral("_rss_mib")] = statusMiB("VmRSS");
    };
    timings[QStringLiteral("start_rss_mib")] = statusMiB("VmRSS");

    MainWindow window;
    window.resize(1700, 950);
    window.show();
    QElapsedTimer timer;
    timer.start();
    QEventLoop loop;
    QObject::connect(&window, &MainWindow::reportShown, &loop, &QEventLoop::quit);
    window.openTraces({args[1], args[2], args[3]});
    loop.exec();
    step(QStringLiteral("open"), timer);
    const auto report = window.report();
    if (!report || !report->fromCache || !report->localization.firstFaulty) {
        QTextStream(stderr) << "bench_gui: the results must come from the cache and name a "
                               "first faulty tensor (run ttrace-check first, with --bug)\n";
        return 1;
    }

    timer.restart();
    static_cast<void>(window.heatmap()->grab());
    step(QStringLiteral("first_paint"), timer);

    const std::size_t first = *report->localization.firstFaulty;
    const TensorResult& faulty = report->comparison.results[first];
    Location ranks;
    ranks.view = Location::View::LayerRanks;
    ranks.layer = faulty.layer;
    timer.restart();
    window.navigate(ranks);
    static_cast<void>(window.rankHeatmap()->grab());
    step(QStringLiteral("ranks_of_layer"), timer);
    timings[QStringLiteral("ranks_of_layer_rows")] =
        static_cast<qint64>(window.rankHeatmap()->grid().rowLabels.size());

    Location tensor = ranks;
    tensor.result = first;
    timer.restart();
    window.navigate(tensor);
    static_cast<void>(window.detail()->grab());
    step(QStringLiteral("tensor_detail"), timer);

    // The element view computes on a worker (reading the tensor's records from the index cache).
    if (window.profiles()->isRunning()) {
        QEventLoop profiled;
        QObject::connect(window.profiles(), &ElementProfileController::finished, &profiled,
                         &QEventLoop::quit);
        QObject::connect(window.profiles(), &ElementProfileController::failed, &profiled,
                         &QEventLoop::quit);
        profiled.exec();
    }
    step(QStringLiteral("element_view"), timer);

    // What the window holds per piece: the suspects of its memory.
    qint64 pieces = 0, rankSeqEntries = 0;
    for (const TensorResult& r : report->comparison.results) {
        pieces += static_cast<qint64>(r.shards.size());
        rankSeqEntries += static_cast<qint64>(r.rankSeq.size());
    }
    timings[QStringLiteral("pieces")] = pieces;
    timings[QStringLiteral("rank_seq_entries")] = rankSeqEntries;
    timings[QStringLiteral("tensors")] = static_cast<qint64>(report->comparison.results.size());
    timings[QStringLiteral("ranks")] =
        static_cast<qint64>(report->distributed.manifest.ranks.size());
    timings[QStringLiteral("peak_rss_mib")] = statusMiB("VmHWM");
    QTextStream(stdout) << QJsonDocument(timings).toJson(QJsonDocument::Compact) << '\n';
    return 0;
}

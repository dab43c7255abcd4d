// ElementProfileController on a copy of a real trace: each request reads only its tensor's
// records, from the index cache when the rank files are unchanged and from the files when one
// changed, and gives the profile the whole trace sets give; without a cache it still works;
// a rank file that became unreadable is named in the failure.
#include <QFile>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>
#include <filesystem>

#include "ElementErrorImage.h"
#include "ElementProfileController.h"
#include "FolderCopy.h"
#include "TestPaths.h"
#include "store/CacheLocation.h"
#include "store/IndexCache.h"
#include "trace/FileStamp.h"
#include "trace/TraceSet.h"

using namespace ttrace;

namespace {

// Replaces `file` by `source` (or by garbage of the same size when `source` is empty) with a
// modification time one second later than before: a different file for the cache.
bool replaceFile(const QString& file, const QString& source) {
    const std::filesystem::path path = file.toStdString();
    const auto mtime = std::filesystem::last_write_time(path);
    if (source.isEmpty()) {
        QFile f(file);
        if (!f.open(QIODevice::ReadWrite) ||
            f.write(QByteArray(static_cast<qsizetype>(f.size()), 'x')) != f.size()) {
            return false;
        }
    } else if (!QFile::remove(file) || !QFile::copy(source, file)) {
        return false;
    }
    std::filesystem::last_write_time(path, mtime + std::chrono::seconds(1));
    return true;
}

// The outcome of one request on a fresh controller (nothing kept from an earlier request).
struct Answer {
    std::shared_ptr<const ElementErrorProfile> profile;
    QString failure;
};

Answer request(const QString& dist, const QString& ref, const TensorKey& key) {
    ElementProfileController controller;
    QSignalSpy finished(&controller, &ElementProfileController::finished);
    QSignalSpy failed(&controller, &ElementProfileController::failed);
    controller.request(dist, ref, key, {});
    Answer answer;
    if (!QTest::qWaitFor([&] { return finished.count() + failed.count() > 0; }, 60000)) {
        answer.failure = QStringLiteral("no answer within 60 s");
    } else if (!finished.isEmpty()) {
        answer.profile = finished.at(0).at(0).value<std::shared_ptr<const ElementErrorProfile>>();
    } else {
        answer.failure = failed.at(0).at(0).toString();
    }
    return answer;
}

// The profile of the whole trace sets, opened without a cache.
ElementErrorProfile expectedProfile(const QString& dist, const QString& ref, const TensorKey& key,
                                    std::vector<int> preferredRanks = {}) {
    ProfileOptions options;
    options.preferredRanks = std::move(preferredRanks);
    auto outcome = profileElementErrors(openTraceSet(dist), openTraceSet(ref), key, options);
    return outcome.profile ? *outcome.profile : ElementErrorProfile{};
}

void compareProfiles(const ElementErrorProfile& a, const ElementErrorProfile& b) {
    QCOMPARE(a.key, b.key);
    QCOMPARE(a.globalShape, b.globalShape);
    QCOMPARE(a.histogram.bins, b.histogram.bins);
    QCOMPARE(a.histogram.exact, b.histogram.exact);
    QCOMPARE(a.histogram.below, b.histogram.below);
    QCOMPARE(a.histogram.above, b.histogram.above);
    QCOMPARE(a.image.maxError, b.image.maxError);
    QCOMPARE(a.shards.size(), b.shards.size());
    for (std::size_t s = 0; s < a.shards.size(); ++s) {
        QCOMPARE(a.shards[s].ranks, b.shards[s].ranks);
        QCOMPARE(a.shards[s].rects, b.shards[s].rects);
    }
    QCOMPARE(a.referenceShards.size(), b.referenceShards.size());
    for (std::size_t s = 0; s < a.referenceShards.size(); ++s) {
        QCOMPARE(a.referenceShards[s].ranks, b.referenceShards[s].ranks);
        QCOMPARE(a.referenceShards[s].rects, b.referenceShards[s].rects);
    }
}

}  // namespace

class TestGuiElementController : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void init() {
        QVERIFY(traces_.isValid() && cache_.isValid());
        dist_ = traces_.filePath(QStringLiteral("dist"));
        QVERIFY(test::copyFolder(test::fixture(QStringLiteral("combined"), QStringLiteral("dist")),
                                 dist_));
        qputenv("TTRACE_CACHE_DIR", QFile::encodeName(cache_.path()));
    }
    void cleanup() {
        QDir(dist_).removeRecursively();
        QDir(cache_.path()).removeRecursively();
        QDir().mkpath(cache_.path());
    }

    // layers.1.fc1 forward_output it0 mb1, the tensor bug_shard's rank 5 gets wrong.
    void cachedThenChangedRankFile() {
        const QString ref = test::fixture(QStringLiteral("combined"), QStringLiteral("ref"));
        const TensorKey key{QStringLiteral("layers.1.fc1"), TensorKind::ForwardOutput, 0, 0, 1};
        const QString rank5 = dist_ + QStringLiteral("/rank00005.h5");

        const Answer clean = request(dist_, ref, key);
        QVERIFY2(clean.profile, qPrintable(clean.failure));
        compareProfiles(*clean.profile, expectedProfile(dist_, ref, key));
        QVERIFY(clean.profile->histogram.countAtOrAbove(0.1) == 0);
        // The request filled the cache with every rank file's index.
        QString error;
        auto cache = IndexCache::open(
            QDir(cacheDirectory()).filePath(QStringLiteral("index.sqlite")), &error);
        QVERIFY2(cache, qPrintable(error));
        const auto stamp = fileStamp(rank5);
        QVERIFY(stamp && cache->isCurrent(rank5, stamp->size, stamp->mtimeNs));

        // bug_shard's rank 5 in place of the clean one: its stale entry is not used.
        QVERIFY(replaceFile(rank5, test::fixture(QStringLiteral("bug_shard"),
                                                 QStringLiteral("dist/rank00005.h5"))));
        const Answer buggy = request(dist_, ref, key);
        QVERIFY2(buggy.profile, qPrintable(buggy.failure));
        compareProfiles(*buggy.profile, expectedProfile(dist_, ref, key));
        QVERIFY(buggy.profile->histogram.countAtOrAbove(0.1) > 0);

        // Garbage in place of rank 5: the failure names the file.
        QVERIFY(replaceFile(rank5, QString()));
        const Answer broken = request(dist_, ref, key);
        QVERIFY(!broken.profile);
        QVERIFY2(broken.failure.contains(rank5) &&
                     broken.failure.contains(QStringLiteral("is not a readable HDF5 file")),
                 qPrintable(broken.failure));
    }

    void withoutACache() {
        // A cache folder that cannot be created: no cache at all.
        QFile blocker(cache_.filePath(QStringLiteral("file")));
        QVERIFY(blocker.open(QIODevice::WriteOnly));
        blocker.close();
        qputenv("TTRACE_CACHE_DIR", QFile::encodeName(blocker.fileName() + QStringLiteral("/sub")));
        QCOMPARE(cacheDirectory(), QString());

        const QString ref = test::fixture(QStringLiteral("combined"), QStringLiteral("ref"));
        const TensorKey key{QStringLiteral("layers.0.fc2.weight"), TensorKind::ParamGrad, 0, 1, -1};
        const Answer answer = request(dist_, ref, key);
        QVERIFY2(answer.profile, qPrintable(answer.failure));
        compareProfiles(*answer.profile, expectedProfile(dist_, ref, key));
        QVERIFY(answer.profile->histogram.total() > 0);
    }

    // Asking again for the same tensor (another rank's copy) reuses its records; another
    // tensor reads its own.
    void successiveRequests() {
        const QString ref = test::fixture(QStringLiteral("combined"), QStringLiteral("ref"));
        const TensorKey first{QStringLiteral("layers.0.fc1"), TensorKind::InputGrad, 0, 1, 0};
        const TensorKey second{QStringLiteral("layers.1.fc2"), TensorKind::OutputGrad, 0, 0, 1};
        ElementProfileController controller;
        QSignalSpy finished(&controller, &ElementProfileController::finished);
        controller.request(dist_, ref, first, {0});
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
        controller.request(dist_, ref, first, {1});
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 2, 60000);
        controller.request(dist_, ref, second, {});
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 3, 60000);
        const std::pair<TensorKey, std::vector<int>> asked[] = {
            {first, {0}}, {first, {1}}, {second, {}}};
        for (int i = 0; i < 3; ++i) {
            const auto profile =
                finished.at(i).at(0).value<std::shared_ptr<const ElementErrorProfile>>();
            QVERIFY(profile);
            compareProfiles(*profile, expectedProfile(dist_, ref, asked[i].first, asked[i].second));
        }
    }

    // A reference laid out over ranks (cp_zigzag's context-parallel run as the trusted one, its
    // single-device run as the one checked): the controller reads its pieces of the tensor,
    // and the image draws them and names them under the pointer.
    void laidOutReferencePiecesAreDrawn() {
        const QString single = test::fixture(QStringLiteral("cp_zigzag"), QStringLiteral("ref"));
        const QString laidOut = test::fixture(QStringLiteral("cp_zigzag"), QStringLiteral("dist"));
        const TensorKey key{QStringLiteral("layers.0.attn"), TensorKind::ForwardOutput, 0, 0, 0};
        const Answer answer = request(single, laidOut, key);
        QVERIFY2(answer.profile, qPrintable(answer.failure));
        compareProfiles(*answer.profile, expectedProfile(single, laidOut, key));
        QCOMPARE(answer.profile->referenceShards.size(), std::size_t{2});

        ElementErrorImage image;
        image.resize(400, 300);
        image.showProfile(answer.profile, 1e-3, {});
        // Rows [0, 4) are rank 0's first zig-zag chunk of the reference.
        const QImage drawn = image.toImage(image.size());
        const QString tip = image.toolTipAt(QPoint(image.width() / 2, 12));
        QVERIFY2(tip.contains(QStringLiteral("reference piece")) &&
                     tip.contains(QStringLiteral("on ranks 0")),
                 qPrintable(tip));
        // The blue dash-dot lines are drawn: some pixel carries their colour.
        bool blue = false;
        for (int y = 0; y < drawn.height() && !blue; ++y) {
            for (int x = 0; x < drawn.width() && !blue; ++x) {
                blue = drawn.pixelColor(x, y) == QColor(0x30, 0x90, 0xff);
            }
        }
        QVERIFY(blue);
    }

private:
    QTemporaryDir traces_;
    QTemporaryDir cache_;
    QString dist_;
};

QTEST_MAIN(TestGuiElementController)
#include "test_gui_element_controller.moc"

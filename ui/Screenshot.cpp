#include "Screenshot.h"

#include <QCoreApplication>
#include <QFileInfo>
#include <QPixmap>
#include <QTabWidget>
#include <QTextStream>
#include <QTimer>
#include <functional>

#include "ElementProfileController.h"
#include "MainWindow.h"
#include "TensorDetailPanel.h"

namespace ttrace {

namespace {

constexpr int kSettleMs = 200;  // lets layouts and plots settle before a grab
constexpr int kPollMs = 50;

bool save(MainWindow* window, const QString& path) {
    if (window->grab().save(path)) {
        return true;
    }
    QTextStream(stderr) << QStringLiteral("ttrace: cannot write ") << path << '\n';
    return false;
}

// `path` with `suffix` before its extension: out/a.png, "-ranks" -> out/a-ranks.png.
QString stepPath(const QString& path, const QString& suffix) {
    const QFileInfo info(path);
    return info.path() + QLatin1Char('/') + info.completeBaseName() + suffix + QLatin1Char('.') +
           info.suffix();
}

// Calls `then` once the element profile of the shown tensor is no longer being computed.
void whenProfiled(MainWindow* window, std::function<void()> then) {
    if (!window->profiles()->isRunning()) {
        QTimer::singleShot(kSettleMs, window, std::move(then));
        return;
    }
    QTimer::singleShot(kPollMs, window, [window, then = std::move(then)]() mutable {
        whenProfiled(window, std::move(then));
    });
}

}  // namespace

void screenshotWhenReportShown(MainWindow* window, const QString& path, bool drillDown) {
    QObject::connect(window, &MainWindow::reportShown, window, [window, path, drillDown] {
        window->goToFirstFault();
        QTimer::singleShot(kSettleMs, window, [window, path, drillDown] {
            if (!save(window, path) || !drillDown) {
                QCoreApplication::exit(QFileInfo::exists(path) ? 0 : 1);
                return;
            }
            // The drill-down: the tensor's element errors, then its layer across the ranks.
            window->detail()->tabs()->setCurrentIndex(1);
            whenProfiled(window, [window, path] {
                if (!save(window, stepPath(path, QStringLiteral("-elements")))) {
                    QCoreApplication::exit(1);
                    return;
                }
                window->showRanksOfLayer();
                QTimer::singleShot(kSettleMs, window, [window, path] {
                    const bool saved = save(window, stepPath(path, QStringLiteral("-ranks")));
                    QCoreApplication::exit(saved ? 0 : 1);
                });
            });
        });
    });
}

}  // namespace ttrace

#include "Screenshot.h"

#include <QCoreApplication>
#include <QPixmap>
#include <QTextStream>
#include <QTimer>

#include "MainWindow.h"

namespace ttrace {

void screenshotWhenReportShown(MainWindow* window, const QString& path) {
    QObject::connect(window, &MainWindow::reportShown, window, [window, path] {
        window->goToFirstFault();
        // One turn of the event loop lets the layout settle before the grab.
        QTimer::singleShot(200, window, [window, path] {
            const bool saved = window->grab().save(path);
            if (!saved) {
                QTextStream(stderr) << QStringLiteral("ttrace: cannot write ") << path << '\n';
            }
            QCoreApplication::exit(saved ? 0 : 1);
        });
    });
}

}  // namespace ttrace

// ttrace: the desktop debugger. `ttrace [DIST REF [--perturbed PERT]]` or `ttrace FOLDER`
// (a folder holding the trace folders, recognized by their manifests) starts the check at once.
#include <QApplication>
#include <QCommandLineParser>
#include <QTextStream>

#include "BackendMenu.h"
#include "BackendOffer.h"
#include "MainWindow.h"
#include "Screenshot.h"
#include "TraceFolders.h"
#include "trace/IsolatedHdf5.h"

int main(int argc, char** argv) {
    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("ttrace"));
    QApplication::setApplicationName(QStringLiteral("ttrace"));
    QApplication::setApplicationVersion(QStringLiteral(TTRACE_VERSION));

    QCommandLineParser parser;
    parser.setApplicationDescription(
        QStringLiteral("Debugger for silent bugs in distributed training: compares a "
                       "distributed trace with a trusted reference run."));
    // One entry for both forms, so that the usage line reads "[DIST REF | FOLDER]".
    parser.addPositionalArgument(
        QStringLiteral("DIST REF"),
        QStringLiteral("Trace folders of the distributed run and of its trusted reference "
                       "(on one device, or on several ranks in another layout); or one FOLDER "
                       "holding the distributed, reference and perturbed trace folders."),
        QStringLiteral("[DIST REF | FOLDER]"));
    const QCommandLineOption perturbed(
        QStringLiteral("perturbed"),
        QStringLiteral("Trace folder of the perturbed reference (sets the thresholds)."),
        QStringLiteral("DIR"));
    QCommandLineOption screenshot(QStringLiteral("screenshot"),
                                  QStringLiteral("Save the window to FILE once the check is "
                                                 "shown, then quit."),
                                  QStringLiteral("FILE"));
    screenshot.setFlags(QCommandLineOption::HiddenFromHelp);
    QCommandLineOption drillDown(QStringLiteral("screenshot-drilldown"),
                                 QStringLiteral("With --screenshot, also save FILE-elements.png "
                                                "and FILE-ranks.png (the drill-down steps)."));
    drillDown.setFlags(QCommandLineOption::HiddenFromHelp);
    const QCommandLineOption backend(
        QStringLiteral("backend"),
        QStringLiteral("Where the comparison runs: auto (CUDA where a usable GPU exists, else "
                       "the CPU; the default), cpu or cuda. Also in Edit > Compare on."),
        QStringLiteral("auto|cpu|cuda"), QStringLiteral("auto"));
    parser.addOptions({perturbed, backend, screenshot, drillDown});
    parser.addHelpOption();
    parser.addVersionOption();
    parser.process(app);

    QTextStream err(stderr);
    const auto backendKind = ttrace::backendKindFromName(parser.value(backend));
    if (!backendKind) {
        err << QStringLiteral("ttrace: --backend takes auto, cpu or cuda, not \"%1\"\n")
                   .arg(parser.value(backend));
        return 2;
    }
    const QStringList positional = parser.positionalArguments();
    ttrace::TraceFolders folders;
    if (positional.size() == 1) {
        QString error;
        folders = ttrace::detectTraceFolders(positional[0], &error);
        if (!folders.isComplete()) {
            err << QStringLiteral("ttrace: ") << error << '\n';
            return 2;
        }
    } else if (positional.size() == 2) {
        folders = {positional[0], positional[1], parser.value(perturbed)};
    } else if (!positional.isEmpty()) {
        err << QStringLiteral("ttrace: expected DIST REF or one FOLDER\n") << parser.helpText();
        return 2;
    }
    if (parser.isSet(screenshot) && !folders.isComplete()) {
        err << QStringLiteral("ttrace: --screenshot needs trace folders to check\n");
        return 2;
    }

    // Every libhdf5 call on a rank file runs in a worker process: a corrupt file becomes a
    // diagnostic in the window instead of closing it.
    if (const auto warning = ttrace::isolateHdf5ForThisProgram()) {
        err << QStringLiteral("ttrace: warning: ") << *warning << '\n';
        err.flush();
    }
    ttrace::MainWindow window(ttrace::cudaProbe());
    window.backendMenu()->setKind(*backendKind);
    if (parser.isSet(screenshot)) {
        ttrace::screenshotWhenReportShown(&window, parser.value(screenshot),
                                          parser.isSet(drillDown));
    }
    window.show();
    if (folders.isComplete()) {
        window.openTraces(folders);
    }
    return QApplication::exec();
}

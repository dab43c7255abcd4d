#pragma once

#include <QDir>
#include <QString>
#include <QTemporaryDir>
#include <QtGlobal>

// Paths of the real trace folders written by tests/data/make_fixtures.py (CTest fixture
// "traces"). Tests fail loudly when the fixtures are missing rather than skipping.
namespace ttrace::test {

inline QString fixturesRoot() {
    const QString root = qEnvironmentVariable("TTRACE_FIXTURES");
    return root.isEmpty() ? QString() : QDir(root).absolutePath();
}

// fixture(u"tp_column", u"dist") -> $TTRACE_FIXTURES/tp_column/dist
inline QString fixture(const QString& caseName, const QString& role = {}) {
    QString path = fixturesRoot() + QLatin1Char('/') + caseName;
    if (!role.isEmpty()) {
        path += QLatin1Char('/') + role;
    }
    return path;
}

inline QString sourceDir() {
    return qEnvironmentVariable("TTRACE_SOURCE_DIR");
}
inline QString binaryDir() {
    return qEnvironmentVariable("TTRACE_BINARY_DIR");
}
// The ttrace-hdf5-worker of this build (IsolatedHdf5.h).
inline QString hdf5Worker() {
    return qEnvironmentVariable("TTRACE_HDF5_WORKER");
}

}  // namespace ttrace::test

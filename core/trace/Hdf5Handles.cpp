#include "trace/Hdf5Handles.h"

#include <QFile>

namespace ttrace::hdf5 {

namespace {

// Marks where libhdf5's words start in a message (an ASCII record separator, which no
// message of ours holds).
constexpr QChar kLibraryWords(u'\x1e');

struct ErrorWalk {
    QString innermost;
};

herr_t collectInnermost(unsigned n, const H5E_error2_t* error, void* data) {
    auto* walk = static_cast<ErrorWalk*>(data);
    if (n == 0 && error && error->desc) {
        walk->innermost = QString::fromUtf8(error->desc);
        char minor[256] = {};
        if (H5Eget_msg(error->min_num, nullptr, minor, sizeof minor) > 0) {
            walk->innermost += QStringLiteral(" (") + QString::fromUtf8(minor) + QLatin1Char(')');
        }
    }
    return 0;
}

}  // namespace

void silenceErrors() {
    thread_local bool silenced = false;
    if (!silenced) {
        H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
        silenced = true;
    }
}

QString takeErrorText() {
    ErrorWalk walk;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, collectInnermost, &walk);
    H5Eclear2(H5E_DEFAULT);
    return walk.innermost.isEmpty() ? QString() : kLibraryWords + walk.innermost;
}

void separateLibraryWords(Diagnostic& d) {
    const qsizetype at = d.message.indexOf(kLibraryWords);
    if (at < 0) {
        return;
    }
    d.details = d.message.mid(at + 1).remove(kLibraryWords);
    QString message = d.message.left(at);
    while (message.endsWith(QLatin1Char(' ')) || message.endsWith(QLatin1Char(':'))) {
        message.chop(1);
    }
    d.message = message;
}

File openReadOnly(const QString& path, QString* error) {
    silenceErrors();
    const PropertyList fapl(H5Pcreate(H5P_FILE_ACCESS));
    if (fapl) {
        // Read-only access never needs a lock, and locking fails on some network mounts.
        H5Pset_file_locking(fapl.get(), false, true);
    }
    const QByteArray encoded = QFile::encodeName(path);
    File file(H5Fopen(encoded.constData(), H5F_ACC_RDONLY, fapl ? fapl.get() : H5P_DEFAULT));
    // Taken now: the next HDF5 call (closing fapl) clears the error stack.
    if (!file && error) {
        *error = takeErrorText();
    }
    return file;
}

}  // namespace ttrace::hdf5

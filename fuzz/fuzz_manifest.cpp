// libFuzzer: any bytes as a trace folder's manifest.json. Reading it gives a manifest or says
// why not; it never crashes, hangs or allocates without bound.
#include <QFile>
#include <QTemporaryDir>
#include <cstdint>
#include <cstdlib>

#include "FuzzInput.h"
#include "trace/Manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const QTemporaryDir folder;
    ttrace::fuzz::writeFile(folder.filePath(QStringLiteral("manifest.json")), data, size);
    const auto read = ttrace::readManifest(folder.path());
    if (!read.manifest && read.diagnostics.empty()) {
        std::abort();  // a refusal always says why
    }
    if (read.manifest) {
        static_cast<void>(ttrace::unlistedRankFiles(folder.path(), *read.manifest));
    }
    return 0;
}

#include "store/EngineSources.h"

#include "EngineSourcesHash.h"

namespace ttrace {

QString engineSourcesHash() {
    return QStringLiteral(TTRACE_ENGINE_SOURCES_SHA256);
}

}  // namespace ttrace

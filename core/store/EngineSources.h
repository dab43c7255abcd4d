#pragma once

#include <QString>

namespace ttrace {

// The SHA-256 of the engine's sources (core/), computed at build time (cmake/SourcesHash.cmake):
// what decides an index or a result. The index cache and the results store key on it, so that
// an upgraded or rebuilt checker never shows what an older one indexed or compared.
QString engineSourcesHash();

}  // namespace ttrace

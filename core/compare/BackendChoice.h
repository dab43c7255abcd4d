#pragma once

#include <QString>
#include <QStringView>
#include <functional>
#include <memory>
#include <optional>

#include "compare/MetricsBackend.h"

namespace ttrace {

// Which backend a user asks for: `auto` takes CUDA where a usable device exists, else the CPU.
enum class BackendKind { Auto, Cpu, Cuda };

std::optional<BackendKind> backendKindFromName(QStringView name);  // "auto", "cpu", "cuda"
QString backendKindName(BackendKind kind);

// What the CUDA backend offers on this machine: the backend, or why there is none.
struct CudaOffer {
    std::shared_ptr<const MetricsBackend> backend;
    QString unavailable;  // set when backend is null, e.g. "no NVIDIA driver is installed"
};
// Asks the machine; supplied by the programs (app/BackendOffer.cpp), null in a build without
// the CUDA backend. core does not depend on gpu/: the arrow goes the other way.
using CudaProbe = std::function<CudaOffer()>;

struct BackendChoice {
    std::shared_ptr<const MetricsBackend> backend;  // null when the request cannot be met
    QString error;                                  // then, why
};

// The backend for `kind`. Under `auto` without a usable GPU, the CPU backend's name says why
// the GPU was not used, so that reports and summaries say it too.
[[nodiscard]] BackendChoice chooseBackend(BackendKind kind, const CudaProbe& probeCuda);

}  // namespace ttrace

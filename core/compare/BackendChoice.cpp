#include "compare/BackendChoice.h"

namespace ttrace {

namespace {

QString whyNoCuda(const CudaProbe& probeCuda, CudaOffer& offer) {
    if (!probeCuda) {
        return QStringLiteral("this build of ttrace has no CUDA backend");
    }
    offer = probeCuda();
    return offer.backend ? QString() : offer.unavailable;
}

}  // namespace

std::optional<BackendKind> backendKindFromName(QStringView name) {
    if (name == u"auto") {
        return BackendKind::Auto;
    }
    if (name == u"cpu") {
        return BackendKind::Cpu;
    }
    if (name == u"cuda") {
        return BackendKind::Cuda;
    }
    return std::nullopt;
}

QString backendKindName(BackendKind kind) {
    switch (kind) {
        case BackendKind::Auto:
            return QStringLiteral("auto");
        case BackendKind::Cpu:
            return QStringLiteral("cpu");
        case BackendKind::Cuda:
            return QStringLiteral("cuda");
    }
    return {};
}

BackendChoice chooseBackend(BackendKind kind, const CudaProbe& probeCuda) {
    BackendChoice choice;
    if (kind == BackendKind::Cpu) {
        choice.backend = makeCpuBackend();
        return choice;
    }
    CudaOffer offer;
    const QString why = whyNoCuda(probeCuda, offer);
    if (why.isEmpty()) {
        choice.backend = offer.backend;
    } else if (kind == BackendKind::Cuda) {
        choice.error = QStringLiteral("the CUDA backend cannot run: ") + why;
    } else {
        choice.backend = makeCpuBackend("CPU (CUDA not used: " + why.toStdString() + ")");
    }
    return choice;
}

}  // namespace ttrace

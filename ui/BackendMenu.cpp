#include "BackendMenu.h"

#include <QActionGroup>

namespace ttrace {

BackendMenu::BackendMenu(CudaProbe probeCuda, QWidget* parent)
    : QMenu(QStringLiteral("Compare &on"), parent), probeCuda_(std::move(probeCuda)) {
    setObjectName(QStringLiteral("backendMenu"));
    group_ = new QActionGroup(this);
    const auto add = [this](const QString& text, BackendKind kind, const QString& tip) {
        QAction* action = addAction(text);
        action->setCheckable(true);
        action->setData(static_cast<int>(kind));
        action->setToolTip(tip);
        action->setChecked(kind == kind_);
        group_->addAction(action);
        connect(action, &QAction::triggered, this, [this, kind] { kind_ = kind; });
        return action;
    };
    add(QStringLiteral("&Auto"), BackendKind::Auto,
        QStringLiteral("The GPU where one can be used, else the CPU"));
    add(QStringLiteral("&CPU"), BackendKind::Cpu, QStringLiteral("Every core of this machine"));
    cuda_ =
        add(QStringLiteral("C&UDA"), BackendKind::Cuda, QStringLiteral("The GPUs of this machine"));
    setToolTipsVisible(true);
    connect(this, &QMenu::aboutToShow, this, &BackendMenu::updateCudaAction);
}

void BackendMenu::setKind(BackendKind kind) {
    kind_ = kind;
    for (QAction* action : group_->actions()) {
        action->setChecked(action->data().toInt() == static_cast<int>(kind));
    }
}

CudaProbe BackendMenu::probeOnce() {
    if (!probeCuda_) {
        return {};  // no CUDA in this build: chooseBackend says so
    }
    return [this] {
        if (!offer_) {
            offer_ = probeCuda_();
        }
        return *offer_;
    };
}

void BackendMenu::updateCudaAction() {
    const BackendChoice cuda = chooseBackend(BackendKind::Cuda, probeOnce());
    cuda_->setEnabled(cuda.backend || kind_ == BackendKind::Cuda);
    // "CUDA on NVIDIA H200", or "CUDA: the CUDA backend cannot run: no NVIDIA driver ...".
    cuda_->setText(cuda.backend ? QString::fromStdString(cuda.backend->name())
                                : QStringLiteral("CUDA: ") + cuda.error);
}

BackendChoice BackendMenu::choose() {
    return chooseBackend(kind_, probeOnce());
}

}  // namespace ttrace

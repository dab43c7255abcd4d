#pragma once

#include <QMenu>
#include <optional>

#include "compare/BackendChoice.h"

class QActionGroup;

namespace ttrace {

// Where the window's checks run: Auto (CUDA where a usable GPU exists, else the CPU), CPU or
// CUDA, as ttrace-check's --backend. The machine is asked once, when the menu first opens or a
// check first needs a backend; CUDA is then disabled with the reason when no GPU can be used.
class BackendMenu : public QMenu {
    Q_OBJECT

public:
    BackendMenu(CudaProbe probeCuda, QWidget* parent = nullptr);

    BackendKind kind() const { return kind_; }
    void setKind(BackendKind kind);
    // The backend for the next check, or why the chosen one cannot run.
    [[nodiscard]] BackendChoice choose();

private:
    CudaProbe probeOnce();  // probeCuda_, asking the machine at most once
    void updateCudaAction();

    CudaProbe probeCuda_;
    std::optional<CudaOffer> offer_;  // what the machine said, once asked
    BackendKind kind_ = BackendKind::Auto;
    QActionGroup* group_ = nullptr;
    QAction* cuda_ = nullptr;
};

}  // namespace ttrace

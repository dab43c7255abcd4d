#include "HeatmapFilterBar.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QToolButton>
#include <set>

namespace ttrace {

HeatmapFilterBar::HeatmapFilterBar(QWidget* parent) : QWidget(parent) {
    setObjectName(QStringLiteral("heatmapFilterBar"));
    module_ = new QLineEdit(this);
    module_->setObjectName(QStringLiteral("moduleFilter"));
    module_->setPlaceholderText(QStringLiteral("Filter modules: text or glob (Ctrl+L)"));
    module_->setClearButtonEnabled(true);
    kind_ = new QComboBox(this);
    kind_->setObjectName(QStringLiteral("kindFilter"));
    iteration_ = new QComboBox(this);
    iteration_->setObjectName(QStringLiteral("iterationFilter"));
    auto* clear = new QToolButton(this);
    clear->setText(QStringLiteral("Clear"));
    clear->setToolTip(QStringLiteral("Show every module, kind and iteration"));
    connect(clear, &QToolButton::clicked, this, [this] { setFilter(HeatmapFilter()); });

    auto* kindLabel = new QLabel(QStringLiteral("&Kind:"), this);
    kindLabel->setBuddy(kind_);
    auto* iterationLabel = new QLabel(QStringLiteral("&Iteration:"), this);
    iterationLabel->setBuddy(iteration_);
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(module_, 1);
    layout->addWidget(kindLabel);
    layout->addWidget(kind_);
    layout->addWidget(iterationLabel);
    layout->addWidget(iteration_);
    layout->addWidget(clear);

    connect(module_, &QLineEdit::textChanged, this, &HeatmapFilterBar::emitChanged);
    connect(kind_, &QComboBox::currentIndexChanged, this, &HeatmapFilterBar::emitChanged);
    connect(iteration_, &QComboBox::currentIndexChanged, this, &HeatmapFilterBar::emitChanged);
    setChoices(nullptr);
}

void HeatmapFilterBar::setChoices(const CheckReport* report) {
    const HeatmapFilter current = filter();
    updating_ = true;
    std::set<int> kinds, iterations;
    if (report) {
        for (const TensorResult& r : report->comparison.results) {
            kinds.insert(static_cast<int>(r.key.kind));
            iterations.insert(r.key.iteration);
        }
    }
    kind_->clear();
    kind_->addItem(QStringLiteral("all"), -1);
    for (const int kind : kinds) {
        kind_->addItem(tensorKindName(static_cast<TensorKind>(kind)), kind);
    }
    iteration_->clear();
    iteration_->addItem(QStringLiteral("all"), -1);
    for (const int iteration : iterations) {
        iteration_->addItem(QString::number(iteration), iteration);
    }
    updating_ = false;
    setFilter(current);
}

HeatmapFilter HeatmapFilterBar::filter() const {
    const int kind = kind_->currentData().isValid() ? kind_->currentData().toInt() : -1;
    const int iteration =
        iteration_->currentData().isValid() ? iteration_->currentData().toInt() : -1;
    return HeatmapFilter(module_->text(),
                         kind >= 0 ? std::optional(static_cast<TensorKind>(kind)) : std::nullopt,
                         iteration >= 0 ? std::optional(iteration) : std::nullopt);
}

void HeatmapFilterBar::setFilter(const HeatmapFilter& filter) {
    updating_ = true;
    module_->setText(filter.module());
    // A choice the report lacks falls back to "all".
    const int kind = filter.kind() ? kind_->findData(static_cast<int>(*filter.kind())) : 0;
    kind_->setCurrentIndex(std::max(kind, 0));
    const int iteration = filter.iteration() ? iteration_->findData(*filter.iteration()) : 0;
    iteration_->setCurrentIndex(std::max(iteration, 0));
    updating_ = false;
    emitChanged();
}

void HeatmapFilterBar::focusModuleField() {
    module_->setFocus(Qt::ShortcutFocusReason);
    module_->selectAll();
}

void HeatmapFilterBar::emitChanged() {
    if (!updating_) {
        Q_EMIT filterChanged(filter());
    }
}

}  // namespace ttrace

#pragma once

#include <QWidget>

#include "HeatmapFilter.h"
#include "report/CheckReport.h"

class QComboBox;
class QLineEdit;

namespace ttrace {

// The filter bar above the layer heatmap: module name (substring or glob), tensor kind and
// iteration; filterChanged follows every edit.
class HeatmapFilterBar : public QWidget {
    Q_OBJECT

public:
    explicit HeatmapFilterBar(QWidget* parent = nullptr);

    // The kinds and iterations `report` has (the current choice kept when it still exists).
    void setChoices(const CheckReport* report);
    HeatmapFilter filter() const;
    void setFilter(const HeatmapFilter& filter);  // emits filterChanged once
    void focusModuleField();

Q_SIGNALS:
    void filterChanged(const ttrace::HeatmapFilter& filter);

private:
    void emitChanged();

    QLineEdit* module_ = nullptr;
    QComboBox* kind_ = nullptr;
    QComboBox* iteration_ = nullptr;
    bool updating_ = false;
};

}  // namespace ttrace

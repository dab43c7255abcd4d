#pragma once

#include <QDialog>

#include "TraceFolders.h"

class QLabel;
class QLineEdit;
class QPushButton;

namespace ttrace {

// Asks for the trace folders of a check: distributed, reference and optional perturbed, each
// typed or browsed, or a parent folder whose subfolders are recognized by their manifests.
class OpenTracesDialog : public QDialog {
    Q_OBJECT

public:
    explicit OpenTracesDialog(const TraceFolders& initial, QWidget* parent = nullptr);

    TraceFolders folders() const;

private:
    void browseInto(QLineEdit* edit, const QString& caption);
    void chooseParentFolder();
    void updateOk();

    QLineEdit* distributed_ = nullptr;
    QLineEdit* reference_ = nullptr;
    QLineEdit* perturbed_ = nullptr;
    QLabel* status_ = nullptr;
    QPushButton* ok_ = nullptr;
};

}  // namespace ttrace

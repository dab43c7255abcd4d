#include "OpenTracesDialog.h"

#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>

namespace ttrace {

OpenTracesDialog::OpenTracesDialog(const TraceFolders& initial, QWidget* parent) : QDialog(parent) {
    setWindowTitle(QStringLiteral("Open trace folders"));
    auto* form = new QFormLayout;
    auto row = [&](const QString& label, const QString& value, const QString& caption) {
        auto* edit = new QLineEdit(value, this);
        edit->setMinimumWidth(420);
        auto* browse = new QPushButton(QStringLiteral("Browse…"), this);
        connect(browse, &QPushButton::clicked, this,
                [this, edit, caption] { browseInto(edit, caption); });
        connect(edit, &QLineEdit::textChanged, this, &OpenTracesDialog::updateOk);
        auto* line = new QHBoxLayout;
        line->addWidget(edit, 1);
        line->addWidget(browse);
        form->addRow(label, line);
        return edit;
    };
    distributed_ = row(QStringLiteral("&Distributed:"), initial.distributed,
                       QStringLiteral("Trace folder of the distributed run"));
    reference_ = row(QStringLiteral("&Reference:"), initial.reference,
                     QStringLiteral("Trace folder of the reference: the trusted run, on one "
                                    "device or on several ranks"));
    perturbed_ = row(QStringLiteral("&Perturbed (optional):"), initial.perturbed,
                     QStringLiteral("Trace folder of the perturbed reference"));

    auto* parentButton = new QPushButton(QStringLiteral("From a &parent folder…"), this);
    parentButton->setToolTip(
        QStringLiteral("Pick a folder holding the three trace folders; they are recognized by "
                       "the role in their manifest.json"));
    connect(parentButton, &QPushButton::clicked, this, &OpenTracesDialog::chooseParentFolder);
    status_ = new QLabel(this);
    status_->setWordWrap(true);

    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    ok_ = buttons->button(QDialogButtonBox::Ok);
    ok_->setText(QStringLiteral("Check"));
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);

    auto* layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addWidget(parentButton, 0, Qt::AlignLeft);
    layout->addWidget(status_);
    layout->addWidget(buttons);
    updateOk();
}

TraceFolders OpenTracesDialog::folders() const {
    return {distributed_->text().trimmed(), reference_->text().trimmed(),
            perturbed_->text().trimmed()};
}

void OpenTracesDialog::browseInto(QLineEdit* edit, const QString& caption) {
    const QString dir = QFileDialog::getExistingDirectory(this, caption, edit->text());
    if (!dir.isEmpty()) {
        edit->setText(dir);
    }
}

void OpenTracesDialog::chooseParentFolder() {
    const QString dir = QFileDialog::getExistingDirectory(
        this, QStringLiteral("Folder holding the trace folders"), distributed_->text());
    if (dir.isEmpty()) {
        return;
    }
    QString error;
    const TraceFolders found = detectTraceFolders(dir, &error);
    distributed_->setText(found.distributed);
    reference_->setText(found.reference);
    perturbed_->setText(found.perturbed);
    status_->setText(error);
}

void OpenTracesDialog::updateOk() {
    ok_->setEnabled(folders().isComplete());
}

}  // namespace ttrace

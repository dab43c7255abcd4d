#pragma once

#include <QString>
#include <QStringList>

namespace ttrace {

// The trace folders of one check: distributed, reference and (optionally) perturbed.
struct TraceFolders {
    QString distributed;
    QString reference;
    QString perturbed;  // empty: theoretical thresholds

    bool isComplete() const { return !distributed.isEmpty() && !reference.isEmpty(); }
    QStringList toList() const { return {distributed, reference, perturbed}; }
    static TraceFolders fromList(const QStringList& list);
    // "row_bias_every_rank: dist vs ref (+ pert)", for menus and the title bar.
    QString displayName() const;
    friend bool operator==(const TraceFolders&, const TraceFolders&) = default;
};

// Finds the trace folders among the subfolders of `parent` by their manifests' roles (a
// folder holding dist/ref/pert, as the bundled samples do). Reads only manifest.json files.
// Missing roles stay empty; `error` says what is missing or ambiguous.
TraceFolders detectTraceFolders(const QString& parent, QString* error);

}  // namespace ttrace

#include "TraceFolders.h"

#include <QDir>
#include <QFileInfo>

#include "trace/Manifest.h"

namespace ttrace {

TraceFolders TraceFolders::fromList(const QStringList& list) {
    TraceFolders folders;
    folders.distributed = list.value(0);
    folders.reference = list.value(1);
    folders.perturbed = list.value(2);
    return folders;
}

QString TraceFolders::displayName() const {
    const QFileInfo dist(distributed);
    const QFileInfo ref(reference);
    QString name = dist.dir().dirName() + QStringLiteral(": ") + dist.fileName() +
                   QStringLiteral(" vs ") + ref.fileName();
    if (!perturbed.isEmpty()) {
        name += QStringLiteral(" (+ ") + QFileInfo(perturbed).fileName() + QLatin1Char(')');
    }
    return name;
}

TraceFolders detectTraceFolders(const QString& parent, QString* error) {
    TraceFolders folders;
    QStringList problems;
    const QDir dir(parent);
    const QStringList subfolders = dir.entryList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name);
    for (const QString& sub : subfolders) {
        const QString path = dir.absoluteFilePath(sub);
        if (!QFileInfo::exists(path + QStringLiteral("/manifest.json"))) {
            continue;
        }
        const ManifestResult result = readManifest(path);
        if (!result.manifest) {
            continue;  // not a usable trace folder; the check would say why if chosen
        }
        QString* slot = nullptr;
        switch (result.manifest->role) {
            case RunRole::Distributed:
                slot = &folders.distributed;
                break;
            case RunRole::Reference:
                slot = &folders.reference;
                break;
            case RunRole::PerturbedReference:
                slot = &folders.perturbed;
                break;
        }
        if (!slot->isEmpty()) {
            problems << QStringLiteral("more than one %1 trace folder (%2 and %3)")
                            .arg(runRoleName(result.manifest->role), *slot, path);
            continue;
        }
        *slot = path;
    }
    if (folders.distributed.isEmpty()) {
        problems << QStringLiteral("no distributed trace folder");
    }
    if (folders.reference.isEmpty()) {
        problems << QStringLiteral("no reference trace folder");
    }
    if (error) {
        *error = problems.isEmpty()
                     ? QString()
                     : QStringLiteral("%1: %2").arg(parent, problems.join(QStringLiteral("; ")));
    }
    return folders;
}

}  // namespace ttrace

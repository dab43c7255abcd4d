#include "session/SingleProcessGroup.h"

#include <QCoreApplication>
#include <QSysInfo>

namespace ttrace {

QString SingleProcessGroup::processName() const {
    return QStringLiteral("%1, pid %2")
        .arg(QSysInfo::machineHostName())
        .arg(QCoreApplication::applicationPid());
}

}  // namespace ttrace

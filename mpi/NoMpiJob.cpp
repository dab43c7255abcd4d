#include "Launcher.h"
#include "MpiJob.h"

namespace ttrace {

// Built without MPI: alone is fine, but several copies of one check would each compare
// everything and write the same reports.
MpiJob::MpiJob(int&, char**&) {
    if (startedByMpiLauncher() && launchedProcessCount() > 1) {
        problem_ = QStringLiteral(
                       "started as %1 processes by an MPI launcher, but this ttrace-check was "
                       "built without MPI (install libopenmpi-dev and rebuild, or run it as one "
                       "process)")
                       .arg(launchedProcessCount());
    }
}

MpiJob::~MpiJob() = default;

}  // namespace ttrace

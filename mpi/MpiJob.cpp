#include "MpiJob.h"

#include <mpi.h>

#include "Launcher.h"
#include "MpiProcessGroup.h"

namespace ttrace {

MpiJob::MpiJob(int& argc, char**& argv) {
    if (!startedByMpiLauncher()) {
        return;
    }
    // Only the main thread calls MPI; the comparison's worker threads never do.
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        problem_ = QStringLiteral("MPI could not be initialized");
        return;
    }
    processes_ = std::make_unique<MpiProcessGroup>();
}

MpiJob::~MpiJob() {
    const bool initialized = processes_ != nullptr;
    processes_.reset();  // frees its communicator before MPI goes away
    if (initialized) {
        MPI_Finalize();
    }
}

}  // namespace ttrace

#include "Launcher.h"

#include <QtGlobal>

namespace ttrace {

namespace {

// Open MPI, MPICH's Hydra and Slurm's PMI2, PMIx (srun --mpi=pmix), plain srun.
constexpr const char* kSizeVariables[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE",
                                          "SLURM_NTASKS"};

}  // namespace

bool startedByMpiLauncher() {
    return qEnvironmentVariableIsSet("OMPI_COMM_WORLD_SIZE") ||
           qEnvironmentVariableIsSet("PMI_SIZE") || qEnvironmentVariableIsSet("PMI_RANK") ||
           qEnvironmentVariableIsSet("PMIX_RANK");
}

int launchedProcessCount() {
    for (const char* variable : kSizeVariables) {
        bool ok = false;
        const int size = qEnvironmentVariableIntValue(variable, &ok);
        if (ok && size > 0) {
            return size;
        }
    }
    return 1;
}

}  // namespace ttrace

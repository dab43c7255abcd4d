#pragma once

namespace ttrace {

// Whether an MPI launcher (mpirun/mpiexec of Open MPI or MPICH, Slurm's srun with PMI or
// PMIx) started this process, judged by the variables it sets; MPI is only initialized then,
// so that a plain run never pays for it.
bool startedByMpiLauncher();
// The number of processes the launcher started (1 when unknown).
int launchedProcessCount();

}  // namespace ttrace

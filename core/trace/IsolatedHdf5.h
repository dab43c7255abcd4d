#pragma once

#include <QString>
#include <atomic>
#include <cstdint>
#include <optional>

#include "trace/Hdf5Worker.h"
#include "trace/Hdf5WorkerProtocol.h"
#include "trace/RankFileIndex.h"

namespace ttrace {

// libhdf5 does not promise to survive a malformed file, and trace folders come from crashed
// jobs and half-copied disks. With isolation on, every HDF5 call on a rank file runs in a
// ttrace-hdf5-worker process: a crash, a hang or runaway memory there becomes a diagnostic
// naming the file, the step and the dataset, and the check goes on with the other files.
// Programs turn it on once at start-up; the library alone (tests, the worker itself) reads in
// process.
struct Hdf5Isolation {
    QString workerPath;
    WorkerLimits limits;
};

// Turns isolation on for this process (off with nullopt); call before the first check.
void isolateHdf5(const std::optional<Hdf5Isolation>& isolation);
bool hdf5Isolated();

// For ttrace-check and the GUI: finds ttrace-hdf5-worker ($TTRACE_HDF5_WORKER, beside the
// program, or in ../libexec/ttrace from it), reads the limits from $TTRACE_HDF5_STALL_SECONDS
// and $TTRACE_HDF5_MEMORY_MB, and turns isolation on. Returns why it could not (rank files are
// then read in process), for the program to say.
std::optional<QString> isolateHdf5ForThisProgram();

// indexRankFile() in a worker when isolated, in this process otherwise. A worker's failure is
// one error about the file (opened = false: its tensors are unreadable; never cached);
// cancelled stops it at once, even inside HDF5.
[[nodiscard]] RankFileIndex indexRankFileIsolated(const QString& path,
                                                  const std::atomic<bool>* cancel);

// Reads the stored words of a box in a worker (isolation must be on): nullopt on success,
// else why not. After a worker failed on a file, later reads of that file (while it is
// unchanged) fail at once with the first failure's words rather than crash or stall again.
[[nodiscard]] std::optional<QString> readStoredIsolated(const ReadRequest& request,
                                                        std::uint8_t* target,
                                                        const std::atomic<bool>* cancel);

}  // namespace ttrace

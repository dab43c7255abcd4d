#pragma once

#include <QString>
#include <memory>

#include "session/ProcessGroup.h"

namespace ttrace {

// This process's part in an MPI job. Constructed once in main(): initializes MPI when an MPI
// launcher started the process, finalizes it on destruction.
class MpiJob {
public:
    MpiJob(int& argc, char**& argv);
    ~MpiJob();
    MpiJob(const MpiJob&) = delete;
    MpiJob& operator=(const MpiJob&) = delete;

    // The job's processes; null when this process runs alone.
    ProcessGroup* processes() const { return processes_.get(); }
    // Why the process cannot take part in the job it was launched in (say, a build without
    // MPI started as several processes); empty when it can.
    const QString& problem() const { return problem_; }

private:
    std::unique_ptr<ProcessGroup> processes_;  // set once MPI is initialized
    QString problem_;
};

}  // namespace ttrace

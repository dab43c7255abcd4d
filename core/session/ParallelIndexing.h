#pragma once

#include "session/CheckSession.h"
#include "session/ProcessGroup.h"
#include "store/CacheLocation.h"

namespace ttrace {

// The first step of a distributed check, on every process of `group`: each indexes its share
// of the rank files of every trace set into the shared index cache, then all wait for each
// other, so that rank 0's open finds the whole index cached. HDF5's global lock makes threads
// index one file at a time; processes do not share it. Without a usable cache (--no-cache,
// no cache directory, one inside a trace folder) nothing is indexed here and rank 0 indexes
// alone, as it does when a process fails to do its share.
void indexTogether(const CheckRequest& request, const CacheLocation& cache, ProcessGroup& group);

}  // namespace ttrace

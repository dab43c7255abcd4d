// ttrace-hdf5-worker: runs the HDF5 calls of ttrace-check and the GUI on rank files, so that a
// file that crashes libhdf5, hangs it or makes it eat memory takes down this process only
// (core/trace/IsolatedHdf5.h). Started by them, never by a user: requests come on stdin, replies
// go to stdout (Hdf5WorkerProtocol.h), each step is marked on the page shared as fd 3.
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

#include "trace/Hdf5Reader.h"
#include "trace/Hdf5WorkerProtocol.h"
#include "trace/RankFileIndex.h"
#include "trace/StoredBox.h"

// AddressSanitizer, as gcc and as clang say it.
#if defined(__SANITIZE_ADDRESS__)
#define TTRACE_ADDRESS_SANITIZER
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TTRACE_ADDRESS_SANITIZER
#endif
#endif

#ifdef TTRACE_ADDRESS_SANITIZER
// Under AddressSanitizer (the sanitize preset) a corrupt file's damage is often caught in
// libhdf5's memcpy before it faults: the report (on the worker's stderr) then ends in abort(),
// a crash the parent reports as in a release build, not an exit status it would blame on the
// worker. Faults themselves stay plain signals.
extern "C" const char* __asan_default_options() {
    return "abort_on_error=1:handle_segv=0:handle_sigbus=0:handle_abort=0:handle_sigfpe=0:"
           "handle_sigill=0";
}
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif

namespace {

using namespace ttrace;

// An allocation that fails is told apart from a crash by the exit status.
void onOutOfMemory() {
    std::_Exit(kWorkerOutOfMemoryExit);
}

// Ends this process once its parent is gone, even while the main thread is stuck inside HDF5
// (the parent's end of the socket only reaches a worker that reads it).
void watchParent() {
    const pid_t parent = ::getppid();
    std::thread([parent] {
        while (::getppid() == parent) {
            std::this_thread::sleep_for(std::chrono::milliseconds(500));
        }
        std::_Exit(0);
    }).detach();
}

QByteArray answer(const WorkerRequest& request, Hdf5Reader& reader, Hdf5Trail* trail) {
    if (const auto* index = std::get_if<IndexRequest>(&request)) {
        return encodeIndexReply(indexRankFile(index->path, nullptr, trail));
    }
    const auto& read = std::get<ReadRequest>(request);
    TensorRecord record;
    record.file = read.file;
    record.dataset = read.dataset;
    record.dtype = read.dtype;
    record.localShape = read.localShape;
    ReadReply reply;
    std::size_t bytes = 0;
    if (std::all_of(read.count.begin(), read.count.end(), [](auto c) { return c >= 0; }) &&
        read.start.size() == read.count.size() && read.count.size() == read.localShape.size()) {
        bytes = storedBox(read.dtype, read.localShape, read.start, read.count).words() *
                static_cast<std::size_t>(storageBytes(read.dtype));
    }
    reply.words.resize(static_cast<qsizetype>(bytes));
    reply.problem = reader.readStored(record, read.start, read.count,
                                      reinterpret_cast<std::uint8_t*>(reply.words.data()), trail);
    if (reply.problem) {
        reply.words.clear();
    }
    return encodeReadReply(reply);
}

}  // namespace

int main(int argc, char** argv) {
    int trailFd = -1;
    long long memoryBytes = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--trail-fd") == 0) {
            trailFd = std::atoi(argv[i + 1]);
        } else if (std::strcmp(argv[i], "--memory-bytes") == 0) {
            memoryBytes = std::atoll(argv[i + 1]);
        }
    }
    void* page = trailFd >= 0 ? ::mmap(nullptr, sizeof(TrailPage), PROT_READ | PROT_WRITE,
                                       MAP_SHARED, trailFd, 0)
                              : MAP_FAILED;
    if (page == MAP_FAILED) {
        return kWorkerProtocolExit;  // not started by ttrace
    }
    TrailPageWriter trail(static_cast<TrailPage*>(page));
    std::set_new_handler(onOutOfMemory);
    // AddressSanitizer reserves terabytes of address space for its shadow: no cap then.
    if (memoryBytes > 0 && !kAddressSanitizer) {
        // The parent stops the worker when its resident memory passes the limit; this stops a
        // single huge allocation that would get there at once. Address space is larger than
        // resident memory (libraries, stacks), hence the margin.
        const rlim_t addressSpace = static_cast<rlim_t>(memoryBytes) + (rlim_t{1} << 30);
        const rlimit limit{addressSpace, addressSpace};
        ::setrlimit(RLIMIT_AS, &limit);
    }
    watchParent();

    Hdf5Reader reader;
    try {
        while (const auto frame = readFrame(STDIN_FILENO)) {
            const auto request = decodeRequest(*frame);
            if (!request) {
                return kWorkerProtocolExit;
            }
            if (!writeFrame(STDOUT_FILENO, answer(*request, reader, &trail))) {
                return 0;  // the parent is gone
            }
            trail.enter(Hdf5Step::Idle, {});
        }
    } catch (const std::bad_alloc&) {  // Qt's containers throw it when malloc fails
        std::_Exit(kWorkerOutOfMemoryExit);
    }
    return 0;
}

#pragma once

#include <QFile>
#include <QString>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "compare/ComparisonJob.h"

namespace ttrace {

// The tensors a check has finished, appended to a file in the results cache as each one is
// compared, so that a check killed outright (SIGKILL, the out-of-memory killer, a lost node)
// loses nothing it finished: the next run of the same check reads them back and compares only
// the rest. The files of one check lie in a folder named by its run fingerprint, so that
// outcomes of other traces, another config or another version are never reused; the folder is
// removed once the check's results are stored.
//
// A file is a header (magic, fingerprint) and records, each its payload's length, the payload's
// CRC-32 and the payload (one TaskOutcome, TaskOutcomesCodec). A record cut off by a kill, or
// damaged, fails its length or checksum and is dropped with everything after it.
class OutcomeJournal {
public:
    // Creates the file `path` (replacing one of that name) for a check with this fingerprint.
    [[nodiscard]] static std::unique_ptr<OutcomeJournal> create(const QString& path,
                                                                const QString& fingerprint,
                                                                QString* error);

    // Appends one outcome with a single write, so that a kill never leaves a record half
    // written but the last; thread-safe. A failed write (a full disk) does not stop the check:
    // the outcomes are only not protected; error() says why. False when `outcome` (and every
    // later one) is not in the file.
    bool append(const TaskOutcome& outcome);
    // Why an append failed; empty when none did.
    QString error() const;

private:
    OutcomeJournal() = default;

    mutable std::mutex mutex_;
    QFile file_;
    QString error_;
    std::chrono::steady_clock::time_point lastSync_;
};

// Where the journal files of the check with this fingerprint lie, under the cache directory.
[[nodiscard]] QString outcomeJournalFolder(const QString& cacheDir, const QString& fingerprint);

// What reading journal files found.
struct JournalReading {
    int files = 0;         // files read (those of another fingerprint are ignored)
    int damagedFiles = 0;  // files whose end was cut off or damaged
};

// Calls `visit` with every outcome of the journal file `path` if it was written for
// `fingerprint`, in file order, reading one record at a time: a journal holds every result
// its process finished. A damaged record ends the file.
JournalReading forEachOutcomeIn(const QString& path, const QString& fingerprint,
                                const std::function<void(TaskOutcome&& outcome)>& visit);
// The same for every journal file of `folder`, in name order; a task may appear in several.
JournalReading forEachJournaledOutcome(const QString& folder, const QString& fingerprint,
                                       const std::function<void(TaskOutcome&& outcome)>& visit);

}  // namespace ttrace

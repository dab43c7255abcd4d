#pragma once

#include <QString>
#include <vector>

namespace ttrace {

enum class Severity { Info, Warning, Error };

// A problem found in a trace, kept as a value so that it reaches the UI and the report with
// its reason. Errors make the affected tensor (or the whole run) unusable; warnings do not.
struct Diagnostic {
    Severity severity = Severity::Error;
    QString file;     // trace folder or file the problem is in
    QString dataset;  // HDF5 dataset path, empty when the problem is not inside one dataset
    QString tensor;   // logical tensor (TensorKey::toString()), empty when not about one tensor
    QString message;  // what is wrong, in words a user can act on
    // What the library that failed said (libhdf5's own words: "sblock->base_addr = 0", "rank
    // might cause reading passed buffer's end"), for whoever repairs the file; the message
    // says the problem without them. Empty for most diagnostics.
    QString details;
    // What kind of problem it is, for programs reading the JSON report (trusted_run_code:
    // a trusted run's own pieces that say against trusting it); empty for most diagnostics,
    // which the message alone says.
    QString code;

    QString toString() const;
};

using Diagnostics = std::vector<Diagnostic>;

// A problem with a whole file or folder (no dataset, no tensor).
[[nodiscard]] Diagnostic fileDiagnostic(Severity severity, const QString& file,
                                        const QString& message);

QString severityName(Severity severity);
bool hasErrors(const Diagnostics& diagnostics);

}  // namespace ttrace

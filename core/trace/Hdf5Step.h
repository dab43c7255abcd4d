#pragma once

#include <QString>
#include <cstdint>
#include <string_view>

namespace ttrace {

// What reading a rank file through HDF5 is doing at a given moment. An isolated worker
// (IsolatedHdf5.h) leaves it where its parent can read it after a crash or a hang, so that the
// diagnostic says what the library was doing, and on which dataset.
enum class Hdf5Step : std::uint8_t {
    Idle,
    OpeningFile,
    ReadingFileAttributes,
    ListingDatasets,
    OpeningDataset,
    ReadingAttributes,
    ReadingScales,
    LocatingData,
    ReadingData,
    ClosingFile,
};

// "while reading the attributes of dataset /tensors/000042"; "" for Idle.
QString hdf5StepText(Hdf5Step step, const QString& dataset);

// Where the code that calls HDF5 marks each step before taking it. The default marks nothing:
// in-process reads have no one to tell.
class Hdf5Trail {
public:
    virtual ~Hdf5Trail() = default;
    // `dataset`: its HDF5 path, empty for steps about the whole file.
    virtual void enter(Hdf5Step step, std::string_view dataset) = 0;
};

// Marks `step` on `trail` when there is one.
inline void markStep(Hdf5Trail* trail, Hdf5Step step, std::string_view dataset = {}) {
    if (trail) {
        trail->enter(step, dataset);
    }
}

}  // namespace ttrace

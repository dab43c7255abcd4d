#include "trace/Hdf5Step.h"

namespace ttrace {

QString hdf5StepText(Hdf5Step step, const QString& dataset) {
    switch (step) {
        case Hdf5Step::Idle:
            return {};
        case Hdf5Step::OpeningFile:
            return QStringLiteral("while opening the file");
        case Hdf5Step::ReadingFileAttributes:
            return QStringLiteral("while reading the file's attributes");
        case Hdf5Step::ListingDatasets:
            return QStringLiteral("while listing the datasets in /tensors");
        case Hdf5Step::OpeningDataset:
            return QStringLiteral("while opening dataset ") + dataset;
        case Hdf5Step::ReadingAttributes:
            return QStringLiteral("while reading the attributes of dataset ") + dataset;
        case Hdf5Step::ReadingScales:
            return QStringLiteral("while reading the scales of dataset ") + dataset;
        case Hdf5Step::LocatingData:
            return QStringLiteral("while locating the data of dataset ") + dataset;
        case Hdf5Step::ReadingData:
            return QStringLiteral("while reading the data of dataset ") + dataset;
        case Hdf5Step::ClosingFile:
            return QStringLiteral("while closing the file");
    }
    return {};
}

}  // namespace ttrace

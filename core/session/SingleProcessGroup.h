#pragma once

#include "session/ProcessGroup.h"

namespace ttrace {

// A check run by one process: the group of itself, so that one process and an MPI job share
// the same comparison path (and persist and resume alike).
class SingleProcessGroup final : public ProcessGroup {
public:
    int rank() const override { return 0; }
    int size() const override { return 1; }
    int sizeOnThisMachine() const override { return 1; }
    QString processName() const override;
    std::optional<std::int64_t> broadcast(std::int64_t value, QString*) override { return value; }
    std::optional<QByteArray> broadcastBytes(const QByteArray& bytes, QString*) override {
        return bytes;
    }
    std::int64_t shareProgress(std::int64_t bytesHere) override { return bytesHere; }
    std::vector<Received> gatherToRoot(const QByteArray& bytes,
                                       const std::function<void(std::int64_t)>&) override {
        return {Received{bytes, {}}};
    }
};

}  // namespace ttrace

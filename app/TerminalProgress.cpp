#include "TerminalProgress.h"

#include <algorithm>
#include <cmath>

namespace ttrace {

namespace {
constexpr int kBarWidth = 30;
constexpr qint64 kRedrawMs = 100;
}  // namespace

TerminalProgress::TerminalProgress(QTextStream& err) : err_(err) {
    sinceDraw_.start();
    sinceStageStart_.start();
}

void TerminalProgress::update(CheckStage stage, double fraction) {
    std::lock_guard lock(mutex_);
    if (stage != stage_) {
        stage_ = stage;
        sinceStageStart_.restart();
    } else if (drawn_ && sinceDraw_.elapsed() < kRedrawMs && fraction < 1.0) {
        return;
    }
    sinceDraw_.restart();
    fraction = std::clamp(fraction, 0.0, 1.0);
    const int filled = static_cast<int>(std::lround(fraction * kBarWidth));
    QString line = QStringLiteral("\r%1 [").arg(checkStageName(stage), -10);
    line += QString(filled, QLatin1Char('#')) + QString(kBarWidth - filled, QLatin1Char(' '));
    line += QStringLiteral("] %1%").arg(static_cast<int>(fraction * 100), 3);
    const double elapsed = sinceStageStart_.elapsed() / 1000.0;
    if (fraction > 0.02 && fraction < 1.0 && elapsed > 0.5) {
        const double left = elapsed * (1.0 - fraction) / fraction;
        line += QStringLiteral("  %1 s left").arg(std::ceil(left), 0, 'f', 0);
    }
    err_ << line << QStringLiteral("\x1b[K");
    err_.flush();
    drawn_ = true;
}

void TerminalProgress::finish() {
    std::lock_guard lock(mutex_);
    if (drawn_) {
        err_ << QStringLiteral("\r\x1b[K");
        err_.flush();
        drawn_ = false;
    }
}

}  // namespace ttrace

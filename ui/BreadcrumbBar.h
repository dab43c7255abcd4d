#pragma once

#include <QLabel>
#include <QStringList>

namespace ttrace {

// "Run › layer 1 › layers.1.fc1 forward_output it0 mb1 › rank 5": every crumb but the last is
// a link (mouse, or Tab and Enter) that goes back up to that level.
class BreadcrumbBar : public QLabel {
    Q_OBJECT

public:
    explicit BreadcrumbBar(QWidget* parent = nullptr);

    void setCrumbs(const QStringList& crumbs);
    QStringList crumbs() const { return crumbs_; }

Q_SIGNALS:
    void crumbActivated(int level);  // index into crumbs()

private:
    QStringList crumbs_;
};

}  // namespace ttrace

#include "BreadcrumbBar.h"

namespace ttrace {

BreadcrumbBar::BreadcrumbBar(QWidget* parent) : QLabel(parent) {
    setObjectName(QStringLiteral("breadcrumbs"));
    setTextFormat(Qt::RichText);
    setTextInteractionFlags(Qt::LinksAccessibleByMouse | Qt::LinksAccessibleByKeyboard);
    setFocusPolicy(Qt::TabFocus);
    connect(this, &QLabel::linkActivated, this,
            [this](const QString& link) { Q_EMIT crumbActivated(link.toInt()); });
}

void BreadcrumbBar::setCrumbs(const QStringList& crumbs) {
    crumbs_ = crumbs;
    QStringList parts;
    for (int i = 0; i < crumbs.size(); ++i) {
        const QString text = crumbs[i].toHtmlEscaped();
        parts << (i + 1 < crumbs.size() ? QStringLiteral("<a href=\"%1\">%2</a>").arg(i).arg(text)
                                        : QStringLiteral("<b>%1</b>").arg(text));
    }
    setText(parts.join(QStringLiteral(" &rsaquo; ")));
}

}  // namespace ttrace

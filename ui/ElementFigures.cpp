#include "ElementFigures.h"

#include <QBuffer>

namespace ttrace {

namespace {

QString pngDataUri(const QImage& image) {
    QByteArray bytes;
    QBuffer buffer(&bytes);
    buffer.open(QIODevice::WriteOnly);
    image.save(&buffer, "PNG");
    return QStringLiteral("data:image/png;base64,") + QString::fromLatin1(bytes.toBase64());
}

}  // namespace

QString withElementFigures(const QString& html, const ElementFigures& figures) {
    const qsizetype at = html.lastIndexOf(QStringLiteral("<footer"));
    if (figures.isEmpty() || at < 0) {
        return html;
    }
    QString section = QStringLiteral(
                          "<h2>Element errors of %1</h2>\n<p>Histogram of element relative errors "
                          "against the tensor's threshold, and where they are on the tensor (rows: "
                          "leading dimensions, columns: the last one) with the shards of the "
                          "distributed run drawn over it, as the GUI shows them.</p>\n")
                          .arg(figures.tensor.toHtmlEscaped());
    for (const QImage* image : {&figures.histogram, &figures.image}) {
        if (!image->isNull()) {
            section += QStringLiteral("<p><img alt=\"%1\" src=\"%2\" width=\"%3\"></p>\n")
                           .arg(image == &figures.histogram
                                    ? QStringLiteral("Histogram of element errors")
                                    : QStringLiteral("Element-error image with the shard layout"),
                                pngDataUri(*image))
                           .arg(image->width());
        }
    }
    return QString(html).insert(at, section);
}

}  // namespace ttrace

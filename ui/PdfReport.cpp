#include "PdfReport.h"

#include <QBuffer>
#include <QPageLayout>
#include <QPageSize>
#include <QPdfWriter>
#include <QTextCursor>
#include <QTextDocument>
#include <QTextImageFormat>
#include <QUrl>
#include <algorithm>

#include "report/ReportWriters.h"

namespace ttrace {

namespace {

// Appends a titled figure spanning the text width of `page`. The image is resolved through
// the document's own resources (a `ttrace-resource:` name), never the file system.
void appendFigure(QTextDocument& document, const QPageLayout& page, const QString& title,
                  const QImage& figure, const QString& resourceName) {
    if (figure.isNull()) {
        return;
    }
    const QUrl url(QStringLiteral("ttrace-resource:") + resourceName);
    document.addResource(QTextDocument::ImageResource, url, figure);
    QTextCursor cursor(&document);
    cursor.movePosition(QTextCursor::End);
    cursor.insertBlock();
    cursor.insertHtml(QStringLiteral("<h2>") + title.toHtmlEscaped() + QStringLiteral("</h2>"));
    cursor.insertBlock();
    // The page's text width in points: print() lays out at 96 dpi, so the image spans three
    // quarters of the text width, whatever the printer's resolution.
    const double width = page.paintRect(QPageLayout::Point).width();
    QTextImageFormat image;
    image.setName(url.toString());
    image.setWidth(width);
    image.setHeight(width * figure.height() / std::max(1, figure.width()));
    cursor.insertImage(image);
}

}  // namespace

QByteArray reportToPdf(const CheckReport& report, const QImage& heatmap,
                       const ElementFigures& figures) {
    QTextDocument document;
    document.setMarkdown(reportToMarkdown(report));
    document.setDocumentMargin(0);

    const QPageLayout page(QPageSize(QPageSize::A4), QPageLayout::Portrait,
                           QMarginsF(15, 15, 15, 15), QPageLayout::Millimeter);
    appendFigure(document, page, QStringLiteral("Heatmap"), heatmap, QStringLiteral("heatmap.png"));
    const QString tensor = QStringLiteral("Element errors of ") + figures.tensor;
    appendFigure(document, page, tensor + QStringLiteral(": histogram"), figures.histogram,
                 QStringLiteral("histogram.png"));
    appendFigure(document, page, tensor + QStringLiteral(": where they are"), figures.image,
                 QStringLiteral("elements.png"));
    QBuffer buffer;
    buffer.open(QIODevice::WriteOnly);
    {
        // The PDF is complete once the writer is gone.
        QPdfWriter writer(&buffer);
        writer.setCreator(QStringLiteral("ttrace"));
        writer.setTitle(QStringLiteral("ttrace report"));
        writer.setPageLayout(page);
        document.print(&writer);
    }
    return buffer.data();
}

}  // namespace ttrace

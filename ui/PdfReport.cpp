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

// The image name the document resolves through its own resources, never the file system.
const QString kHeatmapUrl = QStringLiteral("ttrace-resource:heatmap.png");

}  // namespace

QByteArray reportToPdf(const CheckReport& report, const QImage& heatmap) {
    QTextDocument document;
    document.setMarkdown(reportToMarkdown(report));
    document.setDocumentMargin(0);

    const QPageLayout page(QPageSize(QPageSize::A4), QPageLayout::Portrait,
                           QMarginsF(15, 15, 15, 15), QPageLayout::Millimeter);

    if (!heatmap.isNull()) {
        document.addResource(QTextDocument::ImageResource, QUrl(kHeatmapUrl), heatmap);
        QTextCursor cursor(&document);
        cursor.movePosition(QTextCursor::End);
        cursor.insertBlock();
        cursor.insertHtml(QStringLiteral("<h2>Heatmap</h2>"));
        cursor.insertBlock();
        // The page's text width in points: print() lays out at 96 dpi, so the image spans
        // three quarters of the text width, whatever the printer's resolution.
        const double width = page.paintRect(QPageLayout::Point).width();
        QTextImageFormat image;
        image.setName(kHeatmapUrl);
        image.setWidth(width);
        image.setHeight(width * heatmap.height() / std::max(1, heatmap.width()));
        cursor.insertImage(image);
    }
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

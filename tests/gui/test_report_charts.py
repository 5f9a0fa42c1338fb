"""Report HTML in the app (issue 28): a chart (inline SVG in the report) is a picture on the Analyses page, not its
labels run together as text, and a figure's caption sits under its image, not beside it."""
from __future__ import annotations

import io

import pytest
from PIL import Image
from PySide6.QtGui import QImage, QTextDocument

from test_analyses_pane import _pane, class_folders, folder_count  # noqa: F401 - fixtures

X_LABEL = "Images per class folder"
CAPTION = "Reference picture of the cat folder"


def _png(w: int, h: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (w, h), (30, 120, 200)).save(buf, "PNG")
    return buf.getvalue()


@pytest.fixture
def charted_report(monkeypatch, folder_count):  # noqa: F811
    """The folder-count page's report with a histogram (an inline <svg> in the HTML) and a captioned figure."""
    from nemo_desktop.core.reports import sections
    from nemo_desktop.core.reports.document import (Figures, Histogram, HistogramSeries, Paragraph, ReportDocument,
                                                    Section)
    from nemo_desktop.core.reports.images import ReportImage

    def report(result, store, ctx=None, **_):
        counts = list(result.counts.values())
        hist = Histogram("Images per folder", X_LABEL, [0, 1, 2, 3, 4],
                         [HistogramSeries("Every folder", [counts.count(k) for k in range(4)], len(counts), None)])
        figs = Figures([ReportImage(_png(120, 90), 120, 90).with_text(CAPTION),
                        ReportImage(_png(120, 90), 120, 90).with_text("A second picture")])
        return ReportDocument(kind="single", title="Folder count", subtitle="", generated_at="",
                              sections=[Section("Counts", "counts", [Paragraph("Counted."), hist, figs])], meta=[])

    monkeypatch.setitem(sections._REPORTS, ("dataset", folder_count), report)
    return folder_count


def _images(doc: QTextDocument) -> list[tuple[str, float, float, int]]:
    """(resource name, width, height, block number) of every image in the document, tables included."""
    out = []
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fmt = it.fragment().charFormat()
            if fmt.isImageFormat():
                im = fmt.toImageFormat()
                out.append((im.name(), im.width(), im.height(), block.blockNumber()))
            it += 1
        block = block.next()
    return out


def _run(qtbot, make_window, name, folders):
    window, pane = _pane(qtbot, make_window, name)
    window.resize(1280, 800)
    qtbot.wait(50)
    pane.data_path.setText(str(folders))
    with qtbot.waitSignal(pane.sig_result_shown, timeout=20000):
        pane.run()
    qtbot.wait(50)
    return window, pane


def test_a_chart_in_a_result_is_a_picture_of_its_size(qtbot, make_window, charted_report, class_folders):  # noqa: F811
    window, pane = _run(qtbot, make_window, charted_report, class_folders)
    view = pane.result_view
    text = view.toPlainText()
    assert "Counted." in text
    # The chart's labels are drawn in its picture, not run together in the text ("Every foldern = 3, mean —0 1…").
    assert X_LABEL not in text and "Every folder" not in text and "n = 3" not in text
    doc = view.document()
    charts = [i for i in _images(doc) if i[0].startswith("nemo-chart:")]
    assert len(charts) == 1
    name, w, h, _ = charts[0]
    # The SVG is 720 x (8 + 84 + 34) px; shrunk to the view's width when narrower, its proportions kept.
    assert 200 < w <= min(720, view.viewport().width()) and h == pytest.approx(126 * w / 720, abs=1)
    image = doc.resource(QTextDocument.ResourceType.ImageResource.value, name)
    assert isinstance(image, QImage) and not image.isNull()
    dpr = view.devicePixelRatioF()
    assert (image.width(), image.height()) == (round(w * dpr), round(h * dpr))
    # Drawn, not blank: the bars are the report's first palette colour somewhere in the picture.
    colours = {image.pixelColor(x, y).name() for x in range(0, image.width(), 2) for y in range(0, image.height(), 2)}
    assert "#2f6db5" in colours and "#ffffff" in colours


def test_a_figure_caption_is_under_its_image_in_the_app(qtbot, make_window, charted_report,  # noqa: F811
                                                        class_folders):  # noqa: F811
    window, pane = _run(qtbot, make_window, charted_report, class_folders)
    doc = pane.result_view.document()
    layout = doc.documentLayout()
    pictures = [i for i in _images(doc) if i[0].startswith("data:image/png")]
    assert len(pictures) == 2
    caption = doc.find(CAPTION)
    assert not caption.isNull()
    caption_block = caption.block()
    assert "\ufffc" not in caption_block.text()  # the caption is a block of its own, not text beside the image
    image_block = doc.findBlockByNumber(pictures[0][3])
    image_box, caption_box = layout.blockBoundingRect(image_block), layout.blockBoundingRect(caption_block)
    assert caption_box.top() >= image_box.bottom() - 1  # under the image
    assert abs(caption_box.left() - image_box.left()) < 2  # in its column
    # The two figures stand side by side: the second picture's top is the first's.
    second = layout.blockBoundingRect(doc.findBlockByNumber(pictures[1][3]))
    assert second.left() > image_box.right() - 1 and abs(second.top() - image_box.top()) < 2

"""The combined report of a batch: every image once with its status (explained, no cause found, skipped by design,
failed), n per status, each explained image's section, model text escaped; HTML and PDF from one document."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from nemo_desktop.core.base.batch_items import (EXPLAINED, FAILED, NO_CAUSE, SKIPPED_CORRECT, SKIPPED_NO_LABEL,
                                                BatchItem, count_statuses, true_class_from_folder)
from nemo_desktop.core.data.datasets import LabelMapping
from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.reports import render_html
from nemo_desktop.core.reports.model import ReportImage
from nemo_desktop.core.reports.batch import build_batch_report, export_batch_report
from report_fixtures import SCRIPT, make_result, picture, store_result


def _batch(store, tmp_path) -> list[BatchItem]:
    items = []
    for i, hostile in ((0, False), (1, True)):
        r, arts = make_result(i, "scitx", hostile=hostile)
        store_result(store, r, arts)
        item = BatchItem(r.sample.image_path)
        item.finish(r)
        items.append(item)
    r, arts = make_result(2, "scitx")
    for c in r.candidates:  # no hypothesis raised P(true)
        c.cei = -abs(c.cei or 1.0) - 5
    r.cei = r.candidates[r.selected_index].cei
    store_result(store, r, arts)
    no_cause = BatchItem(r.sample.image_path)
    no_cause.finish(r)
    items.append(no_cause)
    ok = tmp_path / "cat" / "fine.png"
    ok.parent.mkdir()
    picture(7).save(ok)
    items.append(BatchItem(str(ok), "cat", "cat", 0.9, status=SKIPPED_CORRECT))
    items.append(BatchItem(str(tmp_path / "misc" / "x.png"), None, "dog", 0.8, status=SKIPPED_NO_LABEL,
                           label_note="the folder name 'misc' is not a class of the classifier"))
    broken = BatchItem(str(tmp_path / "broken.png"), "cat", "dog", 0.7)
    broken.fail({"message": f"The editor crashed {SCRIPT}", "hint": "Free GPU memory and run it again."})
    items.append(broken)
    return items


def test_items_take_their_status_from_the_result(store, tmp_path):
    items = _batch(store, tmp_path)
    assert [it.status for it in items] == [EXPLAINED, EXPLAINED, NO_CAUSE, SKIPPED_CORRECT, SKIPPED_NO_LABEL, FAILED]
    assert items[2].summary_text().startswith("No hypothesis raised P(true) (best CEI -")
    assert [it.tone for it in items] == ["finding", "finding", "neutral", "neutral", "neutral", "failure"]
    assert count_statuses(items) == [(EXPLAINED, 2), (NO_CAUSE, 1), (SKIPPED_CORRECT, 1), (SKIPPED_NO_LABEL, 1),
                                     (FAILED, 1)]


def test_batch_html_has_every_image_its_status_and_escaped_model_text(store, tmp_path):
    items = _batch(store, tmp_path)
    html = render_html(build_batch_report(items, store))
    assert SCRIPT not in html and "&lt;script&gt;" in html
    assert "n = 6 images" in html
    for it in items[:3]:  # every explained image has its own sample section, named after its file
        assert f"The model saw stripes in sample {items.index(it)}" in html
    assert "No hypothesis raised P(true)" in html
    assert "Free GPU memory and run it again." in html  # the failure's hint
    assert "fine.png" in html and "The classifier already predicts the true class" in html
    doc = build_batch_report(items, store)
    assert sum(1 for s in doc.sections if s.title.startswith("Sample ")) == 3
    table = next(s for s in doc.sections if s.anchor == "images").blocks[0]
    # Explained images show their stored copy (their original paths do not exist here); the skipped one its file.
    assert [isinstance(row[1], ReportImage) for row in table.rows] == [True, True, True, True, False, False]
    summary = doc.sections[0].blocks[0]
    assert summary.rows[-1] == ["Total", "6"]
    assert ["failed", "1"] in summary.rows and ["skipped (correctly classified)", "1"] in summary.rows


def test_a_result_gone_from_the_store_is_said_not_dropped(store, tmp_path):
    items = _batch(store, tmp_path)
    items[0].result_key = "0" * 64
    html = render_html(build_batch_report(items, store))
    assert "the result is no longer in the results store" in html
    with pytest.raises(ConfigError):
        build_batch_report([], store)


@pytest.mark.skipif(not shutil.which("pdftotext"), reason="pdftotext missing (Debian poppler-utils)")
def test_batch_pdf_renders(store, tmp_path):
    out = export_batch_report(_batch(store, tmp_path), store, "pdf", tmp_path / "batch.pdf")
    text = subprocess.run(["pdftotext", "-layout", str(out), "-"], check=True, capture_output=True,
                          text=True).stdout
    for needle in ("Batch diagnosis of 6 images", "skipped (correctly classified)", "no cause found",
                   "Free GPU memory", "Sample 3"):
        assert needle in text


def test_true_class_from_the_folder_name():
    mapping = LabelMapping(["tabby cat", "golden_retriever", "dog"])
    assert true_class_from_folder("/data/Tabby_Cat/x.jpg", mapping) == ("tabby cat", "from the folder name 'Tabby_Cat'")
    assert true_class_from_folder("/data/golden retriever/x.jpg", mapping)[0] == "golden_retriever"
    assert true_class_from_folder("/data/DOG/x.jpg", mapping)[0] == "dog"
    name, note = true_class_from_folder("/data/misc/x.jpg", mapping)
    assert name is None and "'misc' is not a class of the classifier" in note

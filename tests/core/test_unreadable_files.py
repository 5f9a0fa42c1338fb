"""Every kind of unreadable file is one clear per-file error (never a traceback, never a silent omission, never
a hang): in load_image, in the reference index and in the drop scan; the good files are still processed."""
from __future__ import annotations

import io
import json
import sys

import numpy as np
import pytest
from PIL import Image

from fixtures_tiny.bad_files import bad_files, python_unprivileged
from nemo_desktop.core.base.errors import InputImageError
from nemo_desktop.core.base.images import load_image, unreadable_reason

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs and permission bits are POSIX")


def _png() -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.full((8, 8, 3), 200, np.uint8)).save(buf, "PNG")
    return buf.getvalue()


EXPECTED = {"fifo": "FIFO", "dangling": "does not exist", "folder": "is a folder",
            "unreadable": "permission denied"}


@pytest.mark.timeout(30)  # a FIFO opened by mistake would block forever
def test_load_image_names_each_kind_of_unreadable_file(tmp_path):
    files = bad_files(tmp_path, _png())
    for kind, path in files.items():
        if kind == "unreadable":
            continue  # root reads it anyway: checked unprivileged below
        with pytest.raises(InputImageError) as err:
            load_image(path)  # a FIFO must not block: it is refused before open()
        assert EXPECTED[kind] in err.value.message and str(path) in err.value.message
        assert EXPECTED[kind] in unreadable_reason(path)
    assert "moved-away-gone.png" in unreadable_reason(files["dangling"])  # says where the link pointed


def test_permission_denied_is_a_per_file_error_not_a_traceback(tmp_path):
    shared = tmp_path
    good = shared / "good.png"
    good.write_bytes(_png())
    files = bad_files(shared, _png())
    code = (
        "import json\n"
        "from nemo_desktop.core.base.images import load_image, unreadable_reason\n"
        "from nemo_desktop.core.base.errors import InputImageError\n"
        "out = {}\n"
        f"for p in {[str(good), str(files['unreadable'])]!r}:\n"
        "    try:\n"
        "        out[p] = list(load_image(p).size)\n"
        "    except InputImageError as e:\n"
        "        out[p] = e.message\n"
        f"out['reason'] = unreadable_reason({str(files['unreadable'])!r})\n"
        "print(json.dumps(out))\n")
    out = python_unprivileged(code)
    assert out[str(good)] == [8, 8]
    assert "permission denied" in out[str(files["unreadable"])]
    assert "permission denied" in out["reason"]


@pytest.mark.timeout(120)
def test_index_reports_every_unreadable_file_and_indexes_the_rest(tmp_path):
    from fixtures_tiny.digits_classifier import DigitsMLPClassifier, load_digits_arrays, write_digit_folder
    from nemo_desktop.core.data.datasets import FolderDataset
    from nemo_desktop.core.data.reference_index import build_index
    from nemo_desktop.core.store import ResultsStore

    X, y = load_digits_arrays()
    root = tmp_path / "digits"
    write_digit_folder(root, X[:40], y[:40])
    files = bad_files(root / "3", _png())
    classifier = DigitsMLPClassifier.train(X[200:600], y[200:600])
    with ResultsStore.open(db_path=tmp_path / "store" / "results.sqlite") as store:
        index = build_index(FolderDataset(root), classifier, store, batch_size=8)
    assert len(index) == 40 + (1 if _root() else 0)  # root reads the 0-permission file; others get an error
    for kind, path in files.items():
        if kind == "unreadable" and _root():
            continue
        assert str(path) in index.errors, f"{kind} was skipped silently"
        assert EXPECTED[kind] in index.errors[str(path)]


def _root() -> bool:
    import os

    return os.geteuid() == 0


@pytest.mark.timeout(60)
def test_drop_scan_rejects_each_unreadable_file_with_its_reason(tmp_path):
    shared = tmp_path
    good = shared / "good.png"
    good.write_bytes(_png())
    files = bad_files(shared, _png())
    loose = [str(files["fifo"]), str(files["dangling"]), str(files["unreadable"])]
    code = (
        "import json\n"
        "from nemo_desktop.core.base.job_context import JobContext\n"
        "from nemo_desktop.gui.drops import scan_dropped\n"
        f"a = scan_dropped([{str(shared)!r}], JobContext())\n"  # the folder: its entries one by one
        f"b = scan_dropped({loose + [str(good)]!r}, JobContext())\n"  # the same files dropped loose
        "print(json.dumps({'folder': [[str(p) for p in a.images], a.rejected],"
        " 'loose': [[str(p) for p in b.images], b.rejected]}))\n")
    out = python_unprivileged(code)
    for what in ("folder", "loose"):
        images, rejected = out[what]
        assert images == [str(good)], what
        reasons = dict(rejected)
        for kind in ("fifo", "dangling", "unreadable") + (("folder",) if what == "folder" else ()):
            assert EXPECTED[kind] in reasons[str(files[kind])], (what, kind, reasons)

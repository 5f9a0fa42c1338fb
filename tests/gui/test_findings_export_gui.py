"""Issue 44 in the window: the Report exporter writes the per-image table of an indexed dataset; "Open in FiftyOne"
on the dataset browser and on a failure mode is greyed out with the reason when the 'fiftyone' extra is missing (its
working path is tested with the real fiftyone in tests/core/export/test_fiftyone.py); the browser's Open ▸ "FiftyOne
dataset…" opens a FiftyOne dataset by name (the fiftyone: source), greyed out the same way without the extra."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core" / "export"))

from demo_findings import demo_findings  # noqa: E402

pq = pytest.importorskip("pyarrow.parquet")


@pytest.fixture
def window_with_findings(make_window):
    from nemo_desktop.core.store.paths import get_paths

    found = demo_findings()
    paths = get_paths().ensure()
    shutil.rmtree(paths.store_dir)
    shutil.copytree(found.store_dir, paths.store_dir)
    return make_window(), found


def test_the_report_exporter_writes_the_per_image_table(qtbot, window_with_findings, tmp_path):
    window, found = window_with_findings
    pane = window.show_pane("report_exporter")
    row = pane.table_row
    pane.refresh()  # what showing the pane the first time does
    qtbot.waitUntil(lambda: row.index_combo.currentData() == found.index_id, timeout=30000)
    assert row.button.isEnabled() and "360 images" in row.index_combo.currentText()
    target = tmp_path / "table.parquet"
    with qtbot.waitSignal(row.write(found.index_id, target).sig_done, timeout=60000):
        pass
    assert pq.read_metadata(target).num_rows == 360
    assert "Wrote 360 rows" in pane.status_label.text() and pane.open_button.isEnabled()


def test_open_in_fiftyone_is_greyed_out_with_the_reason_without_the_extra(qtbot, window_with_findings, without):
    from nemo_desktop.core.analyses.failure_modes.members import list_modes
    from nemo_desktop.core.analyses.failure_modes.result import FailureModesResult
    from nemo_desktop.core.store import ResultsStore
    from nemo_desktop.core.store.paths import get_paths

    without("fiftyone")
    window, found = window_with_findings
    browser = window.show_pane("dataset_browser")
    with qtbot.waitSignal(browser.sig_opened, timeout=30000):
        browser.open_path(str(found.dataset_dir))
    qtbot.waitUntil(lambda: browser.data is not None and browser.data.indexed, timeout=30000)
    button = browser.fiftyone_button
    assert not button.isEnabled() and "nemo-desktop[fiftyone]" in button.toolTip()
    with ResultsStore.open(get_paths()) as store:
        result = FailureModesResult.from_dict(store.get(found.failure_modes_key).payload)
    result.result_key = found.failure_modes_key
    browser.show_failure_mode(list_modes(result)[0])
    mode_button = browser.mode_bar.fiftyone_button
    assert not mode_button.isHidden() and not mode_button.isEnabled()
    assert "nemo-desktop[fiftyone]" in mode_button.toolTip()
    from nemo_desktop.gui.panes.dataset_browser.fiftyone_link import open_in_fiftyone

    assert open_in_fiftyone(browser) is None  # nothing runs without the extra


@pytest.fixture(scope="module")
def fo():
    import importlib.util

    if importlib.util.find_spec("fiftyone") is None:
        pytest.skip("the 'fiftyone' extra is not installed")
    from fiftyone_db import fiftyone_in_temporary_database

    with fiftyone_in_temporary_database() as fiftyone:
        yield fiftyone


def test_open_in_fiftyone_on_a_failure_mode_exports_and_shows_its_view(qtbot, fo, window_with_findings,
                                                                        monkeypatch):
    """The real export; only the app's start is recorded (a browser cannot be opened here)."""
    from types import SimpleNamespace

    from PySide6.QtGui import QDesktopServices

    from nemo_desktop.core.analyses.failure_modes.members import list_modes
    from nemo_desktop.core.analyses.failure_modes.result import FailureModesResult
    from nemo_desktop.core.export import fiftyone_export
    from nemo_desktop.core.store import ResultsStore
    from nemo_desktop.core.store.paths import get_paths

    launched, opened = [], []
    monkeypatch.setattr(fiftyone_export, "launch", lambda name, wait, view: launched.append((name, view))
                        or SimpleNamespace(url="http://localhost:5151/"))
    monkeypatch.setattr(QDesktopServices, "openUrl", lambda url: opened.append(url.toString()))
    window, found = window_with_findings
    browser = window.show_pane("dataset_browser")
    with qtbot.waitSignal(browser.sig_opened, timeout=30000):
        browser.open_path(str(found.dataset_dir))
    qtbot.waitUntil(lambda: browser.data is not None and browser.data.indexed, timeout=30000)
    assert browser.fiftyone_button.isEnabled()
    with ResultsStore.open(get_paths()) as store:
        result = FailureModesResult.from_dict(store.get(found.failure_modes_key).payload)
    result.result_key = found.failure_modes_key
    mode = list_modes(result)[0]
    browser.show_failure_mode(mode)
    assert browser.mode_bar.fiftyone_button.isEnabled()
    with qtbot.waitSignal(browser.mode_bar.sig_fiftyone):
        browser.mode_bar.fiftyone_button.click()
    qtbot.waitUntil(lambda: bool(opened), timeout=120000)
    ((name, view),) = launched
    ds = fo.load_dataset(name)
    assert len(ds) == 360 and view in ds.list_saved_views()
    assert set(ds.load_saved_view(view).values("filepath")) == set(mode.paths)
    assert opened == ["http://localhost:5151/"]


def test_the_open_menu_offers_a_fiftyone_dataset_greyed_out_without_the_extra(qtbot, make_window, without):
    without("fiftyone")
    browser = make_window().show_pane("dataset_browser")
    action = browser.open_fiftyone_action
    assert action in browser.open_button.menu().actions() and action.text() == "FiftyOne dataset…"
    assert not action.isEnabled() and "nemo-desktop[fiftyone]" in action.toolTip()
    from nemo_desktop.gui.panes.dataset_browser.fiftyone_open import choose_fiftyone

    assert choose_fiftyone(browser) is None  # nothing runs without the extra


def test_the_browser_opens_a_fiftyone_dataset_by_name(qtbot, fo, window_with_findings, monkeypatch):
    """Open ▸ FiftyOne dataset… lists FiftyOne's datasets; the chosen one is shown through its reference index (built
    here from the fiftyone: source) and then compared with the FiftyOne dataset itself (no new images)."""
    from PySide6.QtWidgets import QInputDialog

    from nemo_desktop.core.data.datasets import open_dataset
    from nemo_desktop.core.data.reference_index import build_index
    from nemo_desktop.core.store import ResultsStore
    from nemo_desktop.core.store.paths import get_paths

    window, found = window_with_findings
    fo.Dataset.from_dir(dataset_dir=str(found.dataset_dir), dataset_type=fo.types.ImageClassificationDirectoryTree,
                        name="demo-browse", label_field="ground_truth")
    with ResultsStore.open(get_paths()) as store:
        index = build_index(open_dataset("fiftyone:demo-browse"), found.classifier(), store)
    offered = []

    def pick(parent, title, label, names, current, editable):
        offered.append((list(names), editable))
        return "demo-browse", True

    monkeypatch.setattr(QInputDialog, "getItem", staticmethod(pick))
    browser = window.show_pane("dataset_browser")
    assert browser.open_fiftyone_action.isEnabled()
    with qtbot.waitSignal(browser.sig_opened, timeout=60000):
        browser.open_fiftyone_action.trigger()
    ((names, editable),) = offered
    assert "demo-browse" in names and names == sorted(fo.list_datasets()) and editable  # a name may be typed
    data = browser.data
    assert data.root == "fiftyone:demo-browse" and data.index_id == index.index_id and len(data) == 360
    assert browser.path_label.text() == "fiftyone:demo-browse"
    assert data.not_indexed is None  # shown from the index alone, before FiftyOne's dataset is read
    qtbot.waitUntil(lambda: browser.data.not_indexed == 0, timeout=60000)  # read back from FiftyOne: nothing new

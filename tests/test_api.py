"""The Python API (`import nemo_desktop as nemo`, nemo_desktop/api.py) on tiny local models, and the example
notebook docs/python-api.ipynb executed with nbclient on the same models."""
from __future__ import annotations

import _thread
import json
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import nemo_desktop as nemo
from fixtures_tiny.classifiers import TINY_CLASSES, build_tiny_timm
from fixtures_tiny.plugin_dist import METHOD, write_plugin_dist

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("api")
    model = build_tiny_timm(root / "timm", label_names=TINY_CLASSES, input_size=32)
    rng = np.random.default_rng(0)
    images = []
    for i in range(2):
        p = root / f"img{i}.png"
        Image.fromarray(rng.integers(0, 255, (40, 40, 3), dtype=np.uint8)).save(p)
        images.append(str(p))
    return {"root": root, "classifier": f"timm:local-dir:{model}", "images": images,
            "site": write_plugin_dist(root / "site")}


@pytest.fixture
def plugin(tiny, monkeypatch):
    from nemo_desktop.core.base import plugins

    monkeypatch.syspath_prepend(str(tiny["site"]))
    plugins._reset_for_tests()
    yield
    plugins._reset_for_tests()
    for mod in [m for m in sys.modules if m.startswith("nemo_tiny_plugin")]:
        del sys.modules[mod]


def test_the_package_names_the_api_lazily_and_documents_it():
    import subprocess

    code = "import sys, nemo_desktop; print('nemo_desktop.api' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["False", "False"], out.stderr  # `import nemo_desktop` stays light
    for name in nemo.__all__:
        obj = getattr(nemo, name)
        assert name == "__version__" or (obj.__doc__ or "").strip(), f"{name} has no docstring"
    assert (ROOT / "nemo_desktop" / "py.typed").is_file()
    assert set(nemo.__all__) - {"__version__"} <= set(dir(nemo))


def test_the_api_names_are_listed_once():
    """Issue 41: `nemo_desktop.api.__all__` is the one list; the package's lazy names and its type stub follow it."""
    import ast

    from nemo_desktop import api

    assert nemo.__all__ == ["__version__", *api.__all__]
    assert set(api.__all__) <= set(dir(nemo)) and all(getattr(nemo, n) is getattr(api, n) for n in api.__all__)
    stub = ast.parse((ROOT / "nemo_desktop" / "__init__.pyi").read_text())
    imported = [a.name for node in ast.walk(stub) if isinstance(node, ast.ImportFrom) for a in node.names]
    assert imported == ["*"]  # the stub re-exports api.__all__ rather than listing the names again
    package = ast.parse((ROOT / "nemo_desktop" / "__init__.py").read_text())
    literals = {c.value for c in ast.walk(package) if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    assert not literals & (set(api.__all__) - {"api"})  # and the package does not list them either
    with pytest.raises(AttributeError):
        nemo.not_an_api_name  # noqa: B018


def test_results_are_typed_for_a_type_checker():
    """Issue 42 §4: an explanation's fields and to_pandas() are typed (not Any), and a stored result's key is a str.
    (The annotations a checker reads; README's install mode makes the package visible to it.)"""
    import typing

    import pandas

    from nemo_desktop.api import Explanation, Predictions, Result
    from nemo_desktop.core.base.records import Candidate, ExplanationResult, Observation, SampleInfo

    # the names the module imports for type checkers only (if TYPE_CHECKING)
    only_for_checkers = {"pandas": pandas, "Candidate": Candidate, "ExplanationResult": ExplanationResult,
                         "Observation": Observation, "SampleInfo": SampleInfo}

    def hints(obj):
        return typing.get_type_hints(obj, localns=only_for_checkers)

    assert hints(Result)["key"] is str
    assert hints(Result.to_pandas)["return"] is pandas.DataFrame
    assert hints(Predictions.to_pandas)["return"] is pandas.DataFrame
    fields = {name: hints(getattr(Explanation, name).fget)["return"]
             for name in ("explanation", "cei", "candidates", "sample", "selected_index")}
    assert fields == {"explanation": str | None, "cei": float | None, "candidates": list[Candidate],
                      "sample": SampleInfo, "selected_index": int | None}
    assert hints(nemo.explain)["return"] is Explanation
    assert issubclass(Explanation, Result)


def test_predict_models_and_analyses(tiny):
    preds = nemo.predict(tiny["images"], tiny["classifier"], top_k=3, device="cpu", progress=False)
    assert [r["image"] for r in preds] == tiny["images"] and len(preds[0]["top_k"]) == 3
    assert preds.classifier["family"] == "timm" and preds.to_dict()["results"] == list(preds)
    frame = preds.to_pandas()
    assert len(frame) == 6 and list(frame.columns[:3]) == ["image", "rank", "index"]
    assert nemo.load_model(tiny["classifier"], device="cpu") is nemo.load_model(tiny["classifier"], device="cpu")
    assert any(m["id"] == "vit-b16-augreg2" for m in nemo.list_models("classifier"))
    assert "scitx" in nemo.methods()
    fm = next(a for a in nemo.analyses("dataset") if a["name"] == "failure-modes")
    assert "classifier" in fm["components"] and fm["data"] == "index" and fm["settings"]
    with pytest.raises(nemo.ConfigError, match="top_k"):
        nemo.predict(tiny["images"], tiny["classifier"], top_k=0)


def test_explain_result_pandas_report_and_get_result(tiny, plugin, tmp_path):
    seen = []
    exp = nemo.explain(tiny["images"][0], "cat", classifier=tiny["classifier"], method=METHOD,
                       settings={"wait_s": 0.3}, device="cpu", progress=seen.append)
    assert exp.explanation.startswith("The image is mostly") and exp.key and exp.analysis == METHOD
    assert seen and {p.stage for p in seen} >= {"Waiting"}
    assert exp.to_dict()["sample"]["true_name"] == "cat"
    frame = exp.to_pandas()
    assert list(frame["hypothesis"]) == [exp.explanation] and bool(frame["selected"][0])
    assert exp.images()["image"].is_file()
    report = exp.report(tmp_path / "exp.html")
    assert report.read_text().lstrip().lower().startswith("<!doctype html")
    again = nemo.get_result(exp.key[:10])
    assert again.key == exp.key and again.explanation == exp.explanation and "tiny-caption" in repr(again)
    assert isinstance(exp, nemo.Explanation) and isinstance(again, nemo.Explanation) and isinstance(exp.key, str)
    with pytest.raises(nemo.ConfigError, match="no option"):
        nemo.explain(tiny["images"][0], "cat", classifier=tiny["classifier"], method=METHOD, settings={"x": 1})
    assert any(p["name"] == "broken-family" and not p["ok"] for p in nemo.list_plugins())


def test_keyboard_interrupt_cancels_the_job(tiny, plugin):
    """Ctrl-C (a notebook's interrupt: KeyboardInterrupt in the main thread) stops the call at once and cancels
    its job's token, which work in other threads checks."""
    tokens = []

    def progress(p):
        from nemo_desktop.core.base.job_context import current_cancel_token

        if not tokens:
            tokens.append(current_cancel_token())

    timer = threading.Timer(0.5, _thread.interrupt_main)
    timer.start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        nemo.explain(tiny["images"][0], "cat", classifier=tiny["classifier"], method=METHOD,
                     settings={"wait_s": 60}, device="cpu", progress=progress)
    assert time.monotonic() - t0 < 10
    assert tokens and tokens[0].cancelled


def test_the_example_notebook_runs_on_tiny_models(tiny, tmp_path):
    import nbclient
    import nbformat

    nb = nbformat.read(ROOT / "docs" / "python-api.ipynb", as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    cell.source = (f"CLASSIFIER = {tiny['classifier']!r}\nMLLM = None\nIMAGE = {tiny['images'][0]!r}\n"
                   f"TRUE_LABEL = 'dog'\nMETHOD = {METHOD!r}\nREFERENCE = 'none'\nSETTINGS = {{}}\n"
                   "DEVICE = 'cpu'\n")
    env_before = dict(os.environ)
    os.environ["PYTHONPATH"] = os.pathsep.join([str(tiny["site"]), str(ROOT), os.environ.get("PYTHONPATH", "")])
    os.environ["NEMO_HOME"] = str(tmp_path / "home")
    try:
        client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                         resources={"metadata": {"path": str(tmp_path)}})
        client.execute()
    finally:
        os.environ.clear()
        os.environ.update(env_before)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    last = nb.cells[-1].outputs[-1]["data"]["text/plain"]
    assert "explanation.html" in last and last.rstrip().endswith("True)")
    assert (tmp_path / "explanation.html").is_file()
    shown = json.dumps([o.get("data", {}) for o in outputs])
    assert "top_k" not in shown and "probability" in shown  # predictions shown as a table

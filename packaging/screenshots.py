"""Screenshots of the panes at work, taken from the real window under a virtual X server.

    .venv/bin/python packaging/screenshots.py [--out docs/screenshots]

Needs `xvfb-run` and Qt's xcb libraries (Debian: xvfb libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1
libxcb-xinerama0); without a DISPLAY the script re-runs itself under `xvfb-run` with QT_QPA_PLATFORM=xcb.
Everything happens in a temporary NEMO_HOME, offline:

  * a dataset of real handwritten digits (scikit-learn's bundled scans, drawn in colour at 32x32 px),
  * a small timm classifier trained on them here for a few seconds (so its mistakes are real ones),
  * a tiny random Qwen2-VL and InstructPix2Pix (benchmarks/_tiny_models.py) as captioning model and
    editor: no real weights can be downloaded here, so their captions, hypotheses and edits are noise.

The window loads the three models in the Model manager, indexes the dataset (the browser's confusion matrix),
explains three misclassified digits with SciTX as one batch (the batch table above the last result), opens
one counterfactual's before/after view, and each view is saved as a PNG (kept under 300 KB). The tiny random
MLLM writes no readable hypothesis, so the before/after view alone is shot on a run with the test suite's
scripted MLLM and PIL editor (test doubles, named so in the window). The README's shots of a new user's path
(the welcome page, an Analyses result) come from `walkthrough.py --readme`.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_BYTES = 300_000
SIZE = (1360, 860)
INKS = [(200, 30, 30), (30, 60, 200), (20, 130, 40), (30, 30, 30), (230, 120, 0), (120, 20, 140)]
NAMES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


def rerun_under_xvfb(screen: str = "1600x1000") -> int:
    if not shutil.which("xvfb-run"):
        print("screenshots.py: no DISPLAY and no xvfb-run. Install Debian packages xvfb libxcb-cursor0 "
              "libxcb-icccm4 libxcb-keysyms1 libxcb-xinerama0 (apt-get install ...), or run with a display.",
              file=sys.stderr)
        return 2
    env = dict(os.environ, QT_QPA_PLATFORM="xcb", NEMO_SCREENSHOTS_CHILD="1")
    cmd = ["xvfb-run", "-a", "-s", f"-screen 0 {screen}x24", sys.executable, *sys.argv]
    return subprocess.call(cmd, env=env)


def write_digits(root: Path, per_class: int, seed: int = 0) -> tuple[list, list]:
    """Real digit scans drawn in colour as 32x32 PNGs: root/<name>/<n>.png. Returns (images, labels) of
    the rest, for training."""
    import numpy as np
    from PIL import Image
    from sklearn.datasets import load_digits

    d = load_digits()
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(d.target))

    def draw(x):
        a = np.asarray(Image.fromarray((x / 16 * 255).astype(np.uint8)).resize((32, 32), Image.BILINEAR),
                       np.float64)[..., None] / 255
        ink = np.array(INKS[int(rng.integers(len(INKS)))], np.float64)
        return Image.fromarray(np.clip(255 * (1 - a) + ink * a, 0, 255).astype(np.uint8))

    counts = dict.fromkeys(range(10), 0)
    train_x, train_y = [], []
    for i in order:
        y = int(d.target[i])
        img = draw(d.images[i])
        if counts[y] < per_class:
            (root / NAMES[y]).mkdir(parents=True, exist_ok=True)
            img.save(root / NAMES[y] / f"{counts[y]:03d}.png")
            counts[y] += 1
        else:
            train_x.append(img)
            train_y.append(y)
    return train_x, train_y


def train_classifier(folder: Path, images, labels, epochs: int = 2) -> Path:
    """timm's small test_resnet trained briefly on the digits, saved with save_for_hf."""
    import numpy as np
    import timm
    import torch

    torch.manual_seed(0)
    model = timm.create_model("test_resnet", pretrained=False, num_classes=10)
    x = torch.from_numpy(np.stack([np.asarray(im, np.float32) / 255 for im in images])).permute(0, 3, 1, 2)
    x = (x - 0.5) / 0.5
    y = torch.tensor(labels)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(epochs):
        perm = torch.randperm(len(x))
        for s in range(0, len(x), 64):
            idx = perm[s:s + 64]
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
    model.eval()
    timm.models.save_for_hf(model, str(folder), model_config={"label_names": NAMES}, safe_serialization=True,
                            data_config={"input_size": (3, 32, 32), "crop_pct": 1.0, "mean": (0.5, 0.5, 0.5),
                                         "std": (0.5, 0.5, 0.5), "interpolation": "bilinear"})
    return folder


def run_until(app, predicate, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        app.processEvents()
        time.sleep(0.01)
        if time.monotonic() > deadline:
            raise TimeoutError("timed out waiting for the window")


def settle(app, seconds: float = 0.6) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents()
        time.sleep(0.01)


def save(window, path: Path) -> None:
    """The window's pixels as PNG, scaled down only if the file would exceed MAX_BYTES."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    if hasattr(window, "jobs_panel"):  # finished jobs leave the status area after 4 s
        run_until(app, lambda: not window.jobs_panel.rows, 30)
    settle(app, 0.3)
    pixmap = window.grab()
    scale = 1.0
    while True:
        shot = pixmap if scale == 1.0 else pixmap.scaledToWidth(int(pixmap.width() * scale),
                                                                Qt.TransformationMode.SmoothTransformation)
        shot.save(str(path), "PNG", 9)
        if path.stat().st_size <= MAX_BYTES or scale < 0.5:
            break
        scale -= 0.1
    print(f"  {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {shot.width()}x{shot.height()}, "
          f"{path.stat().st_size // 1024} KB")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args()
    if not os.environ.get("DISPLAY") and os.environ.get("QT_QPA_PLATFORM") != "offscreen" \
            and not os.environ.get("NEMO_SCREENSHOTS_CHILD"):
        return rerun_under_xvfb()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="nemo-screenshots-"))
    os.environ["HF_HUB_OFFLINE"] = "1"
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import _tiny_models as tiny

    print("building the demo dataset and models…")
    train_x, train_y = write_digits(work / "digits", per_class=24)
    clf = train_classifier(work / "digits-resnet", train_x, train_y)
    mllm, editor = tiny.build_qwen2_vl(work / "mllm"), tiny.build_instruct_pix2pix(work / "editor")
    (work / "home").mkdir()

    from nemo_desktop.gui.app import build

    app, window = build(["--home", str(work / "home")])
    window.resize(*SIZE)
    window.show()
    settle(app, 1.0)

    # Model manager: the three models loaded through its real path.
    manager = window.show_pane("model_manager")
    handles = [manager.load("classifier", f"timm:local-dir:{clf}"), manager.load("mllm", f"transformers-mllm:{mllm}"),
               manager.load("editor", f"diffusers-instruct-pix2pix:{editor}")]
    run_until(app, lambda: all(not h.active for h in handles), 600)
    run_until(app, lambda: manager.model.rowCount() > 0, 60)
    manager.select("qwen2.5-vl-7b")
    settle(app, 1.5)
    save(window, args.out / "model_manager.png")

    # Dataset browser: open and index the digits.
    browser = window.show_pane("dataset_browser")
    opened = []
    browser.sig_opened.connect(opened.append)
    browser.open_path(work / "digits")
    run_until(app, lambda: bool(opened), 60)
    handle = browser.index_dataset()
    run_until(app, lambda: not handle.active, 600)
    run_until(app, lambda: browser.data is not None and browser.data.indexed, 60)
    data = browser.data
    wrong = [int(r) for r in (data.preds != data.labels).nonzero()[0]]
    browser.grid.selectionModel().clear()
    if wrong:  # show a mistake (red frame, "→ predicted") in the middle of the first screen
        from PySide6.QtWidgets import QAbstractItemView

        row = int((browser.grid_model.rows == wrong[0]).nonzero()[0][0])
        browser.grid.scrollTo(browser.grid_model.index(row, 0), QAbstractItemView.ScrollHint.PositionAtCenter)
    settle(app, 2.0)
    run_until(app, lambda: not browser.thumbnails.busy, 60)
    settle(app, 1.0)
    save(window, args.out / "dataset_browser.png")
    browser.analytics.setCurrentIndex(browser.analytics.indexOf(browser.analytics._confusion_page))
    settle(app, 1.0)
    save(window, args.out / "analytics.png")
    browser.analytics.setCurrentIndex(0)

    # Workbench: SciTX on one misclassified digit (short replies: the tiny MLLM writes noise anyway).
    if not wrong:
        print("the demo classifier made no mistake; no workbench screenshot", file=sys.stderr)
        return 1
    browser.set_filter(correctness="misclassified")
    settle(app, 0.5)
    from PySide6.QtCore import QItemSelectionModel

    for i in range(min(3, browser.grid_model.rowCount())):  # a batch of three mistakes
        browser.grid.selectionModel().select(browser.grid_model.index(i, 0), QItemSelectionModel.SelectionFlag.Select)
    browser.explain_selected()
    workbench = window.panes["workbench"]
    run_until(app, lambda: bool(workbench.methods), 60)
    for name, value in (("k", 2), ("m", 2), ("edit_steps", 4), ("caption_max_new_tokens", 24),
                        ("hypothesis_max_new_tokens", 24), ("intervention_max_new_tokens", 24)):
        workbench.form.set_value(name, value)
    shown = []
    workbench.sig_results_shown.connect(shown.append)
    run = workbench.run()
    run_until(app, lambda: not run.active, 900)
    run_until(app, lambda: bool(shown), 60)
    settle(app, 1.5)
    save(window, args.out / "workbench.png")

    # Report exporter: the stored result, selected.
    exporter = window.show_pane("report_exporter")
    run_until(app, lambda: bool(exporter.items), 60)
    exporter.table.selectRow(0)
    settle(app, 1.0)
    save(window, args.out / "report_exporter.png")

    # A counterfactual against its original. The tiny random MLLM writes no readable hypothesis, so its runs have
    # no counterfactual to compare; this one view is shot on a run with the test suite's scripted MLLM and PIL
    # editor (tests/core/methods/digits_world.py: test doubles, named as such in the session and in the README).
    sys.path.insert(0, str(ROOT / "tests" / "core" / "methods"))
    from digits_world import DigitsEditor, ScriptedDigitsMLLM

    window.session.put("mllm", "scripted-digits-mllm (test double)", ScriptedDigitsMLLM())
    window.session.put("editor", "digits-editor (PIL test double)", DigitsEditor())
    window.sig_models_changed.emit()
    browser = window.show_pane("dataset_browser")
    browser.grid.selectionModel().clear()
    browser.grid.setCurrentIndex(browser.grid_model.index(0, 0))
    browser.explain_selected()
    workbench = window.panes["workbench"]
    shown.clear()
    run = workbench.run()
    run_until(app, lambda: not run.active, 900)
    run_until(app, lambda: bool(shown), 60)
    settle(app, 1.0)
    column = workbench.result_view.columns[0]
    edited = [j for j, c in enumerate(column.bundle.result.candidates) if c.edited_artifact]
    dialog = column.open_compare(edited[0]) if edited else None
    if dialog is None:
        print("no counterfactual to compare; no compare.png", file=sys.stderr)
    else:
        dialog.resize(900, 620)
        settle(app, 1.0)
        save(dialog, args.out / "compare.png")
        dialog.close()

    window.close()
    window.jobs.shutdown(10_000)
    return 0


if __name__ == "__main__":
    sys.exit(main())

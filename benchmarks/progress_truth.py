"""Issue 43 §2: does the progress bar tell the truth on the demo's jobs? Runs them on the CPU, in this process, as
the app's model worker runs them (the demo's preparation, indexing its 360 digits, fitting a competency estimator,
competency-bench, a fix), records every progress report with its time, and prints per job: the seconds each stage
took, whether the bar reached 100 % before the job ended, and the time-left estimate the app shows (the GUI's own
`estimate_seconds_left` on the job's monotone fraction) against the real time left, as the ratio of the estimated
to the real whole-job time at each report once an estimate is shown (within 0.5..2 is the issue's bound).

    python benchmarks/progress_truth.py [--jobs demo,index,fit,bench,fix] [--home DIR] [--json out.json]

`--json` also writes each job's per-stage seconds, the figures tests/gui/test_progress_truth.py replays.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def record(fn):
    """Run fn(ctx); return (seconds, [(t, stage, done, total, overall)])."""
    from nemo_desktop.core.base.job_context import JobContext

    reports, t0 = [], time.perf_counter()
    ctx = JobContext(on_progress=lambda p: reports.append((time.perf_counter() - t0, p.stage, p.done, p.total,
                                                           p.overall_fraction)))
    fn(ctx)
    return time.perf_counter() - t0, reports


def judge(name: str, seconds: float, reports: list) -> dict:
    """What the app would show: the monotone fraction, 100 % before the end, the estimate's ratio."""
    from nemo_desktop.gui.jobs import estimate_seconds_left

    shown, first, ratios, early_full = None, None, [], []
    stages: dict[str, float] = {}
    last_t, last_stage = 0.0, None
    for t, stage, done, total, f in reports:
        key = re.sub(r"\s+\d+\s*/\s*\d+$", "", stage or "")  # "LGD: Generating 2/3" counts as one stage
        if last_stage is not None:
            stages[last_stage] = stages.get(last_stage, 0.0) + (t - last_t)
        last_t, last_stage = t, key
        if f is None:
            if shown is None:
                continue
            f = shown
        shown = max(shown or 0.0, min(1.0, f))
        if first is None:
            first = (t, shown)
        if shown >= 1.0 and seconds - t > max(0.5, 0.02 * seconds):
            early_full.append((round(t, 1), stage, done, total))
        left = estimate_seconds_left(first, (t, shown))
        if left is not None and seconds - t > 0.05 * seconds:
            ratios.append((t + left) / seconds)
    if last_stage is not None:
        stages[last_stage] = stages.get(last_stage, 0.0) + (seconds - last_t)
    out = {"job": name, "seconds": round(seconds, 2), "reports": len(reports),
           "stage_seconds": {k: round(v, 3) for k, v in stages.items()},
           "full_before_the_end": early_full[:3], "n_full_before_the_end": len(early_full),
           "estimate_ratio_min": round(min(ratios), 2) if ratios else None,
           "estimate_ratio_max": round(max(ratios), 2) if ratios else None, "n_estimates": len(ratios)}
    print(json.dumps(out, indent=1))
    out["timeline"] = [(round(t, 2), stage, done, total, None if f is None else round(f, 4))
                       for t, stage, done, total, f in reports]
    return out


def fix_folder(dataset: Path, out: Path, affected: str = "three") -> Path:
    """train/, affected/ and rest/ from the demo's digits: half of each class to train on, the other half held
    out, `affected`'s held-out images as the finding's."""
    import shutil

    for cls in sorted(p for p in dataset.iterdir() if p.is_dir()):
        files = sorted(cls.glob("*.png"))
        half = len(files) // 2
        for f in files[:half]:
            (out / "train" / cls.name).mkdir(parents=True, exist_ok=True)
            shutil.copy(f, out / "train" / cls.name / f.name)
        split = "affected" if cls.name == affected else "rest"
        for f in files[half:]:
            (out / split / cls.name).mkdir(parents=True, exist_ok=True)
            shutil.copy(f, out / split / cls.name / f.name)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", default="demo,index,fit,bench,fix")
    ap.add_argument("--home", default=None, help="NEMO_HOME (default: a new temporary folder)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    home = args.home or tempfile.mkdtemp(prefix="nemo-progress-")
    os.environ["NEMO_HOME"] = home
    from nemo_desktop.core.app.jobs.analyses import run_page_analysis
    from nemo_desktop.core.app.dataset_browser.browse_data import index_dataset_job
    from nemo_desktop.core.app.session import ModelSession
    from nemo_desktop.core.app.jobs.models import prepare_and_load_demo
    from nemo_desktop.core.store.paths import get_paths

    paths = get_paths()
    session = ModelSession(paths)
    jobs = args.jobs.split(",")
    results, setup = [], None
    print(f"NEMO_HOME {home}; torch threads {torch.get_num_threads()}; cpus {os.cpu_count()}")

    def demo(ctx):
        nonlocal setup
        setup = prepare_and_load_demo(session, paths, ctx)

    seconds, reports = record(demo)
    if "demo" in jobs:
        results.append(judge("demo", seconds, reports))
    dataset = str(setup.dataset_dir)
    if "index" in jobs:
        results.append(judge("index", *record(lambda ctx: index_dataset_job(session, dataset, 32, ctx))))
    fitted = None
    if "fit" in jobs or "bench" in jobs:
        secs, reps = record(lambda ctx: run_page_analysis(session, "competency-estimator", {}, {}, dataset, ctx))
        if "fit" in jobs:
            results.append(judge("competency-estimator", secs, reps))
        fitted = session.store().find(analysis="competency-estimator", limit=1) or \
            session.store().find(kind="competency-estimator", limit=1)
    if "bench" in jobs and fitted:
        session.store().clear(kind="competency-bench")  # measured, not read back from an earlier run
        results.append(judge("competency-bench", *record(lambda ctx: run_page_analysis(
            session, "competency-bench", {}, {"fitted": fitted[0].key}, dataset, ctx))))
    if "fix" in jobs:
        folder = Path(home) / "fix-folder"
        if not folder.is_dir():
            fix_folder(Path(dataset), folder)
        session.store().clear(kind="fix")
        results.append(judge("fix", *record(lambda ctx: run_page_analysis(
            session, "fix", {"data": "augment", "affected_classes": "three", "save": False}, {}, str(folder), ctx))))
    if args.json:
        Path(args.json).write_text(json.dumps({"home": home, "cpus": os.cpu_count(), "jobs": results}, indent=1))


if __name__ == "__main__":
    main()

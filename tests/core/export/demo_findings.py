"""The demo's findings, built once per test process with the product's own code: the first-run demo (real digits, the
real trained timm classifier) indexed, a competency estimator fitted and every image scored, a failure-modes run (a
tiny random CLIP as the joint space, through the real loader), a fix (head, one epoch, the demo's images split into
train / affected / rest), and one stored explanation of a misclassified image. Tests copy the store they need."""
from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

CLASSIFIER_SOURCE = "timm:local-dir:{}"


@dataclass(frozen=True)
class DemoFindings:
    store_dir: Path
    dataset_dir: Path
    classifier_dir: Path
    index_id: str
    classifier_id: str
    failure_modes_key: str
    fix_key: str
    competency_key: str
    explanation_key: str

    def open_store(self, into: Path):
        """A private copy of the store (tests may write to it)."""
        from nemo_desktop.core.store import ResultsStore

        copy = shutil.copytree(self.store_dir, into)
        return ResultsStore.open(db_path=copy / "results.sqlite", artifacts_dir=copy / "artifacts")

    def classifier(self):
        from nemo_desktop.core.models.catalog import resolve_model_ref
        from nemo_desktop.core.models.families import LoadOptions, load_model

        return load_model(resolve_model_ref(CLASSIFIER_SOURCE.format(self.classifier_dir), "classifier"),
                          LoadOptions(device="cpu"))


def _sentences(path: Path) -> Path:
    items = [{"text": f"a handwritten {w} on a black background"} for w in
             ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")]
    items += [{"text": "a thick stroke"}, {"text": "a thin stroke"}, {"text": "a slanted digit"}]
    path.write_text(json.dumps({"name": "demo", "version": 1, "sentences": items}))
    return path


def _explanation(store, clf, index) -> str:
    """One explanation of a misclassified image, stored as the explanation methods store theirs."""
    from nemo_desktop.core.methods.intervention import model_manifest
    from nemo_desktop.core.base.records import Candidate, ExplanationResult, SampleInfo
    from nemo_desktop.core.store.keys import result_key

    e = index.entries
    row = int(next(i for i in range(len(e)) if not e.correct[i]))
    names = index.class_names
    sample = SampleInfo(str(e.paths[row]), str(e.sha256[row]), int(e.labels[row]), names[int(e.labels[row])],
                        int(e.preds[row]), names[int(e.preds[row])], float(e.prob_label[row]),
                        float(e.prob_pred[row]))
    cand = Candidate("the stroke is broken", "image", "close the gap in the stroke", cei=42.0,
                     edit_verdict="local")
    res = ExplanationResult("scitx", sample, explanation="the stroke is broken", selected_index=0, cei=42.0,
                            candidates=[cand], manifest={"models": {"classifier": model_manifest(clf.info)}})
    key = result_key("explanation", image=sample.image_sha256, test="demo-findings")
    res.result_key = key
    store.put(key, "explanation", res.to_dict())
    return key


def _fix(store, clf, index) -> str:
    from nemo_desktop.core.analyses.fix import FixData
    from nemo_desktop.core.base.images import load_image
    from nemo_desktop.core.registry import Components, build_analysis

    e = index.entries
    order = sorted(range(len(e)), key=lambda i: str(e.paths[i]))
    train_rows, held = order[::3], [r for i, r in enumerate(order) if i % 3]
    item = lambda r: (load_image(str(e.paths[r])), int(e.labels[r]))  # noqa: E731
    data = FixData(list(index.class_names), [item(r) for r in train_rows],
                   [item(r) for r in held if not e.correct[r]], [item(r) for r in held if e.correct[r]],
                   description={"test": "demo findings"})
    fix = build_analysis("fix", Components(classifier=clf, store=store),
                         {"data": "none", "mode": "full", "epochs": 3, "bootstrap": 100, "save": False,
                          "average_epochs": 1.0, "preserve": 0.0})
    return fix(data).result_key


@lru_cache(maxsize=1)
def demo_findings() -> DemoFindings:
    import torch

    from demo_cache import built_demo
    from fixtures_tiny.classifiers import build_tiny_clip
    from fixtures_tiny.competency_world import TINY
    from nemo_desktop.core.analyses.failure_modes import FailureModesConfig, FailureModesPipeline
    from nemo_desktop.core.data.reference_index import build_index
    from nemo_desktop.core.models.catalog import resolve_model_ref
    from nemo_desktop.core.models.families import LoadOptions, load_model
    from nemo_desktop.core.registry import Components, build_analysis
    from nemo_desktop.core.store import ResultsStore

    torch.set_num_threads(1)
    dataset_dir, classifier_dir, _ = built_demo()
    root = Path(tempfile.mkdtemp(prefix="nemo-demo-findings-"))
    store_dir = root / "store"
    with ResultsStore.open(db_path=store_dir / "results.sqlite", artifacts_dir=store_dir / "artifacts") as store:
        clf = load_model(resolve_model_ref(CLASSIFIER_SOURCE.format(classifier_dir), "classifier"),
                         LoadOptions(device="cpu"))
        index = build_index(dataset_dir, clf, store)
        fit = build_analysis("competency-estimator", Components(classifier=clf, store=store), {**TINY, "epochs": 2})
        fitted = fit(dataset_dir)
        scores = build_analysis("competency-score", Components(classifier=clf, fitted=fitted.key, store=store))
        competency_key = scores(dataset_dir).key
        clip = load_model(resolve_model_ref(f"hf-clip:{build_tiny_clip(root / 'clip')}", "classifier"),
                          LoadOptions(device="cpu"))
        cfg = FailureModesConfig(clusters=4, tau=None, split="correctness",
                                 sentence_sets=(str(_sentences(root / "sentences.json")),))
        modes = FailureModesPipeline(clf, clip, store, cfg)(index)
        fix_key = _fix(store, clf, index)
        explanation_key = _explanation(store, clf, index)
        return DemoFindings(store_dir, dataset_dir, classifier_dir, index.index_id, index.classifier_id,
                            modes.result_key, fix_key, competency_key, explanation_key)

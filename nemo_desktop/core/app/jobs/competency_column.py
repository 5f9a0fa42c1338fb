"""The dataset browser's competency column (Qt-free: jobs).

When the results store holds a competency estimator fitted for the loaded classifier, every image of the open
dataset can be scored through the `competency-score` analysis (built by the registry's one construction path,
stored under its key, so a second showing is read back, never recomputed). The column maps those scores onto
the browser's rows by path, so it survives re-showing the dataset after indexing.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from nemo_desktop.core.analyses.competency.results import low_part
from nemo_desktop.core.base.job_context import JobContext

SCORE_ANALYSIS = "competency-score"
ESTIMATOR_ANALYSIS = "competency-estimator"


@dataclass
class CompetencyColumn:
    """Competency and its parts per image path, from one stored competency-score result."""

    estimator_key: str
    result_key: str | None
    threshold: float
    scores: dict[str, tuple[float, float, float]]  # path -> (competency, confidence, P(in-distribution))
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.scores)

    def low_text(self) -> str:
        """How many scored images are below the threshold and which part is low, counted as every other output
        counts them (core results.low_part)."""
        parts = [low_part({"competency": c, "confidence": f, "id_probability": p}, self.threshold)
                 for c, f, p in self.scores.values()]
        low = len(parts) - parts.count("competent")
        if not low:
            return f"none below {self.threshold:g}"
        return (f"{low:,} below {self.threshold:g} (unsure {sum(p in ('unsure', 'both') for p in parts):,}, "
                f"unfamiliar {sum(p in ('unfamiliar', 'both') for p in parts):,}, both {parts.count('both'):,}, "
                f"neither part alone {parts.count('product'):,})")

    def arrays(self, paths: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(competency, confidence, P(ID)) aligned with `paths`, float32, NaN where an image was not scored."""
        out = np.full((3, len(paths)), np.nan, np.float32)
        for i, p in enumerate(paths.tolist()):
            s = self.scores.get(p)
            if s is not None:
                out[:, i] = s
        return out[0], out[1], out[2]

    @classmethod
    def from_score_set(cls, estimator_key: str, result: Any) -> "CompetencyColumn":
        return cls(estimator_key, result.key, float(result.threshold),
                   {i.path: (i.score.competency, i.score.confidence, i.score.id_probability) for i in result.items},
                   dict(result.failed))


def estimators_for(store, classifier: Any) -> list[tuple[str, str]]:
    """(store key, label) of the stored competency estimators fitted for `classifier` (same id, revision and
    class names), newest first; empty without a classifier."""
    if classifier is None:
        return []
    return estimators_matching(store, classifier.info.model_id, classifier.info.revision, classifier.class_names)


def estimators_matching(store, model_id: str | None, revision: str | None, class_names) -> list[tuple[str, str]]:
    """estimators_for by the classifier's facts (the window holds no model in worker mode)."""
    out = []
    for r in store.find(kind=ESTIMATOR_ANALYSIS, limit=200):
        manifest = r.payload.get("manifest") or {}
        want = manifest.get("classifier") or {}
        if (want.get("id"), want.get("revision")) != (model_id, revision) or \
                list(manifest.get("class_names", [])) != list(class_names or []):
            continue
        n = (manifest.get("dataset") or {}).get("n_images")
        out.append((r.key, f"{r.key[:10]} ({datetime.fromtimestamp(r.created_at):%Y-%m-%d %H:%M}"
                           + (f", fitted on {n:,} images)" if n else ")")))
    return out


def find_estimators(session) -> list[tuple[str, str]]:
    """The stored estimators of the classifier in memory (none is loaded for this: the column is offered for the
    classifier the user has loaded), from the session's facts of it: in worker mode the model is in the worker."""
    facts = session.facts("classifier")
    if facts is None:
        return []
    return estimators_matching(session.store(), facts.get("model_id"), facts.get("revision"),
                               facts.get("class_names"))


def _score_analysis(session, estimator_key: str, threshold: float):
    from nemo_desktop.core.registry import Components, build_analysis

    classifier = session.get("classifier")
    if classifier is None:
        from nemo_desktop.core.base.errors import ConfigError

        raise ConfigError("Load the classifier the competency estimator was fitted for first.",
                          hint="Model manager: load it, then score again.")
    return build_analysis(SCORE_ANALYSIS, Components(classifier=classifier, fitted=estimator_key,
                                                     store=session.store()), {"threshold": threshold})


def stored_column(session, estimator_key: str, paths: list[str], threshold: float,
                  ctx: JobContext) -> CompetencyColumn | None:
    """The column when these images were scored with this estimator before; None otherwise (nothing scored).
    A model job (JobSpec): the estimator is bound to the classifier, which only the model worker holds there."""
    ctx.progress("Looking for stored competency scores", 0, None)
    result = _score_analysis(session, estimator_key, threshold).stored(list(paths))
    return None if result is None else CompetencyColumn.from_score_set(estimator_key, result)


def score_column(session, estimator_key: str, paths: list[str], threshold: float,
                 ctx: JobContext) -> CompetencyColumn:
    """Score every image (GPU lane; progress per batch, cancel between batches) and store the result."""
    result = _score_analysis(session, estimator_key, threshold)(list(paths), ctx)
    return CompetencyColumn.from_score_set(estimator_key, result)

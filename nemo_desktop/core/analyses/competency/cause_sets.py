"""Test sets of the seed's low-competency causes, made from the user's own images, to probe their model.

    rows = write_cause_sets(estimator, paths, ("noise", "contrast"), out_dir, threshold=0.9, ctx=ctx)

Only images on which the classifier is competent are modified (so the modification is what lowers it). For
each cause the automated factor search (causes.find_low_competency) keeps, per image, the first factor whose
result scores below the threshold. Written: `<out>/<cause>/<source stem>_<factor>.png` and `<out>/causes.csv`
(source, cause, factor, competency before and after, file), each file atomically. "spatial" (unfamiliar
content) is not a modification: it is images of content the model never saw, so it is not generated here.
"""
from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ...base.errors import ConfigError
from ...base.job_context import JobContext, null_context
from .causes import CAUSES, DEFAULT_FACTORS, find_low_competency

MODIFICATIONS = tuple(c for c in CAUSES if c != "spatial")


@dataclass
class CauseImage:
    source: str
    cause: str
    factor: float
    competency_before: float
    competency_after: float
    file: str


def write_cause_sets(estimator: Any, images: Sequence[str | os.PathLike], causes: Sequence[str],
                     out_dir: str | os.PathLike, *, threshold: float = 0.9, max_images: int | None = None,
                     seed: int = 0, ctx: JobContext | None = None) -> tuple[list[CauseImage], int]:
    """(the images written, how many source images were competent and so modified)."""
    from ...base.images import load_image
    from ...store import atomic_write_bytes, atomic_write_text

    ctx = ctx or null_context()
    bad = [c for c in causes if c not in MODIFICATIONS]
    if bad:
        raise ConfigError(f"Unknown or non-generated cause(s): {', '.join(bad)}.",
                          hint=f"Choose from {', '.join(MODIFICATIONS)} ('spatial' means images of unseen content: "
                               "collect those instead).")
    out = Path(out_dir).expanduser()
    before = estimator.score(list(images), ctx.sub("Scoring the originals", 0.0, 0.2))
    competent = [(Path(p), s.competency) for p, s in zip(images, before) if s.competency >= threshold]
    if max_images is not None:
        competent = competent[:max_images]
    if not competent:
        raise ConfigError(f"The classifier is competent (>= {threshold}) on none of the {len(images)} images, so "
                          "there is nothing to modify.", hint="Give images of its training distribution.")
    originals = [load_image(p) for p, _ in competent]

    def rho(batch):
        return [s.competency for s in estimator.scores_from_tensor(estimator.unit(batch))]

    rows: list[CauseImage] = []
    for k, cause in enumerate(causes):
        ctx.check_cancelled()
        ctx.progress(f"Searching {cause} factors", k, len(causes))
        for i, factor, image in find_low_competency(originals, cause, rho, threshold, DEFAULT_FACTORS[cause], seed):
            src, rho0 = competent[i]
            target = out / cause / f"{src.stem}_{factor:g}.png"
            buf = io.BytesIO()
            image.save(buf, "PNG")
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(target, buf.getvalue())
            rows.append(CauseImage(str(src), cause, float(factor), float(rho0), float(rho([image])[0]), str(target)))
    ctx.progress("Searching factors", len(causes), len(causes))
    text = io.StringIO()
    w = csv.writer(text)
    w.writerow(["source", "cause", "factor", "competency_before", "competency_after", "file"])
    for r in rows:
        w.writerow([r.source, r.cause, r.factor, f"{r.competency_before:.6f}", f"{r.competency_after:.6f}", r.file])
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "causes.csv", text.getvalue())
    return rows, len(competent)

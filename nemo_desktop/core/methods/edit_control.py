"""The reference control of an edit (issue 45): does the edit test its hypothesis, or would it raise the true
class on any image?

A counterfactual edit is evidence for its hypothesis when it removes the hypothesised cue and nothing else. The
structure measure (metrics/edit_structure.py) judges that from pixels, with thresholds that depend on the kind
of picture. The control judges it from the classifier instead: the same instruction (same editor, seed and
working size) is applied to R correctly classified reference images of OTHER classes (neither the true nor the
predicted class; drawn at random with the run's seed, like SciTX's Set C), and the largest rise of P(true) among
them is the *control effect* (points, like CEI; the largest, not the mean: an edit that turns even one unrelated
image into the true class is not specific to the query, and on the development half the mean of two let an
overlaid drawing of the true class pass where one reference rose by 9 points and the other by 0). Removing a cue
that a reference does not have changes nothing there; painting the true class in, replacing the picture by an
exemplar of it, noise or a blank frame raises P(true) on any image, as it did on the query.

Why not references of the predicted class (Set B), as the issue first proposed: where the classifier knows the
predicted class by the cue (the shortcut the explanation is about), removing the cue from those references
legitimately sends them elsewhere, often to the query's true class, since the nearest ones look like the query.
On the development half of the benchmark's worlds the legitimate edits raised P(true) on Set B references by up
to 84 points (digit occlusion) and 72-88 (photo deblurring), as much as bad edits did; on references of other
classes by at most 0.7 (docs/benchmarks/edit_evidence.md).

The rule is relative to the query's CEI, not a threshold on the control alone: where the true class has a cue of
its own (tests/core/methods/digits_world.py: every "three" is red), "recolour the digit red" raises P(three) on
other digits a little too (+2.1 points against +98.9 on the query). An edit passes when

    specific effect = CEI - max(control effect, 0)  >  noise floor           (it did more here than elsewhere)
    and control effect  <=  max(noise floor, CONTROL_MAX_SHARE x CEI)       (little of it comes back elsewhere)

A control effect within the noise floor never fails an edit (a round trip moves P(true) that much anywhere).
CONTROL_MAX_SHARE was chosen on the development half only: legitimate edits' control/CEI at most 0.01 there,
bad edits' (noise, paste, replace) at least 0.18; 0.1 lies between with a margin on each side. How the control
combines with the structure verdict: methods/edit_check.py (`_by_evidence_with_control`).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

from PIL import Image

from ..base.errors import JobCancelled, NemoError
from ..base.job_context import JobContext
from .intervention import CounterfactualTester, UnitCache, error_text, image_hash
from ..base.records import Candidate, Observation, SampleInfo

DEFAULT_CONTROL_REFERENCES = 2
# Beyond the noise floor, at most this share of the query's CEI may come back on the references (chosen on the
# development half; see the module docstring).
CONTROL_MAX_SHARE = 0.1


@dataclass
class ControlReading:
    """What the control measured for one candidate (`Candidate.edit_control` holds `as_dict()`)."""

    ran: bool
    passed: bool | None = None  # None: the control did not run (see `why_not`)
    query_cei: float | None = None
    control_effect: float | None = None  # the largest rise of P(true) among the references, points
    n_refs: int = 0
    rises: list[float] = field(default_factory=list)  # per reference, points
    why_not: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def specific_effect(self) -> float | None:
        if self.query_cei is None or self.control_effect is None:
            return None
        return self.query_cei - max(self.control_effect, 0.0)


def control_passes(query_cei: float, control_effect: float, floor: float, share: float | None = None) -> bool:
    """The rule in the module docstring: the edit's specific effect beyond the noise floor, and the control at
    most `share` (default CONTROL_MAX_SHARE) of the query's CEI."""
    share = CONTROL_MAX_SHARE if share is None else share
    specific = query_cei - max(control_effect, 0.0)
    return specific > floor and control_effect <= max(floor, share * query_cei)


def describe_control(r: ControlReading, floor: float, share: float | None = None) -> str:
    """The control's figures and outcome in words, for the verdict reason."""
    share = CONTROL_MAX_SHARE if share is None else share
    if not r.ran:
        return f"reference control not run ({r.why_not})"
    refs = f"{r.n_refs} reference{'s' if r.n_refs != 1 else ''} of other classes"
    figures = (f"reference control: the same edit raised P(true) by at most {r.control_effect:+.1f} points on {refs}, "
               f"{r.query_cei:+.1f} on this image (specific effect {r.specific_effect:+.1f})")
    if r.passed:
        return (f"{figures}: beyond the noise floor of {floor:g}, and the control within the floor or at most "
                f"{share:.2f} of the CEI -> tests the hypothesis")
    why = []
    if r.specific_effect is not None and not r.specific_effect > floor:
        why.append(f"specific effect not beyond the noise floor of {floor:g}")
    if r.control_effect is not None and r.query_cei is not None and \
            r.control_effect > max(floor, share * r.query_cei):
        why.append(f"control beyond the floor and above {share:.2f} of the CEI")
    return f"{figures}: {' and '.join(why) or 'failed'} -> the edit raises the true class on other images too"


class ReferenceControl:
    """Runs the control lazily, one candidate at a time (`__call__`), for the selection rule
    (edit_check.select). Reference images and their classifications are loaded once per query; every edit and
    classification is a cached unit (the edit unit key is the one the query's edits use)."""

    def __init__(self, ctx: JobContext, units: UnitCache, tester: CounterfactualTester, clf: dict,
                 sample: SampleInfo, references: Sequence[Observation], n: int,
                 load: Callable[[Observation], Image.Image], floor: float,
                 why_off: str | None = None) -> None:
        self.ctx, self.units, self.tester, self.clf, self.sample = ctx, units, tester, clf, sample
        self.floor = floor
        self.n = int(n)
        self.load = load
        self.why_off = why_off
        self.transient = False  # an edit or a classification raised: the result is incomplete
        self.notes: list[str] = []
        self._refs: list[tuple[Image.Image, str, float]] | None = None
        self._pending = [o for o in references if o.label_index not in (sample.true_index, sample.pred_index)]
        self._pending = self._pending[:self.n] if self.n > 0 else []
        if why_off is None and self.n <= 0:
            self.why_off = "off: edit_control_references is 0"
        elif why_off is None and not self._pending:
            self.why_off = "no correctly classified reference of another class"

    @property
    def available(self) -> bool:
        return self.why_off is None

    def not_run(self, why: str) -> ControlReading:
        return ControlReading(ran=False, why_not=why)

    def _references(self) -> list[tuple[Image.Image, str, float]]:
        """(image, sha, P(true)) of each usable reference; a reference the classifier does not get right (the
        index may predate a change) or that cannot be read is left out with a note."""
        if self._refs is not None:
            return self._refs
        y = self.sample.true_index
        refs = []
        for obs in self._pending:
            self.ctx.check_cancelled()
            try:
                img = self.load(obs)
            except NemoError as exc:
                self.notes.append(f"Reference control: {obs.image_path} could not be read: {exc.message}")
                continue
            sha = image_hash(img)
            probs = self.tester.classify(self.units, img, sha, self.clf)
            if int(probs.argmax()) != obs.label_index:
                self.notes.append(f"Reference control: {obs.image_path} is not classified as "
                                  f"'{obs.label_name}' by this classifier; left out.")
                continue
            refs.append((img, sha, float(probs[y])))
        self._refs = refs
        if not refs:
            self.why_off = "no usable reference of another class"
        return refs

    def __call__(self, j: int, cand: Candidate) -> ControlReading:
        """The control of candidate `j` (an image intervention with a CEI)."""
        if not self.available:
            return self.not_run(self.why_off or "")
        refs = self._references()
        if not refs:
            return self.not_run(self.why_off or "")
        y = self.sample.true_index
        rises = []
        for i, (img, sha, before) in enumerate(refs):
            stage = f"Reference control {i + 1}/{len(refs)} of hypothesis {j + 1}"
            try:
                out = self.tester.edit_one(self.ctx, self.units, img, sha, cand.intervention or "", stage)
                after = float(self.tester.classify(self.units, out, image_hash(out), self.clf)[y])
            except JobCancelled:
                raise
            except Exception as exc:  # noqa: BLE001 - the control cannot run; the structure verdict stands
                self.transient = True
                return self.not_run(f"editing a reference failed: {error_text(exc)}")
            rises.append(100.0 * (after - before))
        effect = max(rises)
        return ControlReading(ran=True, passed=control_passes(cand.cei, effect, self.floor),
                              query_cei=cand.cei, control_effect=effect, n_refs=len(rises), rises=rises)

    def record(self) -> dict[str, Any]:
        """The manifest's record of the control's settings."""
        return {"references": self.n, "rule": {"specific_effect_above": "cei_noise_floor",
                                               "control_max_share_of_cei": CONTROL_MAX_SHARE},
                "ran": self.available, "why_not": self.why_off}

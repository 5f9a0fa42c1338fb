"""The semantic check of an edit by the MLLM (issue 45, optional: SciTX's `edit_semantic_check`, off by default).

The structure measure (metrics/edit_structure.py) and the reference control (edit_control.py) judge an edit from
pixels and from the classifier. Neither sees what the edit *is*: a drawing of the true class pasted into the
picture, another exemplar in place of the object, noise, or an edit that changed something other than the cue
the hypothesis names. The pipeline's MLLM can: it gets the ORIGINAL and the EDITED image with the hypothesis and
the instruction (resources/prompts/scitx_edit_semantic.v1.txt) and answers in JSON whether the cue was changed,
whether the scene is otherwise the same, a verdict (one of `VERDICTS`) and a one-sentence reason.

How it combines with the other tests (methods/edit_check.py, `_by_evidence_with_control`): it runs lazily, only
for a candidate the selection reaches and the other tests already accept (the control passed, or where it did
not run the structure kept the picture), and it can only make that edit invalid: "cue-not-changed",
"true-class-painted-in", "object-replaced" and "picture-destroyed" veto it and the next candidate is tried. It
never rescues an edit a failed control, a destroyed structure or "no change" ruled out. An answer that cannot be
read (no JSON after one repair turn, a verdict not in the list, a "tests-the-hypothesis" that says the cue was not
changed or the scene not kept) or a failed call means "semantic check not run (why)": the other tests decide, and
the verdict's reason says so. It is never a silent pass or fail.

Why off by default: it costs one MLLM call per checked candidate, and it needs an MLLM that looks at images; the
project's benchmarks run a scripted MLLM double that cannot. Off, it is left out of the result's key.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Mapping

from PIL import Image

from ..base.errors import JobCancelled
from ..base.job_context import JobContext
from ..base.records import Candidate, SampleInfo
from ..models.protocols import ChatMessage
from .intervention import UnitCache, error_text, image_hash, model_part, raw_replies, sha_text, unit_key
from .json_ask import ask_json
from .prompts import PromptTemplate, load_prompt

PROMPT_NAME = "scitx_edit_semantic"
MAX_NEW_TOKENS = 256  # the answer is four short fields; a cut reply is asked again once with twice this
REASON_MAX_CHARS = 200  # the MLLM's reason as kept in the verdict's words
VALID = "tests-the-hypothesis"
# Each verdict the prompt offers, in words for the verdict's reason; all but VALID veto the edit.
VERDICTS = {
    VALID: "the edit changed what the hypothesis names and kept the picture",
    "cue-not-changed": "the edit did not change what the hypothesis names",
    "true-class-painted-in": "the true class was painted or pasted in",
    "object-replaced": "the object was replaced by another exemplar",
    "picture-destroyed": "the picture was replaced or destroyed",
}


@dataclass
class SemanticReading:
    """What the MLLM said about one candidate's edit (`Candidate.edit_semantic` holds `as_dict()`)."""

    ran: bool
    valid: bool | None = None  # None: not run (see `why_not`)
    verdict: str | None = None  # one of VERDICTS
    cue_changed: bool | None = None
    same_scene: bool | None = None
    reason: str | None = None  # the MLLM's one sentence, cleaned and clipped (model text: reports escape it)
    why_not: str | None = None
    raw_reply: str | None = None  # the reply (and the repair turn's) for auditing

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _clean(text: Any, limit: int = REASON_MAX_CHARS) -> str:
    """Model text for one line of words: no control characters, whitespace collapsed, clipped."""
    s = " ".join("".join(ch if ch.isprintable() else " " for ch in str(text or "")).split())
    return s if len(s) <= limit else s[:limit - 1].rstrip() + "…"


def _norm(key: Any) -> str:
    return re.sub(r"[^a-z0-9]+", "", str(key).lower())


def _flag(value: Any) -> bool | None:
    """true/false as JSON, or the words yes/no/true/false; None when neither."""
    if isinstance(value, bool):
        return value
    word = _norm(value)
    return True if word in ("true", "yes") else False if word in ("false", "no") else None


def read_answer(outcome: Mapping[str, Any]) -> SemanticReading:
    """The reading of an `ask_json` outcome for the field "verdict": ran with its verdict, or not run and why."""
    raw = raw_replies(outcome)
    if outcome.get("error"):
        return SemanticReading(ran=False, why_not=f"the MLLM's answer could not be read: {outcome['error']}",
                               raw_reply=raw)
    verdict = re.sub(r"[^a-z0-9]+", "-", str(outcome.get("value") or "").lower()).strip("-")
    if verdict not in VERDICTS:
        return SemanticReading(ran=False, raw_reply=raw, why_not=f"the MLLM's verdict '{_clean(verdict, 60)}' is "
                               f"not one of {', '.join(VERDICTS)}")
    fields = {_norm(k): v for k, v in (outcome.get("parsed") or {}).items()}
    cue, same = _flag(fields.get("cuechanged")), _flag(fields.get("samescene"))
    if cue is None or same is None:
        return SemanticReading(ran=False, raw_reply=raw, why_not="the MLLM's answer lacks a true/false "
                               "cue_changed or same_scene")
    if verdict == VALID and not (cue and same):
        return SemanticReading(ran=False, raw_reply=raw, why_not=f"the MLLM's answer contradicts itself: verdict "
                               f"{verdict} with cue_changed {str(cue).lower()} and same_scene {str(same).lower()}")
    return SemanticReading(ran=True, valid=verdict == VALID, verdict=verdict, cue_changed=cue, same_scene=same,
                           reason=_clean(fields.get("reason")), raw_reply=raw)


def describe_semantic(r: SemanticReading | Mapping[str, Any]) -> str:
    """The check's outcome in words, for the verdict's reason."""
    r = r if isinstance(r, SemanticReading) else SemanticReading(**r)
    if not r.ran:
        return f"semantic check not run ({r.why_not})"
    said = f' ("{r.reason}")' if r.reason else " (no reason given)"
    outcome = "tests the hypothesis" if r.valid else "does not test the hypothesis"
    return f"semantic check by the MLLM: {VERDICTS[r.verdict]}{said} -> {outcome}"


def with_semantic(reason: str | None, r: SemanticReading) -> str:
    """The verdict's reason with the semantic check first when it vetoed the edit, after the other tests' words
    otherwise."""
    before = reason or "structure not measured"
    words = describe_semantic(r)
    if r.ran and r.valid is False:
        return f"{words}, overruling the {before}"
    return f"{before}; {words}"


def vetoed(c: Candidate) -> bool:
    """Whether the semantic check ran on `c` and found that its edit does not test the hypothesis."""
    s = c.edit_semantic or {}
    return bool(s.get("ran")) and s.get("valid") is False


class SemanticCheck:
    """Asks the MLLM about one candidate's edit at a time (`passes`, called by edit_check's selection). Every
    answer is a cached unit; a call that raises is not cached and marks the result incomplete (`transient`)."""

    def __init__(self, ctx: JobContext, units: UnitCache, mllm: Any, repair: PromptTemplate, image: Image.Image,
                 image_sha: str, edited: Mapping[int, Image.Image], sample: SampleInfo,
                 prompt: PromptTemplate | None = None, noun: str = "hypothesis") -> None:
        self.ctx, self.units, self.mllm, self.repair = ctx, units, mllm, repair
        self.image, self.image_sha, self.edited, self.sample = image, image_sha, edited, sample
        self.prompt = prompt or load_prompt(PROMPT_NAME)
        self.noun = noun
        self.transient = False
        self.notes: list[str] = []

    def __call__(self, j: int, cand: Candidate) -> SemanticReading:
        out = self.edited.get(j)
        if out is None or cand.intervention_kind not in (None, "image"):
            return SemanticReading(ran=False, why_not="no edited image")
        text = self.prompt.render(true_label=self.sample.true_name, prediction=self.sample.pred_name,
                                  hypothesis=cand.hypothesis or "", instruction=cand.intervention or "")
        key = unit_key("edit_semantic", image_sha256=self.image_sha, edited_sha256=image_hash(out),
                       prompt_sha256=sha_text(text), mllm=model_part(self.mllm.info),
                       prompt_version=self.prompt.version, max_new_tokens=MAX_NEW_TOKENS)
        hit = self.units.get(key)
        if hit is not None:
            return SemanticReading(**hit.payload["reading"])
        self.ctx.check_cancelled()
        stage = f"Semantic check of {self.noun} {j + 1}"
        self.ctx.progress(stage, 0, 1)
        try:
            outcome = ask_json(self.mllm, self.repair, [ChatMessage.user(self.image, out, text)], "verdict",
                               MAX_NEW_TOKENS, temperature=0.0, seed=None)
        except JobCancelled:
            raise
        except Exception as exc:  # noqa: BLE001 - the check cannot run; the other tests decide, a re-run retries
            self.transient = True
            return SemanticReading(ran=False, why_not=f"the MLLM failed: {error_text(exc)}")
        reading = read_answer(outcome)
        self.units.put(key, "edit_semantic", {"reading": reading.as_dict(), "prompt_version": self.prompt.version,
                                              "mllm": model_part(self.mllm.info)})
        self.ctx.progress(stage, 1, 1)
        return reading

    def passes(self, j: int, cand: Candidate) -> bool:
        """Run the check on candidate `j` (which the other tests accept), keep the answer on it and in its
        verdict's reason; False only when the MLLM vetoed the edit."""
        reading = self(j, cand)
        cand.edit_semantic = reading.as_dict()
        cand.edit_verdict_reason = with_semantic(cand.edit_verdict_reason, reading)
        n = f"{self.noun.capitalize()} #{j + 1}"
        if reading.ran and not reading.valid:
            said = f' ("{reading.reason}")' if reading.reason else ""
            self.notes.append(f"{n} (CEI {cand.cei:+.1f}) passed the other tests, but the MLLM's semantic check of "
                              f"its edited image says {VERDICTS[reading.verdict]}{said}: it does not test its "
                              f"{self.noun} and is not selected.")
        elif not reading.ran:
            self.notes.append(f"The semantic check of {self.noun} #{j + 1}'s edit did not run "
                              f"({reading.why_not}); the other tests decided.")
        return not vetoed(cand)

    def record(self, candidates: list[Candidate]) -> dict[str, Any]:
        """The manifest's record (under `edit_check`): settings, which candidates it ran on, each answer."""
        return {"enabled": True, "prompt": self.prompt.version, "mllm": model_part(self.mllm.info),
                "max_new_tokens": MAX_NEW_TOKENS,
                "ran": [j for j, c in enumerate(candidates) if (c.edit_semantic or {}).get("ran")],
                "vetoed": [j for j, c in enumerate(candidates) if vetoed(c)],
                "readings": [c.edit_semantic for c in candidates]}


OFF_RECORD = {"enabled": False, "why_not": "off: edit_semantic_check is false"}

"""An MLLM test double that answers SciTX's semantic check of an edit (methods/edit_semantic.py); test code,
never shipped. It does not reason: it compares the ink colour of the two images it is shown (digits_world's
`dominant_ink`) with what the hypothesis names. An edit that changed the ink although the hypothesis does not
name the ink has painted the true class's cue in (in the digits world every "three" is red); an edit that changed
what the hypothesis names is a test of it. Every other prompt is answered by ScriptedDigitsMLLM."""
from __future__ import annotations

import json
import re

from PIL import Image

from digits_world import ScriptedDigitsMLLM, dominant_ink
from nemo_desktop.core.models.protocols import ModelInfo


class SemanticDigitsMLLM(ScriptedDigitsMLLM):
    """`mode`: "judge" (the rule above), "garbage" (an answer with no JSON, also to the repair turn), "raise" (the
    endpoint is down) or "hostile" (the judge's answer with markup in its reason)."""

    def __init__(self, mode: str = "judge") -> None:
        super().__init__()
        self.mode = mode
        self.info = ModelInfo(f"test-double:semantic-digits-mllm-{mode}", "test-double", "1")  # one per behaviour
        self.semantic_calls = 0

    def chat(self, messages, *, max_new_tokens=512, temperature=0.0, seed=None, **sampling):
        parts = [p for m in messages for p in m.content]
        text = "\n".join(p for p in parts if isinstance(p, str))
        if '"cue_changed"' not in text:
            return super().chat(messages, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed)
        self.semantic_calls += 1
        if self.mode == "raise":
            raise ConnectionError("endpoint unreachable")
        if self.mode == "garbage":
            return "The second picture looks nicer."
        original, edited = [p for p in parts if isinstance(p, Image.Image)][:2]
        hypothesis = re.search(r"Hypothesis for Misclassification:\*\* (.*)", text).group(1)
        before, after = dominant_ink(original), dominant_ink(edited)
        names_ink = "ink" in hypothesis or "colour" in hypothesis
        if before != after and not names_ink:
            answer = {"cue_changed": False, "same_scene": True, "verdict": "true-class-painted-in",
                      "reason": f"The digit was recoloured from {before} to {after}; the hypothesis is about its "
                                "strokes."}
        else:
            answer = {"cue_changed": True, "same_scene": True, "verdict": "tests-the-hypothesis",
                      "reason": f"The ink changed from {before} to {after}, as the hypothesis names; the digit is "
                                "the same." if before != after else "The named change was made; the digit is the same."}
        if self.mode == "hostile":
            answer["reason"] = "<script>alert(1)</script> pasted\x1b[31m in"
        return "```json\n" + json.dumps(answer) + "\n```"

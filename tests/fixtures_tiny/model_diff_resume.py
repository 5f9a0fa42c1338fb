"""A model-difference run that a test can kill with SIGKILL in the middle of an LLM call, and the same run
uninterrupted, for the kill-and-resume test (test code, never shipped).

The classifiers are nearest-centroid rules over the shipped glyphs (A on grey levels, B on the red channel),
so both processes build bit-identical models, hence identical store keys, without training. Every completed
LLM request is appended to a JSON-lines log (role, sha256 of the prompt, seed) before it returns.

    python -m fixtures_tiny.model_diff_resume DB LOG HANG_AT   # the HANG_AT-th explainer call prints HANGING
                                                               # and sleeps until killed
"""
from __future__ import annotations

import hashlib
import json
import sys
import time

import numpy as np

from nemo_desktop.core.models.protocols import ModelInfo

CONFIG = {"samples_per_condition": 4, "initial_conditions": 4, "iterations": 3, "explore_size": 4,
          "beam_size": 2, "test_conditions": 40, "seed": 0}


class CentroidClassifier:
    zero_shot = False

    def __init__(self, channel: str):
        from PIL import Image

        from nemo_desktop.core.analyses.model_diff.synthetic_digits import glyph_pool

        self.channel, self._image = channel, Image
        images, labels = glyph_pool("train")
        self.centroids = np.stack([images[labels == d].reshape(-1, 64).mean(0) / 16.0 for d in range(10)])
        self.class_names = [str(d) for d in range(10)]
        digest = hashlib.sha256(self.centroids.tobytes() + channel.encode()).hexdigest()[:16]
        self.info = ModelInfo(f"test-double:centroid-{channel}", "test-double", digest)

    def _features(self, images):
        rows = []
        for im in images:
            band = im.convert("L") if self.channel == "grey" else im.convert("RGB").getchannel("R")
            x = np.asarray(band.resize((8, 8), self._image.Resampling.BOX), np.float64).reshape(-1) / 255.0
            rows.append(x if x.mean() < 0.5 else 1.0 - x)  # white strokes on a light background: invert
        return np.stack(rows)

    def predict_proba(self, images, *, class_prompts=None):
        d = ((self._features(images)[:, None, :] - self.centroids[None]) ** 2).sum(-1)
        e = np.exp(-(d - d.min(1, keepdims=True)))
        return (e / e.sum(1, keepdims=True)).astype(np.float32)


class LoggedLLM:
    """Wraps an LLM double: logs each completed request; optionally hangs on the n-th chat call."""

    def __init__(self, inner, role: str, log_path, hang_at: int | None = None):
        self.inner, self.role, self.log_path, self.hang_at = inner, role, log_path, hang_at
        self.info = inner.info
        self.chats = 0

    def _log(self, prompt: str, seed) -> None:
        with open(self.log_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"role": self.role, "prompt": hashlib.sha256(prompt.encode()).hexdigest(),
                                 "seed": seed}) + "\n")

    def chat(self, messages, **kw):
        self.chats += 1
        if self.hang_at is not None and self.chats == self.hang_at:
            print("HANGING", flush=True)
            time.sleep(300)
        reply = self.inner.chat(messages, **kw)
        self._log(messages[-1].content[0], kw.get("seed"))
        return reply

    def chat_batch(self, conversations, **kw):
        replies = self.inner.chat_batch(conversations, **kw)
        for c in conversations:
            self._log(c[-1].content[0], kw.get("seed"))
        return replies


def build_pipeline(store, log_path, hang_at: int | None = None):
    from fixtures_tiny.model_diff_llms import AggregatingExplainer, RuleReaderEvaluator
    from nemo_desktop.core.analyses.model_diff import ModelDiffConfig, SyntheticDigits
    from nemo_desktop.core.registry import Components, build_analysis

    comps = Components(classifier=CentroidClassifier("grey"), classifier_b=CentroidClassifier("red"),
                       mllm=LoggedLLM(AggregatingExplainer(), "explainer", log_path, hang_at),
                       judge=LoggedLLM(RuleReaderEvaluator(), "evaluator", log_path),
                       generator=SyntheticDigits(size=16), store=store)
    return build_analysis("model-diff", comps, ModelDiffConfig(**CONFIG))


if __name__ == "__main__":
    from nemo_desktop.core.store import ResultsStore

    db, log, hang = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with ResultsStore.open(db_path=db) as st:
        build_pipeline(st, log, hang)()
    print("FINISHED", flush=True)

"""The seed's five prompts (resources/prompts/model_diff_*.v1.txt) and the parts it does not print.

Parts written for NEMO Desktop (flagged in resources/prompts/README.md): the evaluator's question and
in-context example, the metric definitions, the result-line format (differences.py) and the condition
description (conditions.py). Every version string goes into cache keys and the result's manifest.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Sequence

from ...methods.prompts import PromptTemplate, load_prompt
from .conditions import Condition

CONCISE_LINES = ("- Keep it as a single paragraph, concise enough to fit in one or two lines.\n"
                 "- Write in a concise style with short, direct sentences. Avoid unnecessary connectors or long "
                 "clauses.\n")

# Written for NEMO Desktop: one example that shows the answer format with a made-up attribute that no shipped
# condition has (not a background, colour, digit, angle or anything a caption names; a test scans every shipped
# condition file for its words), so it cannot hint at a real difference.
IN_CONTEXT_ATTRIBUTE = "a watermark"
IN_CONTEXT_EXAMPLE = (f"Explanation: Model A is worse than Model B on images with {IN_CONTEXT_ATTRIBUTE}. "
                      f"Question: Which model performs better given the condition: {IN_CONTEXT_ATTRIBUTE}? "
                      "Answer: [2] Model B")

METRIC_DEFINITIONS = {
    "completeness": "Completeness: the correlation, over conditions, between the true accuracy difference of the "
                    "two models (A minus B) and the better model that a reader predicts from the explanation "
                    "alone; higher means the explanation lets a reader predict which model wins.",
    "density": "Density: how much Completeness drops when a quarter of the explanation's words are removed at "
               "random; higher means every word carries information, negative means words mislead.",
    "tokens": "Token Length: the number of tokens of the explanation; shorter is better at equal scores.",
}

METRIC_NAMES = {"completeness": "Completeness", "completeness+density": "Completeness and Density"}


def question(condition: Condition) -> str:
    """A.1's "Which model performs better given c?" with the condition's text."""
    return f"Which model performs better given the condition: {condition.text}?"


@dataclass(frozen=True)
class ModelDiffPrompts:
    evaluate: PromptTemplate
    summarize: PromptTemplate
    update: PromptTemplate
    explore: PromptTemplate
    open_conditions: PromptTemplate

    @classmethod
    def load(cls) -> "ModelDiffPrompts":
        return cls(*(load_prompt(f"model_diff_{n}") for n in
                     ("evaluate", "summarize", "update", "explore", "open_conditions")))

    def versions(self) -> dict[str, str]:
        out = {n: getattr(self, n).version for n in ("evaluate", "summarize", "update", "explore", "open_conditions")}
        # The example is filled into the evaluate prompt: a changed example must change keys and manifests too.
        out["in_context_example"] = hashlib.sha256(IN_CONTEXT_EXAMPLE.encode("utf-8")).hexdigest()[:8]
        return out

    # -- rendering --------------------------------------------------------------------------------------------
    def render_evaluate(self, task_description: str, explanation: str, condition: Condition) -> str:
        return self.evaluate.render(task_description=task_description, in_context_example=IN_CONTEXT_EXAMPLE,
                                    explanation=explanation, question=question(condition))

    def render_summarize(self, lines: Sequence[str], concise: bool) -> str:
        return self.summarize.render(differences="\n".join(lines), concise_requirements=_concise(concise))

    def render_update(self, *, objective: str, explanation: str, before: str, lines: Sequence[str], after: str,
                      concise: bool) -> str:
        return self.update.render(metrics_name=METRIC_NAMES[objective], metric_definitions=definitions(objective),
                                  concise_requirements=_concise(concise), explanation=explanation,
                                  metrics_before=before, differences="\n".join(lines), metrics_after=after)

    def render_explore(self, *, objective: str, history: Sequence[tuple[str, str]], description: str,
                       size: int) -> str:
        blocks = [f"Explanation {i}: {text}\n{METRIC_NAMES[objective]} {i}: {scores}"
                  for i, (text, scores) in enumerate(history, start=1)]
        return self.explore.render(metrics_name=METRIC_NAMES[objective], metric_definitions=definitions(objective),
                                   history="\n\n".join(blocks), condition_description=description,
                                   exploration_size=size)

    def render_open_conditions(self, *, task_description: str, labels: Sequence[str], number: int,
                               guidelines: Sequence[str] = ()) -> str:
        return self.open_conditions.render(task_description=task_description,
                                           label_options=", ".join(f"'{x}'" for x in labels),
                                           label_guidelines="".join(f"- {g}\n" for g in guidelines), number=number)


def _concise(on: bool) -> str:
    return CONCISE_LINES if on else ""


def definitions(objective: str) -> str:
    names = ["completeness", "density", "tokens"] if objective == "completeness+density" else ["completeness", "tokens"]
    return " ".join(METRIC_DEFINITIONS[n] for n in names)


def format_scores(score: Any, objective: str) -> str:
    """`Completeness 0.62, Density 0.18, Token Length 54` (Density only when it is in the objective)."""
    parts = [f"Completeness {score.completeness:.2f}"]
    if objective == "completeness+density" and score.density is not None:
        parts.append(f"Density {score.density:.2f}")
    parts.append(f"Token Length {score.tokens}")
    return ", ".join(parts)

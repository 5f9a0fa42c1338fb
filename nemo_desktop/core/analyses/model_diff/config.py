"""The analysis' settings (defaults from seed 002 and the team's method note). Each field's metadata gives
its label, help, bounds or choices, so CLI flags and GUI forms can be generated from it."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ...base.errors import ConfigError

METHODS = ("raw-differences", "summarization", "optimization")
OBJECTIVES = ("completeness+density", "completeness")


def _f(default: Any, label: str, help: str, **meta: Any) -> Any:  # noqa: A002 - the metadata key is "help"
    return field(default=default, metadata={"label": label, "help": help, **meta})


@dataclass(frozen=True)
class ModelDiffConfig:
    methods: tuple[str, ...] = _f(METHODS, "Methods", "Explainers to run (the seed's three).", choices=METHODS)
    samples_per_condition: int = _f(20, "Samples per condition (m)",
                                    "Images generated per condition to measure the accuracy difference "
                                    "(20 for synthetic digits; the seed's T2I experiment uses 8).", min=1, max=1000)
    initial_conditions: int = _f(10, "Initial conditions", "Random conditions measured before the first "
                                 "summaries of Optimization (C0).", min=1, max=1000)
    iterations: int = _f(10, "Iterations (T)", "Optimization rounds of exploration and feedback.", min=0, max=200)
    explore_size: int = _f(10, "Conditions per iteration (k)", "Conditions the LLM proposes in each round.",
                           min=1, max=100)
    beam_size: int = _f(3, "Beam (n)", "Explanations kept after each round (the best n of 2n).", min=1, max=10)
    test_conditions: int = _f(0, "Held-out test conditions", "Conditions to score the final explanations on; "
                              "0 = every condition of the grid (CMNIST: 1,300).", min=0, max=100000)
    objective: str = _f("completeness+density", "Objective", "What Optimization maximises on the conditions "
                        "explored so far (Table 2's ablation).", choices=OBJECTIVES)
    concise_prompt: bool = _f(True, "Concise prompt", "Keep the two 'concise' requirements in the summarize and "
                              "update prompts (Table 2's ablation).")
    drop_ratio: float = _f(0.25, "Density drop ratio", "Share of words removed for Density (A.1: 25%).",
                           min=0.01, max=0.9)
    density_repeats: int = _f(1, "Density repeats", "Independent word drops averaged for Density.", min=1, max=10)
    generation_temperature: float = _f(1.0, "Explainer temperature", "Sampling temperature of the explainer "
                                       "LLM (A.4: 1.0).", min=0.0, max=2.0)
    max_new_tokens: int = _f(512, "Explainer max tokens", "Reply length limit of the explainer LLM.",
                             min=16, max=8192)
    evaluator_max_new_tokens: int = _f(16, "Evaluator max tokens", "Reply length limit of the evaluator "
                                       "(it answers with an option).", min=1, max=1024)
    evaluator_batch: int = _f(16, "Evaluator batch", "Questions sent per chat_batch call.", min=1, max=512)
    attribution_words: int = _f(20, "Token attribution: units", "Which words carry each explanation's score "
                                "(seed Figs. 4-5): every unit is left out in turn and the explanation rescored. "
                                "Up to this many units per explanation; a longer explanation is split into this "
                                "many spans of consecutive words. Cost: (units + 1) x conditions evaluator "
                                "questions per explanation. 0 = off.", min=0, max=500)
    attribution_conditions: int = _f(50, "Token attribution: conditions", "Held-out test conditions each "
                                     "left-out copy is asked about (the first ones; 0 = all of them).",
                                     min=0, max=100000)
    seed: int = _f(0, "Seed", "Seeds condition sampling, images, LLM sampling and word drops.", min=0,
                   max=2**31 - 1)

    def __post_init__(self) -> None:
        object.__setattr__(self, "methods", tuple(self.methods))
        for f in fields(self):
            meta, value = f.metadata, getattr(self, f.name)
            if "choices" in meta:
                bad = [v for v in (value if isinstance(value, tuple) else (value,)) if v not in meta["choices"]]
                if bad or (isinstance(value, tuple) and not value):
                    raise ConfigError(f"{meta['label']}: {', '.join(map(str, bad)) or 'none given'} is not valid.",
                                      hint=f"Choose from: {', '.join(meta['choices'])}.")
            if "min" in meta and value < meta["min"] or "max" in meta and value > meta["max"]:
                raise ConfigError(f"{meta['label']} must be between {meta['min']} and {meta['max']} (got {value}).")

    @property
    def observed_budget(self) -> int:
        """Conditions Optimization observes (C0 + T k); Raw Differences and Summarization get exactly as many."""
        return self.initial_conditions + self.iterations * self.explore_size

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["methods"] = list(self.methods)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ModelDiffConfig":
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ConfigError(f"Unknown model-difference settings: {', '.join(sorted(unknown))}.")
        return cls(**{k: tuple(v) if k == "methods" else v for k, v in d.items()})

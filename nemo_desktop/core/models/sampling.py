"""How a sampled MLLM draw picks its tokens: temperature, top_p, top_k and min_p, always explicit.

Why explicit: backends fill every sampling field a call leaves unset from the checkpoint's
`generation_config.json` (transformers' `generate`, and vLLM by default). Qwen2-VL and Qwen2.5-VL-Instruct
ship `do_sample=true, top_k=1, top_p=0.001, temperature=0.01`: with those left in place a "sampled" draw
at any temperature is the greedy one, and SciTX's M candidates collapse into one. So every sampled call
sets all four fields, and a greedy call (temperature 0) sets none of them.

"Off" values: top_p 1.0, top_k 0, min_p 0.0 (transformers' conventions; the OpenAI-compatible adapter sends
top_k "off" as -1, which vLLM and SGLang both accept, while older vLLM rejects 0).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..base.errors import ConfigError

# This project's defaults for draws 2..M (the paper gives none; it decodes its single hypothesis at
# temperature 0). Temperature 0.7 with nucleus 0.95 is a common "varied but on-topic" setting: it keeps
# the JSON answer format readable while letting the cause named differ between draws. top_k is off
# because a small top_k (the Qwen2.5-VL checkpoint's 1) is exactly what makes sampled draws repeat the
# greedy one, and nucleus sampling already cuts the tail. min_p is off (not every server supports it).
DEFAULT_TEMPERATURE = 0.7
DEFAULT_TOP_P = 0.95
DEFAULT_TOP_K = 0
DEFAULT_MIN_P = 0.0


@dataclass(frozen=True)
class Sampling:
    """The sampling settings of one draw with temperature > 0 (greedy draws carry none)."""

    temperature: float = DEFAULT_TEMPERATURE
    top_p: float = DEFAULT_TOP_P  # 1.0 = off
    top_k: int = DEFAULT_TOP_K  # 0 = off
    min_p: float = DEFAULT_MIN_P  # 0.0 = off

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise ConfigError(f"A sampled draw needs a temperature above 0 (got {self.temperature}).",
                              hint="Temperature 0 is greedy decoding: use it for the first draw only.")
        if not 0.0 < self.top_p <= 1.0:
            raise ConfigError(f"top_p must be in (0, 1] (got {self.top_p}); 1.0 turns it off.")
        if isinstance(self.top_k, bool) or int(self.top_k) != self.top_k or self.top_k < 0:
            raise ConfigError(f"top_k must be a whole number >= 0 (got {self.top_k}); 0 turns it off.")
        if not 0.0 <= self.min_p < 1.0:
            raise ConfigError(f"min_p must be in [0, 1) (got {self.min_p}); 0 turns it off.")
        object.__setattr__(self, "temperature", float(self.temperature))
        object.__setattr__(self, "top_p", float(self.top_p))
        object.__setattr__(self, "top_k", int(self.top_k))
        object.__setattr__(self, "min_p", float(self.min_p))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def chat_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of `MultimodalLLM.chat` for this draw."""
        return self.as_dict()

    def describe(self) -> str:
        return (f"temperature {self.temperature:g}, top_p {self.top_p:g}, top_k {self.top_k or 'off'}, "
                f"min_p {self.min_p:g}")


def resolve_sampling(temperature: float, top_p: float | None = None, top_k: int | None = None,
                     min_p: float | None = None) -> Sampling | None:
    """What an adapter applies for a call: None for greedy (temperature <= 0), else every field set, with
    this project's defaults for those the caller left None (never the checkpoint's or server's)."""
    if not temperature or temperature <= 0:
        return None
    return Sampling(float(temperature), DEFAULT_TOP_P if top_p is None else top_p,
                    DEFAULT_TOP_K if top_k is None else top_k, DEFAULT_MIN_P if min_p is None else min_p)

"""Memory profiles: how SciTX's three models share one GPU of a given size ("80 GB", "48 GB", "24 GB", "CPU").

A profile says, per role, where a model runs, whether its weights are quantised, and whether it stays resident
or leaves the GPU between stages:

| profile | classifier | MLLM                                   | editor                                   |
|---------|------------|----------------------------------------|------------------------------------------|
| 80 GB   | resident   | bf16, resident, batch 16               | bf16, resident                           |
| 48 GB   | resident   | int8 weights (torchao), resident, batch 8 | bf16, resident                        |
| 24 GB   | resident   | int8 weights, resident, batch 4        | CPU offload (one component on the GPU at a time) |
| CPU     | CPU        | CPU, float32, batch 2                  | CPU                                      |

`fitting_profile(total_bytes)` names the largest profile a card holds (`nemo doctor` prints it);
`estimate(profile, models)` adds up what the chosen models need under a profile, from the catalog's parameter
counts and memory estimates (an estimate, said so); `check_fits` refuses, in words and before anything loads,
a profile whose estimate exceeds the card. The GPU figures (benchmarks/gpu_figures.sh) measure the real peaks
under a per-process memory cap of the profile's size.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

from ..errors import ConfigError

GIB = 1 << 30
# Share of an offloaded editor's weights on the GPU at once: its largest component (FLUX.1 Kontext: the 12B
# transformer, 23.8 of 33.7 GB). An assumption of this estimate, stated as such.
OFFLOAD_PEAK_SHARE = 0.72
BYTES_PER_PARAM = {None: 2.0, "int8": 1.0, "int4": 0.5}  # bf16 weights unless quantised
CPU = "CPU"


@dataclass(frozen=True)
class MemoryProfile:
    name: str
    memory_gib: float | None  # the card it is planned for; None = no GPU
    mllm_quantize: str | None = None  # torchao weight-only quantisation of the MLLM's language model
    mllm_batch_size: int = 4  # conversations per generate() call
    editor_offload: bool = False  # diffusers model CPU offload: one component on the GPU at a time
    summary: str = ""

    @property
    def device(self) -> str:
        return "cpu" if self.memory_gib is None else "auto"

    def load_settings(self, kind: str) -> dict[str, Any]:
        """LoadOptions fields for a model of `kind` under this profile."""
        out: dict[str, Any] = {"device": self.device}
        if kind == "editor" and self.editor_offload:
            out["cpu_offload"] = True
        return out

    def spec_options(self, kind: str, family: str) -> dict[str, Any]:
        """Options added to a model's spec under this profile (local transformers MLLMs only)."""
        if kind != "mllm" or family != "transformers-mllm":
            return {}
        out: dict[str, Any] = {"batch_size": self.mllm_batch_size}
        if self.mllm_quantize:
            out["quantize"] = self.mllm_quantize
        return out

    def apply(self, spec: Any, kind: str, settings: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """A model's spec and LoadOptions fields under this profile (the CLI's --profile and the app's setting):
        the profile's device and offload, unless a device was chosen (not "auto"); its MLLM options under the
        spec's own, which win."""
        chosen = self.load_settings(kind)
        if settings.get("device", "auto") != "auto":
            chosen.pop("device")
        return replace(spec, options={**self.spec_options(kind, spec.family), **spec.options}), {**settings, **chosen}


PROFILES: dict[str, MemoryProfile] = {p.name: p for p in (
    MemoryProfile("80 GB", 80, None, 16, False,
                  "every model resident in bf16, large MLLM batches"),
    MemoryProfile("48 GB", 48, "int8", 8, False,
                  "MLLM weights in int8 (torchao), every model resident"),
    MemoryProfile("24 GB", 24, "int8", 4, True,
                  "MLLM weights in int8; the editor offloaded to host memory, one component on the GPU at a time"),
    MemoryProfile(CPU, None, None, 2, False, "everything on the CPU (slow)"),
)}
# A card reports a little less than its nominal size (an 80 GB card: 79.2 GiB): a profile fits a card with at
# least this share of the profile's size.
NOMINAL_SHARE = 0.92


def get_profile(name: str) -> MemoryProfile:
    key = {p.lower().replace(" ", ""): p for p in PROFILES}.get(str(name).lower().replace(" ", ""))
    if key is None:
        raise ConfigError(f"Unknown memory profile '{name}'.", hint=f"Use one of: {', '.join(PROFILES)}.")
    return PROFILES[key]


def fitting_profile(total_bytes: int | None) -> tuple[MemoryProfile, str]:
    """The largest profile a card of `total_bytes` holds (None: no GPU), and why, in words."""
    if not total_bytes:
        return PROFILES[CPU], "no CUDA GPU was found"
    gib = total_bytes / GIB
    for p in sorted((p for p in PROFILES.values() if p.memory_gib), key=lambda p: -p.memory_gib):
        if gib >= p.memory_gib * NOMINAL_SHARE:
            return p, f"the GPU has {gib:.1f} GiB"
    smallest = min(p.memory_gib for p in PROFILES.values() if p.memory_gib)
    return PROFILES[CPU], (f"the GPU has {gib:.1f} GiB, less than the smallest GPU profile ({smallest:g} GB); "
                           "use the CPU profile or a model server (an OpenAI-compatible URL)")


@dataclass(frozen=True)
class Part:
    role: str
    model_id: str
    gib: float
    how: str


@dataclass(frozen=True)
class Estimate:
    parts: tuple[Part, ...]

    @property
    def peak_gib(self) -> float:
        return sum(p.gib for p in self.parts)

    def describe(self) -> str:
        return " + ".join(f"{p.model_id} ({p.how}) {p.gib:.1f} GiB" for p in self.parts)


def model_gib(entry: Any, *, quantize: str | None = None, offload: bool = False) -> tuple[float, str]:
    """GPU memory of a catalog model: its weights at the profile's precision plus the catalog's working memory
    (`vram_bf16_gb` less the bf16 weights), an offloaded editor only its largest component."""
    params = float(getattr(entry, "parameters", 0) or 0)
    vram_gb = float(entry.vram_bf16_gb)
    if not params:  # no parameter count: the catalog's whole estimate, unquantised
        return vram_gb * 1e9 / GIB, "catalog estimate"
    weights = params * BYTES_PER_PARAM[quantize]
    working = max(0.0, vram_gb * 1e9 - params * BYTES_PER_PARAM[None])
    if offload:
        return (weights * OFFLOAD_PEAK_SHARE + working) / GIB, "offloaded, largest component"
    return (weights + working) / GIB, f"{quantize} weights" if quantize else "resident"


def estimate(profile: MemoryProfile, models: Mapping[str, Any]) -> Estimate:
    """What `models` ({role: catalog entry}) hold on the GPU at once under `profile` (all stay resident)."""
    parts = []
    for role, entry in models.items():
        if entry is None:
            continue
        gib, how = model_gib(entry, quantize=profile.mllm_quantize if role == "mllm" else None,
                             offload=role == "editor" and profile.editor_offload)
        parts.append(Part(role, entry.id, gib, how))
    return Estimate(tuple(parts))


def check_fits(profile: MemoryProfile, models: Mapping[str, Any], total_bytes: int | None) -> Estimate:
    """Refuse, before loading, a GPU profile on no GPU or one whose estimate exceeds the card. Returns the
    estimate when it fits."""
    est = estimate(profile, models)
    if profile.memory_gib is None:
        return est
    if not total_bytes:
        raise ConfigError(f"The '{profile.name}' profile needs a CUDA GPU, and none was found.",
                          hint="Use --profile CPU, or run on a machine with a GPU.")
    card = total_bytes / GIB
    if est.peak_gib > card:
        better, _ = fitting_profile(total_bytes)
        raise ConfigError(
            f"The '{profile.name}' profile does not fit this GPU: the models need about {est.peak_gib:.1f} GiB "
            f"({est.describe()}), and the GPU has {card:.1f} GiB.",
            hint=f"Choose a smaller profile (this GPU fits '{better.name}'), smaller models, or a model server.")
    return est


def advice(chosen: str | None, models: Mapping[str, Any], total_bytes: int | None) -> dict[str, Any]:
    """What the app shows beside the profile choice: the profile that fits the card ("fits", "why", "summary")
    and, for a `chosen` profile, why it cannot fit ("problem", in words) or its estimate ("estimate_gib")."""
    fits, why = fitting_profile(total_bytes)
    out: dict[str, Any] = {"fits": fits.name, "why": why, "summary": fits.summary, "chosen": None,
                           "problem": None, "estimate_gib": None}
    if chosen:
        profile = get_profile(chosen)
        out["chosen"] = profile.name
        try:
            out["estimate_gib"] = check_fits(profile, models, total_bytes).peak_gib
        except ConfigError as exc:
            out["problem"] = f"{exc.message} {exc.hint or ''}".strip()
    return out

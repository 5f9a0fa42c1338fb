"""Memory profiles: how SciTX's three models share one GPU of a given size ("80 GB", "48 GB", "24 GB", "CPU").

A profile says, per role, where a model runs, whether its weights are quantised, and whether it stays resident
or leaves the GPU between stages:

| profile | classifier | MLLM                                   | editor                                   |
|---------|------------|----------------------------------------|------------------------------------------|
| 80 GB   | resident   | bf16, resident, batch 16               | bf16, resident                           |
| 48 GB   | resident   | int8 weights (torchao), resident, batch 8 | bf16, resident                        |
| 24 GB   | resident   | int8 weights, resident, batch 4        | int8 weights (torchao), CPU offload (one component on the GPU at a time) |
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

from ..base.errors import ConfigError

GIB = 1 << 30
# Share of an offloaded editor's weights on the GPU at once: its largest component (FLUX.1 Kontext: the 12B
# transformer, 23.8 of 33.7 GB). An assumption of this estimate, stated as such.
OFFLOAD_PEAK_SHARE = 0.72
BYTES_PER_PARAM = {None: 2.0, "int8": 1.0, "float8": 1.0, "int4": 0.5}  # bf16 weights unless quantised
# An editor's `quantize` option (adapters/diffusers_quantize.py) covers its DiT transformer and T5 encoder only:
# the share of its parameters that are quantised, from the catalog notes' component sizes (an assumption of the
# estimate; the rest stays bf16). FLUX.1 Kontext: transformer 23.8 + T5-XXL 9.5 of 33.7 GB; Qwen-Image-Edit:
# transformer 40.9 of 57.8 GB (its Qwen2.5-VL text encoder is not quantised). Families absent here (UNet
# editors) are not quantised by a profile. int8 scales (one per output row) are left out: under 0.1%.
EDITOR_QUANTISED_SHARE = {"diffusers-flux-kontext": 0.988, "diffusers-qwen-image-edit": 0.708}
# The MLLM's `quantize` covers only its language model's linear layers (mllm_fast.py): the vision tower, the
# token embeddings and the LM head stay bf16. Qwen2.5-VL-7B: 6.5 of 8.3B parameters (0.79); 3B: 2.8 of 3.75B
# (0.74). The estimate assumes the smaller share, so it errs towards refusing.
MLLM_QUANTISED_SHARE = 0.75
CPU = "CPU"


@dataclass(frozen=True)
class MemoryProfile:
    name: str
    memory_gib: float | None  # the card it is planned for; None = no GPU
    mllm_quantize: str | None = None  # torchao weight-only quantisation of the MLLM's language model
    mllm_batch_size: int = 4  # conversations per generate() call
    editor_offload: bool = False  # diffusers model CPU offload: one component on the GPU at a time
    summary: str = ""
    editor_quantize: str | None = None  # torchao weight-only quantisation of a DiT editor's transformer and T5

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
        """Options added to a model's spec under this profile (local transformers MLLMs; DiT editors)."""
        if kind == "editor" and self.editor_quantize and family in EDITOR_QUANTISED_SHARE:
            return {"quantize": self.editor_quantize}
        if kind != "mllm" or family != "transformers-mllm":
            return {}
        out: dict[str, Any] = {"batch_size": self.mllm_batch_size}
        if self.mllm_quantize:
            out["quantize"] = self.mllm_quantize
        return out

    def apply(self, spec: Any, kind: str, settings: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """A model's spec and LoadOptions fields under this profile (the CLI's --profile and the app's setting):
        the profile's device and offload, unless a device was chosen (not "auto"); its MLLM and editor options
        under the spec's own, which win."""
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
                  "MLLM and editor weights in int8; the editor offloaded to host memory, one component on the GPU "
                  "at a time", editor_quantize="int8"),
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


def model_gib(entry: Any, *, quantize: str | None = None, offload: bool = False,
              quantised_share: float = 1.0) -> tuple[float, str]:
    """GPU memory of a catalog model: its weights at the profile's precision (`quantised_share` of them
    quantised, the rest bf16) plus the catalog's working memory (`vram_bf16_gb` less the bf16 weights), an
    offloaded editor only its largest component."""
    params = float(getattr(entry, "parameters", 0) or 0)
    vram_gb = float(entry.vram_bf16_gb)
    if not params:  # no parameter count: the catalog's whole estimate, unquantised
        return vram_gb * 1e9 / GIB, "catalog estimate"
    share = quantised_share if quantize else 0.0
    weights = params * (share * BYTES_PER_PARAM[quantize] + (1 - share) * BYTES_PER_PARAM[None])
    working = max(0.0, vram_gb * 1e9 - params * BYTES_PER_PARAM[None])
    precision = f"{quantize} weights" if quantize else None
    if offload:
        return (weights * OFFLOAD_PEAK_SHARE + working) / GIB, ", ".join(
            filter(None, (precision, "offloaded, largest component")))
    return (weights + working) / GIB, precision or "resident"


def estimate(profile: MemoryProfile, models: Mapping[str, Any]) -> Estimate:
    """What `models` ({role: catalog entry}) hold on the GPU at once under `profile` (all stay resident)."""
    parts = []
    for role, entry in models.items():
        if entry is None:
            continue
        if role == "editor":
            share = EDITOR_QUANTISED_SHARE.get(getattr(entry, "family", ""))
            gib, how = model_gib(entry, quantize=profile.editor_quantize if share else None,
                                 offload=profile.editor_offload, quantised_share=share or 0.0)
        elif role == "mllm":
            gib, how = model_gib(entry, quantize=profile.mllm_quantize, quantised_share=MLLM_QUANTISED_SHARE)
        else:
            gib, how = model_gib(entry)
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

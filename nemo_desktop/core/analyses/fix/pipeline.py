"""The `fix` registry entry (kind "fit"): from an explanation to a better model (issue 29).

    analysis = build_analysis("fix", Components(classifier=clf, editor=ed, store=store),
                              {"instruction": "Make the background white", "predicted_classes": "seven",
                               "affected_classes": "one,two", "mode": "lora"})
    result = analysis(data, ctx)       # data: a FixData, or a folder with train/, affected/ and rest/

Stages: "Preparing targeted data" (one edit per unit; edits are stored, so a resumed fix edits nothing twice),
"Training" (one step per unit; a checkpoint after every epoch: a killed or cancelled fix resumes from it),
"Measuring", "Saving". The classifier is copied before training and never changed. The fixed model becomes a new
user-catalog entry only when the guard keeps it (and `save` is on). Mode "prompt" fixes a zero-shot classifier by
adopting class prompts instead (prompts.py; a kept prompt becomes the next version of a prompt set). The result is
keyed by the analysis version, the classifier, the editor (for edit data), the data's content and every setting; a
re-run is answered from the store.

What a classifier must expose to be fixable by training (`plan()` checks it and says it before the run): `model`,
a torch.nn.Module whose forward maps preprocessed pixels to class logits; `preprocess(images)`, PIL images to the
tensor `model` takes; `class_names`; and a head: timm's `get_classifier()`, or a `head` / `fc` / `classifier`
module with weights. "last-block" trains the head and the backbone's last block: `layer4` when the model has one
(ResNets), else the last child with weights of `blocks` / `stages` / `layers` / `features` (timm's ViTs, ConvNeXts,
Swin, EfficientNets...), else the last top-level module with weights before the head.
"""
from __future__ import annotations

import copy
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from .... import __version__
from ...base.errors import ConfigError
from ...base.job_context import JobContext
from ...registry import AnalysisSpec, Inputs
from ...store.keys import content_hash, result_key
from . import measure
from .config import FixConfig
from .data import FixData, image_label_lists, targeted_data
from .from_mode import with_mode_images
from .pixels import Pixels
from .rendering import rendered_data, text_to_image
from .result import ANALYSIS, KIND, STORE_KIND, VERSION, FixResult
from .saving import default_name, save_fixed, save_form
from .training import finish, head_name, interpolate, last_block_name, prepare, teacher_logits, train

SPLITS = ("train", "affected", "rest", "finding")


def load_fix_folder(root: str | Path, class_names: list[str], *, need_train: bool = True) -> FixData:
    """A folder with train/, affected/ and rest/, each with one sub-folder per class (named as the classifier's
    classes): the training data, the finding's held-out images, every other held-out image; optionally finding/,
    a failure mode's own images (not held out) added to an edit fix's training data with their true labels."""
    from ...base.images import load_image

    root = Path(root).expanduser()
    missing = [s for s in SPLITS[:3] if not (root / s).is_dir() and (s != "train" or need_train)]
    if missing:
        raise ConfigError(f"{root} has no {', '.join(missing)} folder(s).",
                          hint="A fix folder holds train/, affected/ and rest/, each with a sub-folder per class.")
    sets: dict[str, list] = {}
    for split in SPLITS:
        items = []
        if not (root / split).is_dir():
            sets[split] = items
            continue
        for d in sorted(p for p in (root / split).iterdir() if p.is_dir()):
            if d.name not in class_names:
                raise ConfigError(f"{d} is not named after a class of the classifier.",
                                  hint=f"Classes: {', '.join(class_names[:20])}.")
            y = class_names.index(d.name)
            items += [(load_image(f), y) for f in sorted(d.iterdir())
                      if f.suffix.lower() in (".png", ".jpg", ".jpeg", ".bmp", ".webp")]
        sets[split] = items
    return FixData(list(class_names), sets["train"], sets["affected"], sets["rest"],
                   description={"folder": str(root)}, finding=sets["finding"])


def _identity(model: Any) -> dict[str, Any] | None:
    info = getattr(model, "info", None)
    if model is None:
        return None
    return {"id": getattr(info, "model_id", type(model).__name__), "revision": getattr(info, "revision", None),
            "family": getattr(info, "family", None)}


def stage_weights(config: FixConfig) -> dict[str, float]:
    """Relative cost of the fix's stages, for its progress bar and time left. Measured by
    benchmarks/progress_truth.py on a demo-digits fix (augment, 2 CPU cores: targeted data 0.07 s, preparing the
    training images 0.55 s, training 3.5 s, measuring 0.5 s). Edits and rendered sentences are weighted as much as
    the training: a diffusion editor takes seconds per image (an assumption, not measured here)."""
    edits = config.data == "edit" and bool(config.instruction.strip() or config.cue_instruction.strip())
    return {"Loading the failure mode's images": 0.5, "Preparing targeted data": 7.0 if edits else 0.1,
            "Rendering the sentence": 7.0 if config.data == "edit" and config.sentence.strip() else 0.0,
            "Preparing training images": 0.6, "Training": 3.5, "Choosing the weight mix": 0.7,
            "Measuring (affected)": 0.15, "Measuring (rest)": 0.4, "Saving the fixed model": 0.2}


class FixAnalysis:
    """`fix`: targeted fine-tuning of a trained classifier from a finding, measured, kept only if it helps."""

    def __init__(self, classifier: Any = None, editor: Any = None, store: Any = None,
                 config: FixConfig | None = None, checkpoint_dir: str | Path | None = None,
                 generator: Any = None) -> None:
        self.config = config or FixConfig()
        self.classifier, self.editor, self.store = classifier, editor, store
        if self.config.mode == "prompt":  # a zero-shot classifier: class prompts adopted, nothing trained
            if not getattr(classifier, "zero_shot", False):
                raise ConfigError("Mode prompt adopts class prompts of a zero-shot classifier (CLIP, SigLIP, "
                                  "open_clip); this one is trained.",
                                  hint="Fix it with targeted fine-tuning: mode head, last-block, lora or full.")
            self.generator, self.checkpoint_dir = None, None
            return
        self.generator = text_to_image(generator) if self.renders else None
        if getattr(classifier, "zero_shot", False):
            raise ConfigError("A zero-shot classifier is fixed by adopting a prompt, not by training.",
                              hint="Use mode prompt with the class prompts to adopt (nemo fix --prompt CLASS=TEXT) "
                                   "for CLIP/SigLIP/open_clip classifiers.")
        if not hasattr(classifier, "model") or not hasattr(classifier, "preprocess"):
            raise ConfigError(f"{type(classifier).__name__} exposes no torch model to fine-tune.",
                              hint="A fixable classifier exposes .model (a torch module: pixels to logits), "
                                   ".preprocess(images) and .class_names; see the fix's documentation.")
        if self.config.data == "edit" and editor is None and (self.config.instruction.strip()
                                                              or self.config.cue_instruction.strip()):
            raise ConfigError("Targeted data from an edit needs an image editor.",
                              hint="Give one (--editor), or choose --data augment for the control.")
        if self.config.mode == "lora":
            from ...base.extras import require

            require("fix", "A LoRA fix (mode lora)")  # before any data is prepared or trained
        self.plan()  # a classifier without a head is refused here, before any work
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir else self._default_checkpoints()

    def plan(self) -> dict[str, Any]:
        """What the fix will train and how a kept fix is saved, known before any work (the CLI prints it)."""
        if self.config.mode == "prompt":
            return {"mode": "prompt", "prompts": self.config.prompt_changes,
                    "save": {"how": f"the next version of the prompt set '{self.config.prompt_set}'"}
                    if self.config.save else None}
        model, cfg = self.classifier.model, self.config
        head = head_name(model)
        out: dict[str, Any] = {"mode": cfg.mode, "head": head,
                               "block": last_block_name(model, head) if cfg.mode == "last-block" else None,
                               "save": save_form(self.classifier) if cfg.save else None}
        return out

    def plan_lines(self) -> list[str]:
        p = self.plan()
        if p["mode"] == "prompt":
            changes = "; ".join(f"{k}: {v!r}" for k, v in p["prompts"].items())
            return [f"Plan: adopt the prompt(s) {changes} (nothing is trained).",
                    f"A kept prompt is saved as {p['save']['how']}." if p["save"] else
                    "A kept prompt is not saved (save off)."]
        trains = {"head": f"the head ({p['head']})",
                  "last-block": f"the head ({p['head']}) and the last block ({p['block']})",
                  "lora": f"LoRA adapters on the backbone and the head ({p['head']})",
                  "full": "every weight"}[p["mode"]]
        lines = [f"Plan: {p['mode']} trains {trains}."]
        if p["save"]:
            lines.append(f"A kept fix is saved as {p['save']['how']}.")
        else:
            lines.append("A kept fix is not saved (save off).")
        return lines

    @property
    def renders(self) -> bool:
        """Whether the failure mode's sentence is rendered (edit fixes with a sentence)."""
        return self.config.mode != "prompt" and self.config.data == "edit" and bool(self.config.sentence.strip())

    def _default_checkpoints(self) -> Path | None:
        art = getattr(self.store, "artifacts_dir", None)
        return Path(art).parent / "fix-checkpoints" if art else None

    def key(self, data: FixData) -> str:
        return result_key(STORE_KIND, version=VERSION, classifier=_identity(self.classifier),
                          editor=_identity(self.editor) if self.config.data == "edit" and self.config.mode != "prompt"
                          else None,
                          generator=_identity(self.generator) if self.renders else None,
                          data=data.fingerprint(), config=self.config.to_dict())

    def __call__(self, data: FixData | str | Path, ctx: JobContext | None = None) -> FixResult:
        import torch

        # One bar for the whole fix: each stage fills its own share (training no longer starts at 100 %).
        ctx = (ctx or JobContext()).stages("", 0.0, 1.0, stage_weights(self.config))
        if not isinstance(data, FixData):
            data = load_fix_folder(data, list(self.classifier.class_names), need_train=self.config.mode != "prompt")
        if self.config.mode == "prompt":
            return self._adopt_prompt(data, ctx)
        if self.config.failure_modes or self.config.failure_mode:  # a failure mode's images (from_mode.py)
            data = with_mode_images(data, self.config, self.store, ctx)
        if not (self.config.affected or self.config.predicted or data.finding):
            # No classes given: the finding's are those of its held-out images (the fix folder's affected/).
            found = sorted({int(y) for _, y in data.affected})
            self.config = replace(self.config, affected_classes=", ".join(data.class_names[i] for i in found))
        self.config.check_plan(finding=bool(data.finding))
        if not data.train:
            raise ConfigError("The fix has no training images.", hint="Put the training data in FOLDER/train/.")
        key = self.key(data)
        if self.store is not None:
            hit = self.store.get(key)
            if hit is not None:
                return FixResult.from_dict(hit.payload)
        cfg, t0 = self.config, time.perf_counter()
        timings: dict[str, float] = {}
        extra, sources = (targeted_data(data, cfg, self.editor, self.store, ctx) if cfg.data != "none" or
                          cfg.affected or cfg.predicted else ([], []))
        if self.renders:
            rendered, rendered_sources = rendered_data(data.class_names, cfg, self.generator, self.store, ctx)
            extra, sources = extra + rendered, sources + rendered_sources
        timings["targeted_data"] = time.perf_counter() - t0
        base = self.classifier.model
        device = next(base.parameters()).device
        images, labels = image_label_lists(data.train + extra)
        x = Pixels.from_images(self.classifier, images, ctx, "Preparing training images")
        y = torch.as_tensor(labels, device=x.device)
        # The original training images (not the targeted ones): where the original model's outputs are kept
        original = torch.arange(len(y), device=x.device) < len(data.train)
        teacher = teacher_logits(base, x) if cfg.preserve > 0 else None
        torch.manual_seed(cfg.seed)
        module, trainable = prepare(copy.deepcopy(base).to(device), cfg.mode, cfg.lora_rank)
        ckpt = self.checkpoint_dir / f"{key}.safetensors" if self.checkpoint_dir else None
        t1 = time.perf_counter()
        record = train(module, x, y, cfg, checkpoint=ckpt, key=key, ctx=ctx, teacher=teacher, original=original)
        fixed = finish(module, cfg.mode)
        mixing = None
        if cfg.interpolation == "held-out":
            fixed, mixing = interpolate(fixed, base, x, y, cfg, original=original, ctx=ctx)
        timings["training"] = time.perf_counter() - t1
        t2 = time.perf_counter()
        figures, per_image = {}, {}
        for name, items in (("affected", data.affected), ("rest", data.rest)):
            imgs, lab = image_label_lists(items)
            xs = Pixels.from_images(self.classifier, imgs, ctx, f"Measuring ({name})")
            before, after = self._predict(base, xs), self._predict(fixed, xs)
            per_image[name] = {"sha256": [content_hash(im.convert("RGB")) for im in imgs],
                               "before": [int(v) for v in before], "after": [int(v) for v in after]}
            figures[name] = measure.measure_set(lab, before, after, data.class_names, resamples=cfg.bootstrap,
                                                seed=cfg.seed + (0 if name == "affected" else 7))
        verdict = measure.guard(figures["affected"], figures["rest"], cfg.margin, cfg.min_gain)
        timings["measuring"] = time.perf_counter() - t2
        result = FixResult(
            config=cfg.to_dict(), classifier=_identity(self.classifier),
            data={"fingerprint": data.fingerprint(), "train": len(data.train), "targeted": len(extra),
                  "affected": len(data.affected), "rest": len(data.rest), "description": data.description},
            sources=sources, trainable=trainable, training={**record.to_dict(), "interpolation": mixing},
            affected=figures["affected"],
            rest=figures["rest"], guard=verdict, saved=None, per_image=per_image, notes=list(record.notes),
            manifest={"analysis": ANALYSIS, "analysis_version": VERSION, "nemo_version": __version__,
                      "created_at": time.time(), "torch": torch.__version__, "device": str(device),
                      "classifier": _identity(self.classifier), "editor": _identity(self.editor),
                      "generator": _identity(self.generator), "plan": self.plan_lines(),
                      "preservation": {"preserve": cfg.preserve, "interpolation": cfg.interpolation,
                                       "mix": mixing["mix"] if mixing else None,
                                       "average_epochs": cfg.average_epochs,
                                       "average_decay": record.average_decay}},
            result_key=key)
        if cfg.save and verdict["keep"]:
            ctx.progress("Saving the fixed model", 0, 1)
            lineage = {"key": key, "base": _identity(self.classifier), "sources": sources,
                       "counts": result.data, "config": cfg.to_dict(), "summary": result.summary(),
                       "figures": {"affected": figures["affected"]["overall"], "rest": figures["rest"]["overall"],
                                   "guard": verdict["verdict"]}, "training": result.training}
            result.saved = save_fixed(self.classifier, fixed, cfg.name or default_name(
                str(self.classifier.info.model_id), key), lineage, ctx)
            ctx.progress("Saving the fixed model", 1, 1)
            if result.saved["id"] is None:
                result.notes.append(f"The fixed weights were saved to {result.saved['weights']}, without a catalog "
                                    f"entry: {save_form(self.classifier)['how']}.")
        elif cfg.save:
            result.notes.append("The guard did not keep the fix, so no catalog entry was written.")
        timings["total"] = time.perf_counter() - t0
        result.timings = timings
        if self.store is not None:
            self.store.put(key, STORE_KIND, result.to_dict())
        if ckpt is not None and ckpt.is_file():
            ckpt.unlink()  # the result is stored: a re-run is answered from the store
        return result

    def _adopt_prompt(self, data: FixData, ctx: JobContext) -> FixResult:
        """Mode prompt: the class prompts adopted on the held-out sets, measured and guarded like a trained fix;
        kept as the next version of the prompt set when the guard keeps it (and `save` is on)."""
        from .prompts import measure_prompts, prompts_after, save_prompt_set

        cfg = self.config
        cfg.check_plan()
        key = self.key(data)
        if self.store is not None and (hit := self.store.get(key)) is not None:
            return FixResult.from_dict(hit.payload)
        t0 = time.perf_counter()
        changes = cfg.prompt_changes
        out = measure_prompts(self.classifier, data, changes, margin=cfg.margin, min_gain=cfg.min_gain,
                              resamples=cfg.bootstrap, seed=cfg.seed, ctx=ctx)
        identity = _identity(self.classifier)
        result = FixResult(
            config=cfg.to_dict(), classifier=identity,
            data={"fingerprint": data.fingerprint(), "train": len(data.train), "targeted": 0,
                  "affected": len(data.affected), "rest": len(data.rest), "description": data.description},
            sources=[], trainable={"mode": "prompt", "trainable": 0, "total": 0}, training={},
            affected=out["affected"], rest=out["rest"], guard=out["guard"], saved=None, per_image=out["per_image"],
            prompts={"changes": changes, "before": dict(zip(changes, out["prompts_before"])), "set": cfg.prompt_set},
            manifest={"analysis": ANALYSIS, "analysis_version": VERSION, "nemo_version": __version__,
                      "created_at": time.time(), "classifier": identity, "mode": "prompt"},
            result_key=key)
        if cfg.save and out["guard"]["keep"]:
            entry = save_prompt_set(self.classifier, cfg.prompt_set, prompts_after(self.classifier, changes),
                                    {"changes": changes, "affected": out["affected"]["overall"],
                                     "rest": out["rest"]["overall"], "guard": out["guard"]["verdict"], "key": key})
            result.saved = {"name": entry["name"], "version": entry["version"]}
        elif cfg.save:
            result.notes.append("The guard did not keep the prompt, so no prompt set version was written.")
        result.timings = {"measuring": time.perf_counter() - t0, "total": time.perf_counter() - t0}
        if self.store is not None:
            self.store.put(key, STORE_KIND, result.to_dict())
        return result

    @staticmethod
    def _predict(module: Any, x: Any) -> np.ndarray:
        import torch

        was = module.training
        module.eval()
        with torch.no_grad():
            out = np.concatenate([module(x[s:s + 256]).float().argmax(1).cpu().numpy() for s in range(0, len(x), 256)])
        module.train(was)
        return out


# The module's registry entry, named by its entry point (pyproject.toml, nemo_desktop.analyses).
SPEC = AnalysisSpec(
    name=ANALYSIS, kind=KIND, version=VERSION, factory=FixAnalysis, config=FixConfig, result=FixResult,
    inputs=Inputs(classifier="required", editor="optional", generator="optional", data="dataset"),
    data_label="Fix folder (train/, affected/ and rest/, each with one sub-folder per class)",
    generator_renders_text=True,
    # Opened on its own (not from a finding), the page starts with the control that runs on a fix folder alone:
    # a plain augmentation of the training images of the folder's affected classes.
    page_defaults=(("data", "augment"),),
    description="Tries a fix for a finding: targeted data from the validated edit and/or a failure mode's sentence "
                "rendered by a text-to-image model (or a plain augmentation as the control), fine-tuning of the "
                "head, the last block, LoRA adapters or every weight with early stopping (keeping the original's "
                "outputs on its training data), then accuracy before and after on the finding's held-out images and "
                "on everything else with paired bootstrap intervals; a regression guard decides whether the fixed "
                "model is kept and saved as a new catalog entry. A zero-shot classifier (CLIP, SigLIP, open_clip) is "
                "fixed in mode prompt: the class prompts given are adopted, measured and guarded the same way, and "
                "a kept prompt becomes the next version of a prompt set.")

"""Settings of the fix loop (issue 29): which targeted data, which training mode, how it is stopped and judged.
Field metadata (label, help, min, max, choices) drives the CLI flags and the GUI form; `to_dict()` is what result
keys and the fixed model's lineage record."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ...base.errors import ConfigError

MODES = ("head", "last-block", "lora", "full", "prompt")
INTERPOLATIONS = ("none", "held-out")
DATA = ("edit", "augment", "none")
AUGMENTATIONS = ("colour-jitter", "grayscale", "blur", "flip")
PROMPT_FIELDS = ("prompts", "prompt_set")  # the settings of mode prompt alone


def _meta(label: str, help: str, **kw: Any) -> dict[str, Any]:  # noqa: A002 - the metadata key is "help"
    return {"label": label, "help": help, **kw}


def _names(text: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(n.strip() for n in str(text).split(",") if n.strip()))


@dataclass(frozen=True)
class FixConfig:
    data: str = field(default="edit", metadata=_meta(
        "Targeted data", "edit: the finding's validated edit applied with the editor to training images "
        "(counterfactual augmentation); augment: a plain augmentation of the same images instead (the control); "
        "none: the original training data only (a same-steps control).", choices=DATA))
    instruction: str = field(default="", metadata=_meta(
        "Edit that removes the cause", "The validated edit (e.g. SciTX's intervention). Applied to training images "
        "of the predicted (shortcut) classes: the same label, without the cause."))
    cue_instruction: str = field(default="", metadata=_meta(
        "Edit that adds the cause", "Optional: the edit that puts the cause into an image (e.g. 'Make the "
        "background dark blue'). Applied to training images of the affected classes, keeping their true labels: "
        "the cause no longer predicts the wrong class."))
    affected_classes: str = field(default="", metadata=_meta(
        "Affected classes", "The true classes of the images the finding covers (those the model gets wrong), "
        "separated by commas. Left empty with no predicted classes either: the classes of the fix folder's "
        "affected/ images."))
    predicted_classes: str = field(default="", metadata=_meta(
        "Predicted classes", "The classes the finding's images are wrongly taken for (where the cause pulls), "
        "separated by commas."))
    sentence: str = field(default="", metadata=_meta(
        "Failure mode's sentence", "Optional (edit fixes): the sentence rendered by the text-to-image generator "
        "into images labelled with the affected class it describes (Targeted images per class of them). Write "
        "{class} where the class name goes when several classes are affected."))
    augmentation: str = field(default="colour-jitter", metadata=_meta(
        "Plain augmentation", "The control's augmentation (data=augment).", choices=AUGMENTATIONS))
    per_class: int = field(default=200, metadata=_meta(
        "Targeted images per class", "Training images edited (or augmented) per affected or predicted class; "
        "images rendered per affected class from the sentence.",
        min=1, max=100000))
    mode: str = field(default="last-block", metadata=_meta(
        "Training mode", "last-block (the default): the head and the backbone's last block; full: every weight "
        "(the largest gains in the README's fix benchmark, a CNN trained from scratch; on a pretrained backbone "
        "lower the learning rate: 1e-3 is far above fine-tuning rates); lora: LoRA adapters on the backbone plus "
        "the head (peft); head: the classifier head alone (cheapest; measured to gain little and to cost the class "
        "that carried the cue); prompt: a zero-shot classifier (CLIP, SigLIP, open_clip) is fixed by adopting class "
        "prompts (Prompts to adopt), measured and guarded like a trained fix, and kept as the next version of a "
        "prompt set.", choices=MODES))
    prompts: str = field(default="", metadata=_meta(
        "Prompts to adopt", "mode prompt: the new class prompts, CLASS=TEXT, several separated by ';' (e.g. "
        "SciTX's prompt intervention: cat=a blurry photo of a cat)."))
    prompt_set: str = field(default="adopted", metadata=_meta(
        "Prompt set", "mode prompt: the named prompt set a kept prompt is saved to (a new version each time)."))
    lora_rank: int = field(default=4, metadata=_meta("LoRA rank", "Rank of the LoRA adapters.", min=1, max=256))
    preserve: float = field(default=10.0, metadata=_meta(
        "Preservation weight", "Weight of a distillation term that keeps the original model's outputs on the "
        "original training images (Learning without Forgetting: KL divergence at temperature 2); the targeted "
        "images are learnt from their labels alone. 0: labels only; 1 gains more but costs other classes more; "
        "20 costs them less but gains less; 10 (the default) is the balance measured in the README's fix "
        "benchmark.", min=0.0, max=100.0))
    interpolation: str = field(default="none", metadata=_meta(
        "Weight interpolation", "held-out: after training, the fixed weights are mixed with the original ones "
        "(WiSE-FT: original + a * (fixed - original)), a from 0, 0.1, ..., 1 chosen on the held-out split: the best "
        "on its targeted images among those that cost its original images at most the margin (the lower a on a "
        "tie); none: the trained weights as they are.", choices=INTERPOLATIONS))
    average_epochs: float = field(default=3.0, metadata=_meta(
        "Weight averaging (epochs)", "The fixed model is an exponential moving average of the trained weights over "
        "about this many epochs of steps (decay 1 - 1 / (epochs x steps per epoch)), from the first step on; early "
        "stopping judges the average. Measured in the README's fix benchmark at equal length: larger gains, fewer "
        "images lost per class, and the guard kept 20 of 20 fixes against 12 of 20 without it. 0: the trained "
        "weights as they are.",
        min=0.0, max=100.0))
    lr: float = field(default=1e-3, metadata=_meta("Learning rate", "Adam's learning rate.", min=1e-7, max=1.0))
    epochs: int = field(default=30, metadata=_meta("Epochs", "The most epochs trained.", min=1, max=1000))
    patience: int = field(default=3, metadata=_meta(
        "Early-stopping patience", "Epochs without a better held-out loss before training stops (0: never stop "
        "early, every epoch is trained).", min=0, max=1000))
    batch_size: int = field(default=64, metadata=_meta("Batch size", "Images per step.", min=1, max=4096))
    val_fraction: float = field(default=0.15, metadata=_meta(
        "Held-out split", "Share of the training data (original and targeted) kept out of training for early "
        "stopping.", min=0.02, max=0.5))
    margin: float = field(default=1.0, metadata=_meta(
        "Regression margin (points)", "The guard rejects a fix when accuracy on everything else drops by more "
        "than this many points.", min=0.0, max=100.0))
    min_gain: float = field(default=10.0, metadata=_meta(
        "Minimum gain (points)", "The guard keeps a fix only when the finding's images gain at least this many "
        "points (and the gain's 95% interval lies above zero). Extra training without the right targeted data "
        "(the same images unchanged, a wrong explanation's edits) gained up to +6.5 points in runs of the "
        "planted-shortcut world (issue 42), the right explanation +8 (the head alone) to +82; 10 (the default) "
        "separates them there. 0: any clear gain.", min=0.0, max=100.0))
    bootstrap: int = field(default=1000, metadata=_meta(
        "Bootstrap resamples", "Paired bootstrap resamples of the confidence intervals.", min=100, max=100000))
    seed: int = field(default=0, metadata=_meta("Seed", "Seeds the split, the edits, the order of training.",
                                                min=0, max=2**31 - 1))
    save: bool = field(default=True, metadata=_meta(
        "Save the fixed model", "Save the fixed model as a new user-catalog entry when the guard keeps it."))
    name: str = field(default="", metadata=_meta(
        "Name of the fixed model", "Catalog id of the fixed model (default: <base id>-fix-<key>)."))
    # A failure mode as the finding (from_mode.py): its images with their true labels join an edit fix's data.
    failure_modes: str = field(default="", metadata=_meta(
        "Failure-modes result", "Key of a stored failure-modes result one of whose failure modes is the finding: "
        "that mode's images, with their true labels from the reference index, join the training data (those "
        "that are also held-out images are left out)."))
    failure_mode: int = field(default=0, metadata=_meta(
        "Failure mode", "Which failure mode of that result: its position in the result's list (1 = the first, as "
        "the app's failure-mode picker lists them); 0: none.", min=0, max=1_000_000))

    def __post_init__(self) -> None:
        for name, allowed in (("data", DATA), ("mode", MODES), ("augmentation", AUGMENTATIONS),
                              ("interpolation", INTERPOLATIONS)):
            if getattr(self, name) not in allowed:
                raise ConfigError(f"Unknown {name} '{getattr(self, name)}'.", hint=f"Use one of: {', '.join(allowed)}.")
        from ...registry.params import check_range, config_params

        for param in config_params(type(self)):  # the registry's own range check (what the CLI and page enforce)
            check_range(param, getattr(self, param.name))

    def check_plan(self, finding: bool = False) -> None:
        """Refuse settings that cannot make targeted data (checked when the fix is built, not for the defaults).
        `finding`: a failure mode's own images are given (an edit fix may then have no edit)."""
        if self.mode == "prompt":
            if not self.prompt_changes:
                raise ConfigError("Adopting a prompt needs the prompt.",
                                  hint="Give the class prompts to adopt as CLASS=TEXT (--prompt CLASS=TEXT).")
            return
        if self.data == "edit" and not (self.instruction.strip() or self.cue_instruction.strip()
                                        or self.sentence.strip()) and not finding:
            raise ConfigError("Targeted data from an edit needs the edit.",
                              hint="Give the validated edit (--instruction) and/or the edit that adds the cause "
                                   "(--cue-instruction), a failure mode's sentence to render (--sentence with "
                                   "--generator), or choose --data augment for the control.")
        if self.data == "edit" and self.sentence.strip() and not self.affected:
            raise ConfigError("A rendered sentence is labelled with the affected class it describes; none was "
                              "given.", hint="Give --affected-classes.")
        if self.data == "edit" and self.instruction.strip() and not self.predicted:
            raise ConfigError("The edit that removes the cause is applied to training images of the predicted "
                              "classes; none were given.", hint="Give --predicted-classes.")
        if self.data != "none" and not (self.affected or self.predicted) and not finding:
            raise ConfigError("Targeted data needs the classes the finding concerns.",
                              hint="Give --affected-classes (and --predicted-classes).")

    @property
    def prompt_changes(self) -> dict[str, str]:
        """`prompts` as {class name: new prompt} (mode prompt)."""
        out: dict[str, str] = {}
        for item in (i.strip() for i in self.prompts.replace("\n", ";").split(";")):
            if not item:
                continue
            name, sep, text = item.partition("=")
            if not sep or not name.strip() or not text.strip():
                raise ConfigError(f"The prompt '{item}' is not CLASS=TEXT.", hint="Write it as CLASS=TEXT; separate "
                                                                                   "several with ';'.")
            out[name.strip()] = text.strip()
        return out

    @staticmethod
    def prompts_text(changes: dict[str, str]) -> str:
        """{class name: prompt} as the `prompts` setting."""
        return "; ".join(f"{k}={v}" for k, v in changes.items())

    @property
    def affected(self) -> tuple[str, ...]:
        return _names(self.affected_classes)

    @property
    def predicted(self) -> tuple[str, ...]:
        return _names(self.predicted_classes)

    @property
    def early_stopping(self) -> bool:
        return self.patience > 0

    def to_dict(self) -> dict[str, Any]:
        """The settings (in result keys and lineage); the prompt settings only in mode prompt, so the keys of the
        trained fixes stay those of the results stored before prompt adoption joined the fix (issue 41)."""
        skip = () if self.mode == "prompt" else PROMPT_FIELDS
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items() if k not in skip}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "FixConfig":
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items() if k in cls.__dataclass_fields__})

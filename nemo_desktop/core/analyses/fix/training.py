"""Training a fix: which weights move (head, last block, LoRA adapters, all), early stopping on a held-out split,
seeded, with a checkpoint after every epoch so that a killed or cancelled fix resumes where it stopped.

    module, trainable = prepare(copy_of_the_model, "lora", rank=4)
    record = train(module, trainable, x, y, config, checkpoint=path, ctx=ctx)

The model is always a copy: the classifier the user loaded is never changed. LoRA (peft) adapters are merged into
the weights at the end, so the fixed model has the base architecture and loads like the original. Backbone
normalisation statistics stay frozen (eval mode) unless every weight is trained.

Keeping the rest of the model's behaviour (the guard's "everything else"): two standard tools, both settings.
`preserve` adds Learning without Forgetting's distillation term (Li & Hoiem, 2017): on the ORIGINAL training
images the copy is pulled towards the original model's softened outputs (KL at temperature 2), while the targeted
images are learnt from their labels alone (the original model is wrong on exactly those). `interpolation`
"held-out" is WiSE-FT (Wortsman et al., 2022): the trained weights are mixed with the original ones and the mixing
chosen on the early-stopping split by the guard's rule (never on the data the fix is measured on).

Which weights are kept: `average_epochs` (default 3) keeps an exponential moving average of what trains (the EMA
timm's training scripts keep of a whole model, here of the trainable weights and buffers only), over about
that many epochs of steps; early stopping judges the average, and the average is the fixed model. Measured in
the README's fix benchmark on two worlds: larger gains and fewer clean images lost per class than the last step's
weights, which move with every batch.
"""
from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ...base.errors import ConfigError
from ...base.job_context import JobContext
from ...training import Checkpoint, TrainingLoop, WeightAverage
from ...training.average import host_copy, trained_state
from .config import FixConfig

TEMPERATURE = 2.0  # LwF's distillation temperature
MIXES = tuple(i / 10 for i in range(11))  # WiSE-FT's mixing coefficients tried on the held-out split


def _has_params(m: Any) -> bool:
    return any(p.numel() for p in m.parameters())


def head_name(model: Any) -> str:
    """The name of the classifier head (timm's get_classifier(), else head / fc / classifier)."""
    if hasattr(model, "get_classifier"):
        head = model.get_classifier()
        for name, m in model.named_modules():
            if m is head and name and _has_params(m):
                return name
    for name in ("head", "fc", "classifier"):
        m = getattr(model, name, None)
        if m is not None and hasattr(m, "parameters") and _has_params(m):
            return name
    raise ConfigError(f"Cannot find the classifier head of {type(model).__name__}.",
                      hint="The model needs get_classifier() (timm) or a head / fc / classifier module.")


def last_block_name(model: Any, head: str) -> str:
    """The backbone's last block: the last child with weights of blocks / stages / layers / features (layer4 for
    ResNets), else the last top-level module with weights before the head."""
    if getattr(model, "layer4", None) is not None:
        return "layer4"
    for name in ("blocks", "stages", "layers", "features"):
        container = getattr(model, name, None)
        if container is None or not hasattr(container, "named_children"):
            continue
        kids = [n for n, c in container.named_children() if _has_params(c)]
        if kids:
            return f"{name}.{kids[-1]}"
    tops = [n for n, c in model.named_children() if _has_params(c) and n != head.split(".")[0]]
    if not tops:
        raise ConfigError(f"{type(model).__name__} has no backbone block to train besides its head.")
    return tops[-1]


def _lora_targets(model: Any, head: str) -> list[str]:
    import torch

    kinds = (torch.nn.Linear, torch.nn.Conv2d, torch.nn.Conv1d)
    out = [n for n, m in model.named_modules() if isinstance(m, kinds) and not (n == head or n.startswith(head + "."))]
    if not out:
        raise ConfigError(f"{type(model).__name__} has no linear or convolution layer for LoRA adapters.",
                          hint="Use --mode head or last-block.")
    return out


def prepare(model: Any, mode: str, lora_rank: int = 4) -> tuple[Any, dict[str, Any]]:
    """(the module to train, what moves: {"mode", "head", "block", "lora_targets", "trainable", "total"})."""
    head = head_name(model)
    info: dict[str, Any] = {"mode": mode, "head": head}
    for p in model.parameters():
        p.requires_grad_(mode == "full")
    if mode in ("head", "last-block"):
        model.get_submodule(head).requires_grad_(True)
        if mode == "last-block":
            info["block"] = last_block_name(model, head)
            model.get_submodule(info["block"]).requires_grad_(True)
    elif mode == "lora":
        try:
            from peft import LoraConfig, get_peft_model
        except ImportError:
            raise ConfigError("LoRA needs the peft package.", hint="pip install 'nemo-desktop[fix]' (or peft), or "
                                                                   "use --mode head / last-block.") from None
        targets = _lora_targets(model, head)
        info["lora_targets"] = len(targets)
        cfg = LoraConfig(r=lora_rank, lora_alpha=2 * lora_rank, lora_dropout=0.0, target_modules=targets,
                         modules_to_save=[head])
        model = get_peft_model(model, cfg)
    elif mode != "full":
        raise ConfigError(f"Unknown training mode '{mode}'.")
    info["trainable"] = int(sum(p.numel() for p in model.parameters() if p.requires_grad))
    info["total"] = int(sum(p.numel() for p in model.parameters()))
    return model, info


def finish(module: Any, mode: str) -> Any:
    """The trained module as a plain model of the base architecture (LoRA merged), in eval mode."""
    if mode == "lora":
        module = module.merge_and_unload()
    for p in module.parameters():
        p.requires_grad_(False)
    return module.eval()


@dataclass
class TrainingRecord:
    epochs: int = 0  # epochs trained
    steps: int = 0  # optimizer steps
    best_epoch: int = 0
    stopped_early: bool = False
    resumed_from_epoch: int | None = None  # the checkpoint's epoch when this run resumed
    seconds: float = 0.0
    history: list[dict[str, float]] = field(default_factory=list)  # per epoch: train_loss, val_loss, val_accuracy
    n_train: int = 0
    n_val: int = 0
    average_decay: float | None = None  # the weight average's EMA decay per step; None: the trained weights
    notes: list[str] = field(default_factory=list)  # e.g. a checkpoint of an older version was not resumed

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _loss(out: Any, y: Any, teacher: Any, original: Any, weight: float, reduction: str = "mean") -> Any:
    """Cross-entropy on every image plus `weight` x the distillation term on the original images (summed over
    them with reduction "sum"; averaged over the batch otherwise, so a batch of targeted images adds none)."""
    import torch.nn.functional as F

    loss = F.cross_entropy(out, y, reduction=reduction)
    if weight > 0 and teacher is not None and bool(original.any()):
        t = TEMPERATURE
        kl = F.kl_div(F.log_softmax(out[original] / t, 1), F.softmax(teacher[original] / t, 1),
                      reduction="sum") * t * t
        loss = loss + weight * (kl if reduction == "sum" else kl / len(y))
    return loss


def _evaluate(module: Any, x: Any, y: Any, batch: int, teacher: Any = None, original: Any = None,
              weight: float = 0.0) -> tuple[float, float]:
    """(the training objective per image, accuracy) on a held-out split."""
    import torch

    if len(y) == 0:
        return float("nan"), float("nan")
    loss, correct = 0.0, 0
    with torch.no_grad():
        for s in range(0, len(y), batch):
            out = module(x[s:s + batch]).float()
            sl = slice(s, s + batch)
            loss += float(_loss(out, y[sl], None if teacher is None else teacher[sl],
                                None if original is None else original[sl], weight, reduction="sum"))
            correct += int((out.argmax(1) == y[sl]).sum())
    return loss / len(y), correct / len(y)


def split(n: int, config: FixConfig) -> tuple[Any, Any]:
    """(held-out rows, training rows) of n images, seeded: the early-stopping split (and WiSE-FT's)."""
    import torch

    perm = torch.randperm(n, generator=torch.Generator().manual_seed(config.seed))
    n_val = max(1, int(round(n * config.val_fraction)))
    if n - n_val < 1:
        raise ConfigError("Too few training images to keep a held-out split.")
    return perm[:n_val], perm[n_val:]


def teacher_logits(model: Any, x: Any, batch: int = 256) -> Any:
    """The original model's logits on every training image (eval mode, no gradient): the distillation targets."""
    import torch

    was = model.training
    model.eval()
    with torch.no_grad():
        out = torch.cat([model(x[s:s + batch]).float() for s in range(0, len(x), batch)])
    model.train(was)
    return out


def interpolate(fixed: Any, base: Any, x: Any, y: Any, config: FixConfig, *, original: Any,
                ctx: JobContext | None = None) -> tuple[Any, dict[str, Any]]:
    """WiSE-FT: `fixed` (a plain model of the base architecture) with its weights set to base + a * (fixed - base),
    a in MIXES chosen on the early-stopping split by the guard's own rule: the most accurate on the held-out
    targeted images among the mixes whose held-out original images lose at most `margin` points against the
    original weights (a = 0); on a tie the lower a (the smallest move from the original that gets the gain)."""
    import torch

    base_state = base.state_dict()
    fixed_state = {k: v.detach().clone() for k, v in fixed.state_dict().items()}
    val, _ = split(len(y), config)
    val = val.to(y.device)
    xv, yv, ov = x[val], y[val], original[val]
    rows = []
    for i, a in enumerate(MIXES):
        if ctx is not None:
            ctx.check_cancelled()
            ctx.progress("Choosing the weight mix", i, len(MIXES))
        fixed.load_state_dict(_mix(base_state, fixed_state, a))
        with torch.no_grad():
            pred = torch.cat([fixed.eval()(xv[s:s + 256]).float().argmax(1) for s in range(0, len(yv), 256)])
        right = (pred == yv).float()
        rows.append({"mix": a, "original_accuracy": _mean(right[ov]), "targeted_accuracy": _mean(right[~ov])})
    floor = rows[0]["original_accuracy"] - config.margin / 100
    allowed = [r for r in rows if r["original_accuracy"] >= floor - 1e-9] or rows[:1]
    best = max(allowed, key=lambda r: (round(r["targeted_accuracy"], 9), -r["mix"]))
    fixed.load_state_dict(_mix(base_state, fixed_state, best["mix"]))
    return fixed.eval(), {"mix": best["mix"], "tried": rows, "n_original": int(ov.sum()),
                          "n_targeted": int((~ov).sum())}


def _mean(v: Any) -> float:
    return float(v.mean()) if len(v) else 1.0


def _mix(base: dict[str, Any], fixed: dict[str, Any], a: float) -> dict[str, Any]:
    out = {}
    for k, v in fixed.items():
        b = base[k].to(v.device)
        out[k] = (b + a * (v - b)).to(v.dtype) if v.is_floating_point() else (v if a >= 0.5 else b)
    return out


def train(module: Any, x: Any, y: Any, config: FixConfig, *, checkpoint: Path | None, key: str,
          ctx: JobContext, teacher: Any = None, original: Any = None) -> TrainingRecord:
    """Train `module` on (x, y) (x: a tensor or Pixels, whose batches are on the module's device; y on that device)
    with a seeded held-out split for early stopping, in the core's training loop (core/training).
    The best epoch's weights (by held-out objective) are kept; with patience 0 every epoch is trained and the last
    kept. `teacher`: the original model's logits on x, distilled (weight config.preserve) on the rows where
    `original` is True. `checkpoint`: the .safetensors file written after every epoch and resumed from when it
    belongs to the same `key` (the torch file an older version wrote next to it is refused with a note)."""
    import torch

    start = time.perf_counter()
    n = len(y)
    val_idx, tr_idx = split(n, config)
    n_val = len(val_idx)
    val_idx, tr_idx = val_idx.to(y.device), tr_idx.to(y.device)
    xv, yv = x[val_idx], y[val_idx]
    weight = config.preserve if teacher is not None else 0.0
    tv = None if teacher is None else teacher[val_idx]
    ov = None if original is None else original[val_idx]
    params = [p for p in module.parameters() if p.requires_grad]
    steps_per_epoch = (len(tr_idx) + config.batch_size - 1) // config.batch_size
    average = WeightAverage(config.average_epochs * steps_per_epoch) if config.average_epochs > 0 else None
    ck = None if checkpoint is None else Checkpoint(checkpoint, key, older=[checkpoint.with_suffix(".pt")])
    module.eval()  # backbone statistics frozen; every weight moves only in "full" mode, which trains BN too
    loop = TrainingLoop(module, torch.optim.Adam(params, lr=config.lr), epochs=config.epochs,
                        batch_size=config.batch_size, shuffle_seed=lambda epoch: config.seed + epoch, stage="Training",
                        checkpoint=ck, average=average, train_mode=config.mode == "full")
    resumed = loop.resume()
    state = {"best_loss": float("inf"), "bad": 0, "best_epoch": 0, **loop.extra}  # JSON has no inf: None for it

    def loss_of(idx: Any) -> Any:
        return _loss(module(x[idx]).float(), y[idx], None if teacher is None else teacher[idx],
                     None if original is None else original[idx], weight)

    def end_epoch(entry: dict[str, Any]) -> bool:
        best = float("inf") if state["best_loss"] is None else state["best_loss"]
        with average.applied(module) if average is not None else nullcontext():  # early stopping judges the average
            val_loss, val_acc = _evaluate(module, xv, yv, config.batch_size, tv, ov, weight)
            improved = val_loss < best - 1e-6
            if improved:
                state["best_loss"], state["best_epoch"] = val_loss, entry["epoch"]
                loop.extra_tensors = {f"best.{k}": v for k, v in host_copy(trained_state(module)).items()}
        state["bad"] = 0 if improved else state["bad"] + 1
        entry.update(val_loss=val_loss, val_accuracy=val_acc)
        loop.extra = {**state, "best_loss": None if state["best_loss"] == float("inf") else state["best_loss"]}
        return state["bad"] >= config.patience > 0

    loop.run(tr_idx, loss_of, ctx, end_epoch=end_epoch)
    record = TrainingRecord(epochs=loop.epoch, steps=loop.steps, best_epoch=state["best_epoch"],
                            stopped_early=loop.stopped and loop.epoch < config.epochs,
                            resumed_from_epoch=loop.resumed_from if resumed else None, history=loop.history,
                            n_train=n - n_val, n_val=n_val, average_decay=None if average is None else average.decay,
                            notes=loop.notes)
    best_state = {k[5:]: v for k, v in loop.extra_tensors.items() if k.startswith("best.")}
    if config.early_stopping and best_state:
        module.load_state_dict(best_state, strict=False)
    else:
        if average is not None and average.values is not None:
            module.load_state_dict(average.values, strict=False)
        record.best_epoch = record.epochs
    record.seconds = time.perf_counter() - start
    return record


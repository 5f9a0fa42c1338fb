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

import os
import time
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ...base.errors import ConfigError
from ...base.job_context import JobContext
from .config import FixConfig

CHECKPOINT_VERSION = 3  # 3: the weight average
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _trained(module: Any) -> dict[str, Any]:
    """The trainable weights and every buffer (normalisation statistics), live on the module's device: what
    training can change."""
    params = dict(module.named_parameters())
    return {k: v for k, v in module.state_dict(keep_vars=True).items() if k not in params or params[k].requires_grad}


def _state(module: Any) -> dict[str, Any]:
    """A host copy of what training can change."""
    return {k: v.detach().cpu().clone() for k, v in _trained(module).items()}


class _Average:
    """Exponential moving average of what training changes (`_trained`: the trainable weights and the buffers, so
    that "full" mode's normalisation statistics are averaged too), from the first step's values on, kept on the
    module's device. Only what trains is averaged: a head or last-block fix of a large backbone keeps no second
    copy of the frozen weights and averages none of them per step. decay = 1 - 1/horizon: each step moves the
    average 1/horizon of the way to the current values (the EMA of torch's get_ema_multi_avg_fn)."""

    def __init__(self, horizon_steps: float):
        self.decay = 1.0 - 1.0 / max(1.0, horizon_steps)
        self.values: dict[str, Any] | None = None

    def update(self, module: Any) -> None:
        import torch

        with torch.no_grad():
            live = _trained(module)
            if self.values is None:
                self.values = {k: v.detach().clone() for k, v in live.items()}
                return
            for k, v in live.items():
                avg = self.values[k]
                if avg.is_floating_point():
                    avg.lerp_(v.detach(), 1.0 - self.decay)
                else:
                    avg.copy_(v)  # counters (num_batches_tracked): the latest

    def load(self, values: dict[str, Any] | None, module: Any) -> None:
        live = _trained(module)
        self.values = None if values is None else {k: v.to(live[k].device) for k, v in values.items()}

    def host(self) -> dict[str, Any] | None:
        return None if self.values is None else {k: v.detach().cpu().clone() for k, v in self.values.items()}

    @contextmanager
    def applied(self, module: Any):
        """The module with the average in place of its weights; its own weights back afterwards."""
        live = {k: v.detach().clone() for k, v in _trained(module).items()}
        module.load_state_dict(self.values, strict=False)
        try:
            yield module
        finally:
            module.load_state_dict(live, strict=False)


def _save_checkpoint(path: Path, data: dict[str, Any]) -> None:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(data, tmp)
    os.replace(tmp, path)  # atomic: a kill leaves the previous checkpoint or the new one, never half of one


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
    with a seeded held-out split for early stopping.
    The best epoch's weights (by held-out objective) are kept; with patience 0 every epoch is trained and the last
    kept. `teacher`: the original model's logits on x, distilled (weight config.preserve) on the rows where
    `original` is True. `checkpoint`: written after every epoch and read back when it belongs to the same `key`."""
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
    opt = torch.optim.Adam(params, lr=config.lr)
    steps_per_epoch = (len(tr_idx) + config.batch_size - 1) // config.batch_size
    average = _Average(config.average_epochs * steps_per_epoch) if config.average_epochs > 0 else None
    record = TrainingRecord(n_train=n - n_val, n_val=n_val,
                            average_decay=None if average is None else average.decay)
    best_loss, bad, best_state, first = float("inf"), 0, None, 1
    if checkpoint is not None and checkpoint.is_file():
        ck = torch.load(checkpoint, map_location="cpu", weights_only=True)
        if ck.get("key") == key and ck.get("version") == CHECKPOINT_VERSION:
            module.load_state_dict(ck["state"], strict=False)
            opt.load_state_dict(ck["optimizer"])
            if average is not None:
                average.load(ck["average"], module)
            best_loss, bad, best_state = ck["best_loss"], ck["bad"], ck["best_state"]
            record = TrainingRecord(**{**ck["record"], "resumed_from_epoch": ck["record"]["epochs"]})
            first = record.epochs + 1
    module.eval()  # backbone statistics frozen; every weight moves only in "full" mode, which trains BN too
    train_mode = config.mode == "full"
    total = config.epochs * steps_per_epoch
    stop = bad >= config.patience > 0
    for epoch in range(first, config.epochs + 1):
        if stop:
            break
        module.train(train_mode)
        order = tr_idx[torch.randperm(len(tr_idx), generator=torch.Generator().manual_seed(config.seed + epoch))
                       .to(tr_idx.device)]
        running = 0.0
        for s in range(0, len(order), config.batch_size):
            ctx.check_cancelled()
            idx = order[s:s + config.batch_size]
            opt.zero_grad()
            loss = _loss(module(x[idx]).float(), y[idx], None if teacher is None else teacher[idx],
                         None if original is None else original[idx], weight)
            loss.backward()
            opt.step()
            if average is not None:
                average.update(module)
            running += float(loss.detach()) * len(idx)
            record.steps += 1
            ctx.progress("Training", record.steps, total)
        module.eval()
        with nullcontext() if average is None else average.applied(module):  # early stopping judges the average
            val_loss, val_acc = _evaluate(module, xv, yv, config.batch_size, tv, ov, weight)
            improved = val_loss < best_loss - 1e-6
            if improved:
                best_loss, record.best_epoch, best_state = val_loss, epoch, _state(module)
        bad = 0 if improved else bad + 1
        record.history.append({"epoch": epoch, "train_loss": running / len(order), "val_loss": val_loss,
                               "val_accuracy": val_acc})
        record.epochs = epoch
        stop = bad >= config.patience > 0
        record.stopped_early = stop and epoch < config.epochs
        if checkpoint is not None:
            _save_checkpoint(checkpoint, {"version": CHECKPOINT_VERSION, "key": key, "state": _state(module),
                                          "optimizer": opt.state_dict(), "best_loss": best_loss, "bad": bad,
                                          "best_state": best_state, "record": record.to_dict(),
                                          "average": None if average is None else average.host()})
    if config.early_stopping and best_state is not None:
        module.load_state_dict(best_state, strict=False)
    else:
        if average is not None and average.values is not None:
            module.load_state_dict(average.values, strict=False)
        record.best_epoch = record.epochs
    record.seconds = time.perf_counter() - start
    return record

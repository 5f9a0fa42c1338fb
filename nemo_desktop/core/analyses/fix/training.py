"""Training a fix: which weights move (head, last block, LoRA adapters, all), early stopping on a held-out split,
seeded, with a checkpoint after every epoch so that a killed or cancelled fix resumes where it stopped.

    module, trainable = prepare(copy_of_the_model, "lora", rank=4)
    record = train(module, trainable, x, y, config, checkpoint=path, ctx=ctx)

The model is always a copy: the classifier the user loaded is never changed. LoRA (peft) adapters are merged into
the weights at the end, so the fixed model has the base architecture and loads like the original. Backbone
normalisation statistics stay frozen (eval mode) unless every weight is trained.
"""
from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ...jobs import JobContext
from .config import FixConfig

CHECKPOINT_VERSION = 1


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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _state(module: Any) -> dict[str, Any]:
    """The trainable weights and every buffer (normalisation statistics): what training can change."""
    params = dict(module.named_parameters())
    return {k: v.detach().cpu().clone() for k, v in module.state_dict().items()
            if k not in params or params[k].requires_grad}


def _save_checkpoint(path: Path, data: dict[str, Any]) -> None:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(data, tmp)
    os.replace(tmp, path)  # atomic: a kill leaves the previous checkpoint or the new one, never half of one


def _evaluate(module: Any, x: Any, y: Any, batch: int) -> tuple[float, float]:
    import torch

    if len(y) == 0:
        return float("nan"), float("nan")
    loss, correct = 0.0, 0
    with torch.no_grad():
        for s in range(0, len(y), batch):
            out = module(x[s:s + batch]).float()
            loss += float(torch.nn.functional.cross_entropy(out, y[s:s + batch], reduction="sum"))
            correct += int((out.argmax(1) == y[s:s + batch]).sum())
    return loss / len(y), correct / len(y)


def train(module: Any, x: Any, y: Any, config: FixConfig, *, checkpoint: Path | None, key: str,
          ctx: JobContext) -> TrainingRecord:
    """Train `module` on (x, y) (tensors on the module's device) with a seeded held-out split for early stopping.
    The best epoch's weights (by held-out loss) are kept; with patience 0 every epoch is trained and the last kept.
    `checkpoint`: written after every epoch and read back when it belongs to the same `key` (resume)."""
    import torch

    start = time.perf_counter()
    n = len(y)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(config.seed))
    n_val = max(1, int(round(n * config.val_fraction)))
    if n - n_val < 1:
        raise ConfigError("Too few training images to keep a held-out split.")
    val_idx, tr_idx = perm[:n_val].to(y.device), perm[n_val:].to(y.device)
    xv, yv = x[val_idx], y[val_idx]
    params = [p for p in module.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=config.lr)
    record = TrainingRecord(n_train=n - n_val, n_val=n_val)
    best_loss, bad, best_state, first = float("inf"), 0, None, 1
    if checkpoint is not None and checkpoint.is_file():
        ck = torch.load(checkpoint, map_location="cpu", weights_only=True)
        if ck.get("key") == key and ck.get("version") == CHECKPOINT_VERSION:
            module.load_state_dict(ck["state"], strict=False)
            opt.load_state_dict(ck["optimizer"])
            best_loss, bad, best_state = ck["best_loss"], ck["bad"], ck["best_state"]
            record = TrainingRecord(**{**ck["record"], "resumed_from_epoch": ck["record"]["epochs"]})
            first = record.epochs + 1
    module.eval()  # backbone statistics frozen; every weight moves only in "full" mode, which trains BN too
    train_mode = config.mode == "full"
    total = config.epochs * ((len(tr_idx) + config.batch_size - 1) // config.batch_size)
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
            loss = torch.nn.functional.cross_entropy(module(x[idx]).float(), y[idx])
            loss.backward()
            opt.step()
            running += float(loss.detach()) * len(idx)
            record.steps += 1
            ctx.progress("Training", record.steps, total)
        module.eval()
        val_loss, val_acc = _evaluate(module, xv, yv, config.batch_size)
        record.history.append({"epoch": epoch, "train_loss": running / len(order), "val_loss": val_loss,
                               "val_accuracy": val_acc})
        record.epochs = epoch
        if val_loss < best_loss - 1e-6:
            best_loss, bad, record.best_epoch = val_loss, 0, epoch
            best_state = _state(module)
        else:
            bad += 1
        stop = bad >= config.patience > 0
        record.stopped_early = stop and epoch < config.epochs
        if checkpoint is not None:
            _save_checkpoint(checkpoint, {"version": CHECKPOINT_VERSION, "key": key, "state": _state(module),
                                          "optimizer": opt.state_dict(), "best_loss": best_loss, "bad": bad,
                                          "best_state": best_state, "record": record.to_dict()})
    if config.early_stopping and best_state is not None:
        module.load_state_dict(best_state, strict=False)
    else:
        record.best_epoch = record.epochs
    record.seconds = time.perf_counter() - start
    return record

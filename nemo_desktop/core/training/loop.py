"""The training loop shared by the fix and the competency estimator (package docstring).

Resuming gives the weights of an uninterrupted run: the batch order of every epoch is drawn from its own seed
(`shuffle_seed(epoch)`), and a checkpoint after every epoch holds the trained weights, the optimizer's state, the
weight average, torch's CPU random state and the caller's own state (`extra`, `extra_tensors`, e.g. the best
epoch's weights for early stopping). A cancel is checked before every batch and leaves the last epoch's checkpoint.
"""
from __future__ import annotations

from typing import Any, Callable

from ..base.job_context import JobContext
from .average import WeightAverage, host_copy, trained_state
from .checkpoint import Checkpoint


class TrainingLoop:
    def __init__(self, module: Any, optimizer: Any, *, epochs: int, batch_size: int,
                 shuffle_seed: Callable[[int], int], stage: str, checkpoint: Checkpoint | None = None,
                 average: WeightAverage | None = None, train_mode: bool = True):
        self.module, self.optimizer, self.checkpoint, self.average = module, optimizer, checkpoint, average
        self.epochs, self.batch_size, self.shuffle_seed, self.stage = epochs, batch_size, shuffle_seed, stage
        self.train_mode = train_mode  # False: the module trains in eval mode (frozen normalisation statistics)
        self.epoch = 0  # epochs finished
        self.steps = 0  # optimizer steps taken
        self.history: list[dict[str, Any]] = []  # per epoch: {"epoch", "train_loss", ... what end_epoch adds}
        self.resumed_from: int | None = None  # the checkpoint's epoch when this run resumed
        self.stopped = False  # end_epoch asked to stop (early stopping)
        self.extra: dict[str, Any] = {}  # the caller's JSON-ready state, checkpointed with the loop's
        self.extra_tensors: dict[str, Any] = {}  # the caller's tensors (host copies), checkpointed too
        self._rng: Any = None  # torch's CPU random state at the resumed checkpoint (dropout draws from it)

    @property
    def notes(self) -> list[str]:
        """Why a checkpoint that was found was not resumed (older version, damaged), in words."""
        return [] if self.checkpoint is None else list(self.checkpoint.notes)

    def resume(self) -> bool:
        """Load the last checkpoint of the same run (same key); True when there was one."""
        loaded = None if self.checkpoint is None else self.checkpoint.load()
        if loaded is None:
            return False
        tensors, state = loaded
        parts: dict[str, dict[str, Any]] = {}
        for name, t in tensors.items():
            part, rest = name.split(".", 1)
            parts.setdefault(part, {})[rest] = t
        self.module.load_state_dict(parts.get("model", {}), strict=False)
        groups = self.optimizer.state_dict()["param_groups"]
        opt_state: dict[int, dict[str, Any]] = {}
        for name, t in parts.get("opt", {}).items():
            i, what = name.split(".", 1)
            opt_state.setdefault(int(i), {})[what] = t
        self.optimizer.load_state_dict({"state": opt_state, "param_groups": groups})
        if self.average is not None:
            self.average.load(parts.get("avg") if state["averaged"] else None, self.module)
        self._rng = parts.get("rng", {}).get("cpu")  # set when run() starts: nothing between may draw from it
        self.extra_tensors = parts.get("extra", {})
        self.epoch, self.steps = int(state["epochs_done"]), int(state["steps"])
        self.history, self.extra, self.stopped = list(state["history"]), dict(state["extra"]), bool(state["stopped"])
        self.resumed_from = self.epoch
        return True

    def run(self, rows: Any, loss_of: Callable[[Any], Any], ctx: JobContext, *,
            end_epoch: Callable[[dict[str, Any]], bool] | None = None) -> None:
        """Train the epochs not yet finished on `rows` (a 1-D index tensor, shuffled per epoch; batches of it go to
        `loss_of`, which returns the batch's mean loss). `end_epoch(entry)` runs after each epoch with the module in
        eval mode; it may add to the history entry, update `extra` / `extra_tensors`, and return True to stop."""
        import torch

        if self._rng is not None:
            torch.set_rng_state(self._rng)
            self._rng = None
        per_epoch = (len(rows) + self.batch_size - 1) // self.batch_size
        total = self.epochs * per_epoch
        for epoch in range(self.epoch + 1, self.epochs + 1):
            if self.stopped:
                break
            self.module.train(self.train_mode)
            perm = torch.randperm(len(rows), generator=torch.Generator().manual_seed(self.shuffle_seed(epoch)))
            order = rows[perm.to(rows.device)]
            running = 0.0
            for s in range(0, len(order), self.batch_size):
                ctx.check_cancelled()
                idx = order[s:s + self.batch_size]
                self.optimizer.zero_grad()
                loss = loss_of(idx)
                loss.backward()
                self.optimizer.step()
                if self.average is not None:
                    self.average.update(self.module)
                value = float(loss.detach())
                running += value * len(idx)
                self.steps += 1
                ctx.progress(self.stage, self.steps, total, message=f"epoch {epoch}/{self.epochs}, loss {value:.5f}")
            self.module.eval()
            entry: dict[str, Any] = {"epoch": epoch, "train_loss": running / max(1, len(order))}
            self.stopped = bool(end_epoch(entry)) if end_epoch is not None else False
            self.history.append(entry)
            self.epoch = epoch
            self.save()
        self.module.eval()

    def save(self) -> None:
        import torch

        if self.checkpoint is None:
            return
        tensors = {f"model.{k}": v for k, v in host_copy(trained_state(self.module)).items()}
        for i, state in self.optimizer.state_dict()["state"].items():
            for name, t in state.items():
                tensors[f"opt.{i}.{name}"] = torch.as_tensor(t).detach().cpu().clone()
        averaged = self.average is not None and self.average.values is not None
        if averaged:
            tensors.update({f"avg.{k}": v for k, v in self.average.host().items()})
        tensors.update({f"extra.{k}": v for k, v in self.extra_tensors.items()})
        tensors["rng.cpu"] = torch.get_rng_state()
        self.checkpoint.save(tensors, {"epochs_done": self.epoch, "steps": self.steps, "history": self.history,
                                       "extra": self.extra, "stopped": self.stopped, "averaged": averaged})

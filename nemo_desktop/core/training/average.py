"""The exponential moving average of what training changes, and which tensors that is."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any


def trained_state(module: Any) -> dict[str, Any]:
    """The trainable weights and every buffer (normalisation statistics), live on the module's device: what
    training can change, and so what a checkpoint keeps and the average follows."""
    params = dict(module.named_parameters())
    return {k: v for k, v in module.state_dict(keep_vars=True).items() if k not in params or params[k].requires_grad}


def host_copy(state: dict[str, Any]) -> dict[str, Any]:
    return {k: v.detach().cpu().clone().contiguous() for k, v in state.items()}


class WeightAverage:
    """Exponential moving average of `trained_state` (the trainable weights and the buffers, so that a fully
    trained model's normalisation statistics are averaged too), from the first step's values on, kept on the
    module's device. Only what trains is averaged: a head fix of a large backbone keeps no second copy of the frozen
    weights. decay = 1 - 1/horizon: each step keeps `decay` of the average and moves it 1/horizon of the way to the
    current values (the EMA of torch's get_ema_multi_avg_fn; timm's model EMA)."""

    def __init__(self, horizon_steps: float):
        self.decay = 1.0 - 1.0 / max(1.0, horizon_steps)
        self.values: dict[str, Any] | None = None

    def update(self, module: Any) -> None:
        import torch

        with torch.no_grad():
            live = trained_state(module)
            if self.values is None:
                self.values = {k: v.detach().clone() for k, v in live.items()}
                return
            for k, v in live.items():
                avg = self.values[k]
                if avg.is_floating_point():
                    avg.lerp_(v.detach(), 1.0 - self.decay)  # decay x average + (1 - decay) x current
                else:
                    avg.copy_(v)  # counters (num_batches_tracked): the latest

    def load(self, values: dict[str, Any] | None, module: Any) -> None:
        live = trained_state(module)
        self.values = None if values is None else {k: v.to(live[k].device, live[k].dtype) for k, v in values.items()}

    def host(self) -> dict[str, Any] | None:
        return None if self.values is None else host_copy(self.values)

    @contextmanager
    def applied(self, module: Any):
        """The module with the average in place of its weights; its own weights back afterwards."""
        if self.values is None:
            yield module
            return
        live = {k: v.detach().clone() for k, v in trained_state(module).items()}
        module.load_state_dict(self.values, strict=False)
        try:
            yield module
        finally:
            module.load_state_dict(live, strict=False)

"""The five high-competency counterfactual generators of the seed (section 3.1).

    IGD   X' from X by Adam on  -rho(X') + gamma * d(X, X')           d = LPIPS (or l2 / l1)
    FGD   X' from X by Adam on  -rho(X') + gamma * d(f(X), f(X'))     d = -cos (or l2 / l1)
    Reco  X' = h(g(X))
    LGD   z' from g(X) by Adam on  -rho(h(z')) + gamma * d(z, z');  X' = h(z')
    LNN   X' = h(z_nn), z_nn the bank latent nearest to g(X) (l1), bank = calibration images with rho >= tau

Each iteration first tests the stopping rule, then steps (as the reference). By default an image is frozen
as soon as it reaches the threshold and values stay in [0, 1]; `compatibility=True` reproduces the
reference instead (the batch stops only when every image passes; no clamping). Progress is reported per
iteration and cancellation checked before each. LGD starts from z' = g(X): by default its first iteration scores
h(g(X)), which is Reco, so where Reco already passes LGD takes no step and returns exactly Reco. In compatibility
mode the first iteration scores the original X, as the reference does (its X_new starts at X), so h(g(X)) is
scored only after the first step; that step sees only the distance term, whose cosine gradient at z' = z is zero,
so there too LGD returns Reco where Reco passes, one step later.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from ...base.errors import NemoError
from ...base.job_context import JobContext
from .config import CounterfactualConfig
from .estimator import FittedEstimator, resize

Distance = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # per-image distances (N,)


@dataclass
class Generated:
    images: torch.Tensor  # (N, 3, H, W) in [0, 1] (unless compatibility mode left them out of range)
    iterations: list[int]  # gradient steps taken per image (0 for Reco / LNN)


def vector_distance(kind: str) -> Distance:
    if kind == "cos":
        return lambda a, b: -F.cosine_similarity(a.flatten(1), b.flatten(1), dim=1)
    if kind == "l2":
        return lambda a, b: (a - b).flatten(1).norm(dim=1)
    if kind == "l1":
        return lambda a, b: (a - b).flatten(1).abs().sum(dim=1)
    raise ValueError(f"unknown distance {kind!r}")


def pixel_distance(kind: str) -> Distance:
    """Mean per-pixel distance (so gamma means the same at any image size)."""
    if kind == "l2":
        return lambda a, b: ((a - b) ** 2).flatten(1).mean(dim=1)
    if kind == "l1":
        return lambda a, b: (a - b).abs().flatten(1).mean(dim=1)
    raise ValueError(f"unknown pixel distance {kind!r}")


def _descend(est: FittedEstimator, start: torch.Tensor, render: Callable[[torch.Tensor], torch.Tensor],
             distance: Callable[[torch.Tensor], torch.Tensor], cfg: CounterfactualConfig, ctx: JobContext,
             stage: str, clamp_param: bool, first_image: torch.Tensor | None = None) -> Generated:
    """Adam on the per-image loss -rho(render(param)) + gamma * distance(param). `first_image` replaces the
    first iteration's rendering (the reference's LGD scores the original X there)."""
    param = start.detach().clone().requires_grad_(True)
    opt = torch.optim.Adam([param], lr=cfg.learning_rate, betas=(0.9, 0.999))
    n = len(param)
    active = torch.ones(n, dtype=torch.bool)
    frozen = torch.zeros_like(param)
    iters = [0] * n
    for it in range(cfg.max_iter):
        ctx.check_cancelled()
        ctx.progress(stage, it, cfg.max_iter)
        x = first_image if (it == 0 and first_image is not None) else render(param)
        rho = est.competency(x)["competency"]
        passed = (rho.detach() >= cfg.threshold).cpu()
        if cfg.batch_stop:
            if bool(passed.all()):
                break
        else:
            newly = active & passed
            if newly.any():
                frozen[newly] = param.detach()[newly]
                active &= ~newly
            if not active.any():
                break
        terms = -rho + cfg.gamma * distance(param)
        loss = terms.mean() if cfg.batch_stop else terms[active.to(terms.device)].sum() / n
        opt.zero_grad()
        # Gradients for the optimised tensor only: nothing accumulates in the (shared) models' parameters.
        (param.grad,) = torch.autograd.grad(loss, [param])
        opt.step()
        with torch.no_grad():
            if clamp_param and cfg.clamp:
                param.clamp_(0.0, 1.0)
            if not cfg.batch_stop:
                param[~active] = frozen[~active]
        for i in range(n):
            iters[i] += int(cfg.batch_stop or bool(active[i]))
    ctx.progress(stage, cfg.max_iter, cfg.max_iter)
    with torch.no_grad():
        out = render(param.detach())
        if cfg.clamp:
            out = out.clamp(0.0, 1.0)
    return Generated(out, iters)


def igd(est: FittedEstimator, x: torch.Tensor, cfg: CounterfactualConfig, ctx: JobContext,
        image_distance: Distance) -> Generated:
    x0 = x.detach()
    return _descend(est, x0, lambda p: p, lambda p: image_distance(x0, p), cfg, ctx, "IGD", True)


def fgd(est: FittedEstimator, x: torch.Tensor, cfg: CounterfactualConfig, ctx: JobContext) -> Generated:
    with torch.no_grad():
        f0 = est.features(x)
    d = vector_distance(cfg.fgd_distance)
    return _descend(est, x.detach(), lambda p: p, lambda p: d(f0, est.features(p)), cfg, ctx, "FGD", True)


def reco(est: FittedEstimator, x: torch.Tensor, cfg: CounterfactualConfig, ctx: JobContext) -> Generated:
    ctx.check_cancelled()
    with torch.no_grad():
        out = est.reconstruct(x)
    return Generated(out, [0] * len(x))


def lgd(est: FittedEstimator, x: torch.Tensor, cfg: CounterfactualConfig, ctx: JobContext) -> Generated:
    with torch.no_grad():
        z0 = est.encode(x)
    d = vector_distance(cfg.lgd_distance)
    # Compatibility: the reference starts from X_new = X, so its first step sees only the distance term.
    first = x.detach() if cfg.compatibility else None
    return _descend(est, z0, est.decode, lambda z: d(z0, z), cfg, ctx, "LGD", False, first_image=first)


class GeneratorUnavailable(NemoError):
    """A generator cannot run with this estimator and configuration (a property of both, not a transient
    failure: the same inputs fail the same way, so the result is complete and not retried)."""


def lnn_bank(est: FittedEstimator, cfg: CounterfactualConfig) -> torch.Tensor:
    """Calibration latents whose competency passes the threshold (strict '>' in compatibility mode)."""
    rho = est.bank_competency
    keep = rho > cfg.threshold if cfg.compatibility else rho >= cfg.threshold
    return est.bank_latents[keep]


def lnn(est: FittedEstimator, x: torch.Tensor, cfg: CounterfactualConfig, ctx: JobContext) -> Generated:
    ctx.check_cancelled()
    bank = lnn_bank(est, cfg)
    if len(bank) == 0:
        raise GeneratorUnavailable(
            f"LNN has nothing to search: no held-out calibration image reaches competency {cfg.threshold}.",
            hint="Lower the competency threshold, or fit the estimator on images the classifier is competent on.")
    with torch.no_grad():
        z = est.encode(x)
        bank = bank.to(z.device, z.dtype)
        dist = torch.cdist(z, bank, p=1.0 if cfg.lnn_distance == "l1" else 2.0)
        out = est.decode(bank[dist.argmin(dim=1)])
    return Generated(out, [0] * len(x))


def generate(method: str, est: FittedEstimator, x: torch.Tensor, cfg: CounterfactualConfig, ctx: JobContext,
             image_distance: Distance | None = None) -> Generated:
    """Run one generator on a batch; images that already pass are returned untouched (all generators)."""
    with torch.no_grad():
        before = est.competency(x)["competency"].cpu()
    passing = before >= cfg.threshold
    todo = (~passing).nonzero().flatten()
    if len(todo) == 0:
        return Generated(x.detach().clone(), [0] * len(x))
    xs = x[todo]
    if method not in GENERATOR_FUNCTIONS:
        raise ValueError(f"unknown generator {method!r}")
    if method == "igd" and image_distance is None:
        raise ValueError("IGD needs an image distance")
    with torch.random.fork_rng(devices=[]):  # seeded without touching the caller's random state
        torch.manual_seed(cfg.seed)
        g = igd(est, xs, cfg, ctx, image_distance) if method == "igd" else GENERATOR_FUNCTIONS[method](est, xs, cfg, ctx)
    out = x.detach().clone()  # outputs live at the input's size, so passing images stay exactly as they were
    out[todo] = resize(g.images, x.shape[-2:]).to(out.dtype)
    iters = [0] * len(x)
    for j, i in enumerate(todo.tolist()):
        iters[i] = g.iterations[j]
    return Generated(out, iters)


GENERATOR_FUNCTIONS = {"igd": igd, "fgd": fgd, "reco": reco, "lgd": lgd, "lnn": lnn}

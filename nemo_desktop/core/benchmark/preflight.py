"""Checks of a whole benchmark config that need no model and no cluster: run on the driver before a Ray run
starts anything (a cluster, actors, shard stores, plan.json), so that a wrong dataset root fails in a second
instead of after every actor has started and loaded its models.

    check_config(config)   # ConfigError naming every problem found, else None

What is checked: every dataset opens (its root exists in the layout of its kind, with images, and the splits
exist), the ImageNet subset opens, every model reference names a catalog entry or a known `<family>:<source>`
and the pip extra its family needs is installed (core/base/extras.py), every method is registered and takes the
options given, and with judges every dataset has its LLM Match criterion. Not checked (it needs the classifier
loaded): whether a non-zero-shot classifier's methods have an editor.
"""
from __future__ import annotations

from typing import Any

from ..base.errors import ConfigError, NemoError
from .config import BenchConfig


def problems(config: BenchConfig) -> list[str]:
    """Every problem of the config found without loading a model, each in one sentence."""
    from .datasets import open_benchmark_dataset, open_imagenet_subset
    from .judge import load_criterion

    found: list[str] = []

    def attempt(what: str, check) -> Any:
        try:
            return check()
        except NemoError as exc:
            found.append(f"{what}: {exc.message}" + (f" ({exc.hint})" if exc.hint else ""))
        except OSError as exc:  # an unreadable folder, a broken mount
            found.append(f"{what}: {exc.strerror or exc}")
        return None

    for d in config.datasets:
        ds = attempt(f"dataset '{d.label}'", lambda d=d: open_benchmark_dataset(
            d.kind, d.root, splits=d.splits, criterion=d.criterion, name=d.label))
        if ds is not None and config.judges and not d.criterion:
            if not ds.criterion_key:
                found.append(f"dataset '{d.label}': it has no LLM Match criterion and the config has judges "
                             "(give it a 'criterion': the failure factor explanations should describe)")
            else:
                attempt(f"dataset '{d.label}'", lambda ds=ds: load_criterion(ds.criterion_key))
    if config.imagenet_subset is not None:
        s = config.imagenet_subset
        attempt("imagenet_subset", lambda: open_imagenet_subset(s.root, s.classes, s.per_class))
    refs = [*config.classifiers, *config.mllms, *config.editors, *(j.model for j in config.judges)]
    for ref in refs:
        attempt(f"{ref.kind} '{ref.label}'", lambda ref=ref: _check_model(ref))
    for m in config.methods:
        attempt(f"method '{m.label}' ({m.method})", lambda m=m: _check_method(m, config.seed))
    return found


def _check_model(ref) -> None:
    """The reference resolves, and the extra its family needs (e.g. 'editing' for a diffusers editor) is there."""
    from ..base.extras import require_for_family

    spec = ref.spec()
    require_for_family(spec.family, f"The {ref.kind} {spec.model_id}")


def _check_method(m, seed: int) -> None:
    from ..registry.methods import get_method
    from ..registry import make_config
    from ..registry.params import config_params

    spec = get_method(m.method)
    options = dict(m.options)
    if any(p.name == "seed" for p in config_params(spec.config)):
        options.setdefault("seed", seed)
    make_config(spec, options)


def check_config(config: BenchConfig) -> None:
    """ConfigError listing every problem of `problems`, or nothing."""
    found = problems(config)
    if not found:
        return
    head = "The benchmark config has a problem" if len(found) == 1 else \
        f"The benchmark config has {len(found)} problems"
    raise ConfigError(f"{head}: " + "; ".join(found), hint="Nothing was started; fix the config and run again.")

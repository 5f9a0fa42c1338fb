"""The one construction path: the CLI, the GUI and the benchmark runner build every analysis here."""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from ..base.errors import ConfigError
from .components import Components
from .params import check_range, config_params
from .registry import get_analysis
from .spec import ROLE_LABELS, AnalysisSpec, in_sentence

# How the CLI names a missing component, so the message tells the user which option to give.
ROLE_OPTIONS = {"classifier": "--classifier", "classifier_b": "--classifier-b", "mllm": "--mllm",
                "editor": "--editor", "embedder": "--embedder", "generator": "--generator", "judge": "--judge",
                "reference": "--reference", "fitted": "--estimator"}


def make_config(spec: AnalysisSpec, options: Mapping[str, Any] | Any | None = None) -> Any:
    """The spec's config from a mapping of options (unknown names are refused) or an existing config."""
    if spec.config is None:
        if options:
            raise ConfigError(f"The analysis '{spec.name}' takes no options (got {', '.join(sorted(options))}).")
        return None
    if isinstance(options, spec.config):
        return options
    if options is not None and dataclasses.is_dataclass(options) and not isinstance(options, Mapping):
        raise ConfigError(f"The analysis '{spec.name}' takes a {spec.config.__name__}, not a "
                          f"{type(options).__name__}.")
    options = dict(options or {})
    params = {p.name: p for p in config_params(spec.config)}
    unknown = sorted(set(options) - set(params))
    if unknown:
        raise ConfigError(f"The analysis '{spec.name}' has no option(s) {', '.join(unknown)}.",
                          hint=f"Its options are: {', '.join(params) or 'none'}.")
    for name, value in options.items():
        check_range(params[name], value)
    try:
        return spec.config(**options)
    except TypeError as exc:
        raise ConfigError(f"Invalid options for '{spec.name}': {exc}") from None


def check_components(spec: AnalysisSpec, components: Components) -> None:
    """Refuse a build that lacks a component the spec declares as required (with the option to give it)."""
    inputs = spec.inputs
    for role in inputs.used():
        need = inputs.need(role)
        present = components.get(role) is not None
        if present:
            continue
        if need == "required" or (need == "interventions" and not components.zero_shot):
            why = " to test hypotheses on images (the classifier is not zero-shot)" if need == "interventions" else ""
            raise ConfigError(f"The analysis '{spec.name}' needs a {in_sentence(ROLE_LABELS[role])}{why}.",
                              hint=f"Give one ({ROLE_OPTIONS[role]} on the command line, or choose it in the app).")


def build_analysis(spec: AnalysisSpec | str, components: Components, options: Mapping[str, Any] | Any = None) -> Any:
    """Build the analysis object of `spec` from loaded components and options (a mapping or its config)."""
    if isinstance(spec, str):
        spec = get_analysis(spec)
    config = make_config(spec, options)
    check_components(spec, components)
    kwargs: dict[str, Any] = {role: components.get(role) for role in spec.inputs.used()}
    if not spec.inputs.fitted:
        kwargs.pop("fitted", None)
    kwargs["store"] = components.store
    kwargs["config"] = config
    kwargs.update(dict(spec.factory_kwargs))
    return spec.factory(**kwargs)


def wanted_components(spec: AnalysisSpec, config: Any, components: Components) -> dict[str, tuple[str, str]]:
    """role -> (model ref, catalog kind) the analysis wants loaded besides the ones given (its spec's
    `default_components` hook, e.g. ErrorRetrieval's CLIP space for a classifier that is not zero-shot). The
    caller loads them with the user's device and dtype and injects them; analyses never load models."""
    hook = spec.default_components
    if hook is None:
        return {}
    return {role: ref for role, ref in hook(config, components).items() if components.get(role) is None}

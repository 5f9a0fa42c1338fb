"""What an analysis is (its registry entry): kind, version, config, result type and the inputs it declares.

Kinds follow HF evaluate's metric / comparison / measurement split: `sample` explains one image (SciTX, the
baselines), `dataset` analyses a set of results or an indexed dataset (global explanation, failure modes),
`model` compares models (model differences), `fit` produces an artefact another analysis uses (the competency
estimator). Inputs are declared here once; the CLI flags, the GUI pickers and `build_analysis`' checks read them.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

Kind = Literal["sample", "dataset", "model", "fit"]
KINDS: tuple[str, ...] = ("sample", "dataset", "model", "fit")
# none: not used; optional: used when given; required: the analysis cannot run without it;
# interventions: required to test hypotheses on images, i.e. unless the classifier is zero-shot (whose
# hypotheses are tested by rewriting its prompt).
Need = Literal["none", "optional", "required", "interventions"]
NEEDS: tuple[str, ...] = ("none", "optional", "required", "interventions")
# What an analysis runs on (core/registry/data_inputs.py); "none": its components and settings say it all.
DataKind = Literal["image", "index", "run", "conditions", "dataset", "none"]

# Component roles an analysis can declare, in the order forms and help list them.
ROLES: tuple[str, ...] = ("classifier", "classifier_b", "mllm", "editor", "embedder", "generator", "judge",
                          "reference", "fitted")
ROLE_LABELS = {"classifier": "Classifier", "classifier_b": "Second classifier", "mllm": "Multimodal LLM",
               "editor": "Image editor", "embedder": "Joint image-text embedder", "generator": "Condition source",
               "judge": "Evaluator LLM", "reference": "Reference index", "fitted": "Fitted estimator"}


def in_sentence(label: str) -> str:
    """A label as it reads inside a sentence: lower case, except acronyms ("Multimodal LLM" -> "multimodal LLM",
    not "multimodal llm")."""
    return " ".join(w if sum(c.isupper() for c in w) > 1 else w.lower() for w in label.split(" "))


@dataclass(frozen=True)
class Inputs:
    """The components and data an analysis takes, each with how much it needs it."""

    classifier: Need = "required"
    classifier_b: Need = "none"
    mllm: Need = "none"
    editor: Need = "none"
    embedder: Need = "none"
    generator: Need = "none"
    judge: Need = "none"
    reference: Need = "none"
    # The name of a `fit` analysis whose artefact is injected as `fitted`: the artefact itself, or the store key of
    # that analysis' stored result (the analysis loads it for its classifier).
    fitted: str | None = None
    data: DataKind = "image"

    def __post_init__(self) -> None:
        for role in ROLES:
            if role == "fitted":
                continue
            if getattr(self, role) not in NEEDS:
                raise ValueError(f"Inputs.{role} must be one of {NEEDS}, not {getattr(self, role)!r}")

    def need(self, role: str) -> str:
        if role == "fitted":
            return "required" if self.fitted else "none"
        return getattr(self, role)

    def used(self) -> list[str]:
        """The roles this analysis takes at all, in form order."""
        return [r for r in ROLES if self.need(r) != "none"]


@dataclass(frozen=True)
class LazyFactory:
    """A factory named by import path, "package.module:Name", imported on its first call: listing the registry
    (names, configs, inputs) then costs no import of the pipeline's heavy dependencies (torch, scipy), which
    only a build needs. `AnalysisSpec(factory="package.module:Name")` makes one."""

    path: str

    def __post_init__(self) -> None:
        module, sep, attr = self.path.partition(":")
        if not (sep and module and attr):
            raise ValueError(f"A factory path is 'package.module:Name', not {self.path!r}")

    def load(self) -> Callable[..., Any]:
        module, _, attr = self.path.partition(":")
        return getattr(importlib.import_module(module), attr)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.load()(*args, **kwargs)


@dataclass(frozen=True)
class AnalysisSpec:
    """One registry entry. `factory(**components, config=config)` builds the analysis object, a callable.

    Only `build_analysis` calls the factory in product code; tests may call it directly with doubles. A factory
    given as "package.module:Name" becomes a LazyFactory (imported when first called).
    """

    name: str
    kind: Kind
    version: str  # bump when the analysis' results change for the same inputs: it is part of every key
    factory: Callable[..., Any] | str
    config: type | None = None  # dataclass of the analysis' parameters (field metadata: label, help, min, max)
    result: type | None = None  # the result type (see results.AnalysisResult)
    inputs: Inputs = field(default_factory=Inputs)
    description: str = ""
    # Extra keyword arguments for the factory that are not components (e.g. a validated variant's flag).
    factory_kwargs: tuple[tuple[str, Any], ...] = ()
    # (config, components) -> {role: (model ref, catalog kind)} for components the analysis wants loaded when
    # not given (callers load them with the user's options); None = nothing beyond the declared inputs.
    default_components: Callable[[Any, Any], dict[str, tuple[str, str]]] | None = None
    # pip extras the analysis needs (core/base/extras.py): the CLI and the app check them before anything loads.
    extras: tuple[str, ...] = ()
    # What its data is, when the data kind's own words do not say it (e.g. the fix's train/affected/rest folder).
    data_label: str = ""
    # Its `generator` renders text it is given (a catalog text-to-image model), so the built-in condition sources
    # (digits, digits-ink: model differences' conditions) are not offered for it.
    generator_renders_text: bool = False
    # Settings the app's page starts with instead of the config's defaults, where those need what only another
    # surface gives (the fix's "edit" needs a finding's edit, which a page opened on its own does not have).
    page_defaults: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"AnalysisSpec.kind must be one of {KINDS}, not {self.kind!r}")
        if isinstance(self.factory, str):
            object.__setattr__(self, "factory", LazyFactory(self.factory))

    @property
    def needs_editor(self) -> bool:
        """True when image interventions need an editor (a classifier that is not zero-shot)."""
        return self.inputs.editor in ("required", "interventions")

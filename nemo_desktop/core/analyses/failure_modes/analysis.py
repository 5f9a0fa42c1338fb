"""The `failure-modes` registry entry (kind "dataset"): the one construction path builds this from injected
components and a FailureModesConfig; one call analyses one reference index.

    analysis = build_analysis("failure-modes", Components(classifier=clf, embedder=clip, store=store), {"k": 3})
    result = analysis(index, ctx)      # FailureModesResult

It only turns the config's relevance choice into a relevance source, which needs the index (the CSV manifest
it was built from) or the MLLM(s), and hands the rest to FailureModesPipeline.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ...base.errors import ConfigError
from ...base.job_context import JobContext
from ...registry import AnalysisSpec, Inputs
from .config import FailureModesConfig
from .pipeline import FailureModesPipeline, joint_space
from .relevance import AttributeRelevance
from .result import ANALYSIS, VERSION, FailureModesResult

# The joint space for a classifier that is not one (the seed's OpenCLIP; tau = 0.25 is calibrated for it).
DEFAULT_EMBEDDER = "open-clip-vit-b32-laion2b"


def default_embedder(config: FailureModesConfig | None, components: Any) -> dict[str, tuple[str, str]]:
    """The embedder to load when none is given and the classifier is not a joint space itself."""
    if getattr(components, "zero_shot", False):
        return {}
    return {"embedder": (DEFAULT_EMBEDDER, "classifier")}


def _mllms(mllm: Any) -> list[Any]:
    if mllm is None:
        return []
    return list(mllm) if isinstance(mllm, (list, tuple)) else [mllm]


def manifest_for(index: Any, config: FailureModesConfig) -> Path:
    """The CSV whose attribute columns give relevance: the config's, else the manifest the index was built from."""
    if config.attributes_manifest:
        return Path(config.attributes_manifest).expanduser()
    root = Path(str(index.dataset_root or ""))
    if root.suffix.lower() == ".csv":
        return root
    raise ConfigError(f"Attribute relevance needs a CSV manifest; the index {index.index_id} was built from "
                      f"{root or 'an unknown dataset'}.",
                      hint="Give one with --attributes-manifest FILE.csv (columns path,label,<attribute>,...).")


class FailureModesAnalysis:
    """`failure-modes`: where a classifier fails on an indexed dataset, described in sentences (LBEE)."""

    def __init__(self, classifier: Any = None, embedder: Any = None, mllm: Any = None, store: Any = None,
                 config: FailureModesConfig | None = None) -> None:
        self.config = config or FailureModesConfig()
        self.classifier, self.embedder, self.store = classifier, embedder, store
        self.mllms = _mllms(mllm)
        if self.config.relevance == "vqa" and not self.mllms:
            raise ConfigError("Relevance 'vqa' asks a multimodal LLM about every image and sentence; none was given.",
                              hint="Give one or more with --mllm ID (answers are combined with AND).")
        joint_space(classifier, embedder)  # refuse a missing joint space before any work

    def relevance(self, index: Any, ctx: JobContext) -> Any:
        if self.config.relevance == "attributes":
            return AttributeRelevance(manifest_for(index, self.config))
        if self.config.relevance == "vqa":
            from .vqa import VqaRelevance

            return VqaRelevance(self.mllms, self.store, seed=self.config.seed, ctx=ctx.sub("VQA relevance"),
                                question=self.config.vqa_question)
        return None

    def __call__(self, index: Any, ctx: JobContext | None = None) -> FailureModesResult:
        ctx = ctx or JobContext()
        pipe = FailureModesPipeline(self.classifier, self.embedder, self.store, self.config, self.relevance(index, ctx))
        return pipe(index, ctx)


def sentence_count(config: FailureModesConfig, class_names: Sequence[str]) -> int:
    from .sentences import load_sentence_sets

    return len(load_sentence_sets(config.sentence_sets, class_names))


# The module's registry entry, named by its entry point (pyproject.toml, nemo_desktop.analyses).
SPEC = AnalysisSpec(
    name=ANALYSIS, kind="dataset", version=VERSION, factory=FailureModesAnalysis, config=FailureModesConfig,
    result=FailureModesResult, inputs=Inputs(classifier="optional", embedder="optional", mllm="optional", data="index"),
    default_components=default_embedder,
    description="Where the classifier fails on an indexed dataset, in words: easy/hard split, clusters in a joint "
                "image-text space, sentences per hard cluster by TopS, PDiff, SetDiff and FPDiff (Csurka et al. "
                "2024), evaluated with AHR/ACR/TPR/JI when relevance is known.")

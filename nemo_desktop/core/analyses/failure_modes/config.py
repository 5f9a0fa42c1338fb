"""Settings of the failure-modes analysis (LBEE, Csurka et al. 2024): every parameter, with its default from
the paper, exposed and recorded. Field metadata (label, help, min, max, choices) drives CLI flags and GUI
forms; `to_dict()` is what result keys and manifests record."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ...base.errors import ConfigError

SPLITS = ("entropy", "correctness", "class-probability", "class-ranking")
METHODS = ("tops", "pdiff", "setdiff", "fpdiff")
RELEVANCE = ("none", "attributes", "vqa")


def _meta(label: str, help: str, **kw: Any) -> dict[str, Any]:  # noqa: A002 - the metadata key is "help"
    return {"label": label, "help": help, **kw}


@dataclass(frozen=True)
class FailureModesConfig:
    split: str = field(default="entropy", metadata=_meta(
        "Easy/hard split",
        "entropy: prediction entropy over the analysed set (hard = H > mean + a*std); correctness: top-1 "
        "correctness (hard = wrong); class-probability: per class, P(true class) (hard = p < mean - a*std); "
        "class-ranking: per class, hard = false negatives and false positives of the class, easy = true positives.",
        choices=SPLITS))
    per_class: bool | None = field(default=None, metadata=_meta(
        "Per class", "Analyse each class on its own (None: yes for the class-* splits, no otherwise)."))
    classes: tuple[str, ...] = field(default=(), metadata=_meta(
        "Classes", "Per-class mode: the classes to analyse (empty: every class with images)."))
    a: float = field(default=0.2, metadata=_meta(
        "Split margin a", "Thresholds are mean +/- a*std of the split score (paper App. D: a = 0.2).", min=0.0, max=3.0))
    linkage: str = field(default="ward", metadata=_meta(
        "Linkage", "Agglomerative clustering linkage (paper footnote 1: Ward).",
        choices=("ward", "average", "complete", "single")))
    clusters: int | None = field(default=None, metadata=_meta(
        "Clusters C", "Clusters per set, hard and easy alike (None: 15 for the whole set, 5 per class, as in the "
        "paper).", min=1, max=200))
    k: int = field(default=3, metadata=_meta("Sentences K", "Sentences kept per hard cluster and method.", min=1, max=50))
    tau: float | None = field(default=0.25, metadata=_meta(
        "Threshold tau", "Similarity threshold of SetDiff/FPDiff (0.25 for OpenCLIP, paper footnote 2). "
        "None = auto: mean + 1 std of all prototype-sentence similarities. Prefer 0.25 with the paper's "
        "OpenCLIP/CLIP ViT spaces (image-sentence cosines around 0.17-0.3) or to compare with the paper; auto for "
        "spaces with another cosine scale (SigLIP, custom). Where fewer than K sentences pass tau the method pads "
        "with TopS's picks and the result says so per cluster; many such clusters mean tau is too high for the "
        "space.",
        min=-1.0, max=1.0))
    methods: tuple[str, ...] = field(default=METHODS, metadata=_meta(
        "Ranking methods", "Sentence selection methods, shown side by side.", choices=METHODS))
    beta_factor: float = field(default=0.2, metadata=_meta(
        "Severity o", "Evaluation: a sentence describes a failure if its images' accuracy is below the dataset's "
        "by beta = o * std(accuracy) (paper App. D: o = 0.2).", min=0.0, max=5.0))
    p_at_k: int = field(default=10, metadata=_meta(
        "P@K size K", "Evaluation of the clusters themselves (paper App. B, FACTS' protocol, K = 10): for each "
        "sentence of S*_beta, the images it is relevant to form a ground-truth group; each hard or easy cluster "
        "ranks the set's images by cosine to its prototype; P@K is the mean over groups of the best top-K overlap "
        "/ K.",
        min=1, max=1000))
    relevance: str = field(default="none", metadata=_meta(
        "Relevance", "Evaluation needs image-sentence relevance: none; attributes (columns of a CSV manifest "
        "matched against the sentences' 'requires'); or vqa (a yes/no question per image and sentence to the "
        "configured MLLM(s), combined with AND; images x sentences x MLLMs calls).", choices=RELEVANCE))
    vqa_question: str = field(default="per-sentence", metadata=_meta(
        "VQA question", "relevance=vqa: per-sentence asks each sentence's own yes/no question, written once by the "
        "(first) MLLM and cached, as the paper does (App. C.3: 'Was the image taken at night? Reply simply with "
        "'yes' or 'no''); template asks one fixed question quoting the sentence (no writing step, but a sentence "
        "that reads badly as a quote gets a worse question).", choices=("per-sentence", "template")))
    attributes_manifest: str | None = field(default=None, metadata=_meta(
        "Attribute manifest", "relevance=attributes: the CSV (path,label,<attribute>,...) whose columns say which "
        "sentences hold for which image (default: the CSV manifest the index was built from).", path=True))
    sentence_sets: tuple[str, ...] = field(default=("general",), metadata=_meta(
        "Sentence sets", "Shipped sets by name (general), 'classes' (an image of a <class>, from the vocabulary) "
        "and/or paths of the user's own .json/.txt files.", path=True))
    max_ward_points: int = field(default=8000, metadata=_meta(
        "Exact clustering limit", "Exact Ward needs n^2/2 distances (8000 points: 256 MB). Above this a seeded "
        "subsample is clustered and the other points join the nearest prototype (recorded in the result).",
        min=10, max=50000))
    nearest_members: int = field(default=12, metadata=_meta(
        "Images per cluster", "Members nearest to the prototype kept for thumbnails.", min=1, max=100))
    seed: int = field(default=0, metadata=_meta("Seed", "Seed of the subsample above the clustering limit.",
                                                min=0, max=2**31 - 1))
    embed_batch_size: int = field(default=64, metadata=_meta(
        "Embedding batch", "Images per embedding batch (one cancellation point and one stored chunk each).",
        min=1, max=4096))

    def __post_init__(self) -> None:
        if self.split not in SPLITS:
            raise ConfigError(f"Unknown split '{self.split}'.", hint=f"Use one of: {', '.join(SPLITS)}.")
        if self.per_class is False and self.split.startswith("class-"):
            raise ConfigError(f"The '{self.split}' split is defined per class.",
                              hint="Leave per_class unset (or true) with this split.")
        bad = [m for m in self.methods if m not in METHODS]
        if bad or not self.methods:
            raise ConfigError(f"Unknown ranking method(s): {', '.join(bad) or '(none given)'}.",
                              hint=f"Use some of: {', '.join(METHODS)}.")
        if self.relevance not in RELEVANCE:
            raise ConfigError(f"Unknown relevance source '{self.relevance}'.", hint=f"Use one of: {', '.join(RELEVANCE)}.")
        for f in fields(self):
            lo, hi = f.metadata.get("min"), f.metadata.get("max")
            v = getattr(self, f.name)
            if v is None or isinstance(v, (tuple, str, bool)):
                continue
            if (lo is not None and v < lo) or (hi is not None and v > hi):
                raise ConfigError(f"{f.metadata['label']} = {v} is out of range [{lo}, {hi}].")
        if self.vqa_question not in self.__dataclass_fields__["vqa_question"].metadata["choices"]:
            raise ConfigError(f"Unknown VQA question mode '{self.vqa_question}'.",
                              hint="Use per-sentence (the paper's) or template.")
        if self.linkage not in self.__dataclass_fields__["linkage"].metadata["choices"]:
            raise ConfigError(f"Unknown linkage '{self.linkage}'.", hint="Use ward, average, complete or single.")
        if not self.sentence_sets:
            raise ConfigError("No sentence set was given.", hint="Use the shipped 'general' set or a file of your own.")

    @property
    def analyses_per_class(self) -> bool:
        return self.split.startswith("class-") if self.per_class is None else bool(self.per_class)

    @property
    def n_clusters(self) -> int:
        return self.clusters if self.clusters is not None else (5 if self.analyses_per_class else 15)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "FailureModesConfig":
        kw = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items() if k in cls.__dataclass_fields__}
        return cls(**kw)

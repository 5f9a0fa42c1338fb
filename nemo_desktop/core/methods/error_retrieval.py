"""ErrorRetrieval (NEMO paper §4.1.3; Jain et al., 2023; Csurka et al., 2024): "retrieves a textual
description of the failure from a predefined error corpus, given the misclassified image", in a joint
image-text (CLIP) space. Non-generative: no MLLM is needed to propose (one is needed only to derive the
interventions of CEI).

    pipe = ErrorRetrievalPipeline(classifier, mllm=None, embedder=clip, config=ErrorRetrievalConfig())
    result = pipe(image, true_label)   # e.g. "Object is viewed from below, causing extreme foreshortening."

Corpus (`corpus`, resources/error_corpus/README.md):
  * "failure-statements" (default, and what the table configs use): class-agnostic failure statements in
    the style of the paper's printed examples (appendix C, Figs 10-12, whose 13 distinct statements it
    contains verbatim), plus statements written for NEMO Desktop in the same style;
  * "class-captions": this project's earlier corpus of class-specific captions ("a pencil sketch of a
    {class}.") whose categories follow the benchmarks' own factors; its numbers are not comparable with the
    paper's (it favours the baseline on ImageNet-D and ImageNet-R).
`{class}` in a sentence is replaced by the true class name; files in `<config dir>/error_corpus/` (*.json,
*.tsv) and `corpus_files` extend the chosen corpus.

Ranking (`contrast`), per sample. The corpus sentences s_n are embedded (t_n), and the image (x):
  * "similarity" (default; "tops" is the same, Csurka et al.'s name): plain image-sentence similarity
    v_img[n] = <x, t_n>, the paper's description;
  * "pdiff" (this project's contrastive variant, after PDiff of Csurka et al. §4 with the class prototype of
    DOMINO/Jain et al.): also embed the class reference caption r = "a photo of a {true class}." and
    v_ref[n] = <r, t_n>; standardise both profiles over the corpus (z-scores: an image-text and a text-text
    cosine live on different scales because of the modality gap) and rank by
    d[n] = z(v_img)[n] - z(v_ref)[n], so a sentence that merely restates the class cancels;
  * "fpdiff": PDiff among the `filter_k` sentences most similar to the image (Csurka et al.'s filter).
Ties keep corpus order.

The joint space, in this order: an `embedder` passed in (any object with `info`, `embed(images)` and
`embed_texts(texts)` returning L2-normalised rows, or a NEMO zero-shot classifier); the model named by
`config.retrieval_model` (a catalog id or `<family>:<source>`, loaded on first use); the classifier itself
when it is a zero-shot CLIP/SigLIP/open_clip model; otherwise the paper's CLIP ViT-B/32
(`DEFAULT_RETRIEVAL_MODEL`), loaded on first use. `error-retrieval-validated` takes the M
best-ranked sentences as candidates and keeps the one with the largest CEI (validation.py).

The corpus ships in resources/error_corpus/ (see its README for where the sentences come from); files in
`<config dir>/error_corpus/` (*.json, *.tsv) extend it.
"""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from PIL import Image

from ..base.errors import ConfigError
from ..base.job_context import JobContext
from ..base.resources import resource_path
from .intervention import UnitCache, model_manifest, model_part, sha_text, unit_key
from ..registry import Inputs
from ..registry.methods import method_entry
from ..base.records import Candidate
from .validation import VALIDATED_SUFFIX, BaselineConfig, BaselinePipeline, Proposal

VERSION = "1"  # bump when this method's results change for the same inputs (part of every key)
METHOD = "error-retrieval"
DEFAULT_RETRIEVAL_MODEL = "clip-vit-b32"  # catalog id of openai/clip-vit-base-patch32, the paper's CLIP
# Shipped corpora by name (resources/error_corpus/README.md says where each comes from).
CORPORA = {"failure-statements": "failure_statements.v1.json", "class-captions": "error_corpus.v1.json"}
DEFAULT_CORPUS = "failure-statements"
CORPUS_FILE = CORPORA[DEFAULT_CORPUS]
SIMILARITY = ("similarity", "tops")  # plain image-sentence similarity, the paper's description (two names)
CONTRASTS = (*SIMILARITY, "pdiff", "fpdiff")
CATEGORIES = ("rendition and art style", "viewpoint and pose", "background and context", "texture and material",
              "occlusion and crop", "lighting and colour", "image quality", "scale")


# -- the corpus --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ErrorSentence:
    id: str
    category: str
    text: str  # may contain "{class}"
    source: str  # "shipped" or the extension file's path

    def fill(self, class_name: str) -> str:
        return self.text.replace("{class}", class_name)


@dataclass
class ErrorCorpus:
    sentences: list[ErrorSentence]
    reference_caption: str = "a photo of a {class}."
    sources: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.sentences)

    @property
    def sha256(self) -> str:
        body = json.dumps([[s.category, s.text] for s in self.sentences] + [self.reference_caption],
                          ensure_ascii=False)
        return sha_text(body)

    def categories(self) -> list[str]:
        return list(dict.fromkeys(s.category for s in self.sentences))


def user_corpus_dir() -> Path:
    from ..store.paths import get_paths

    return get_paths().config_dir / "error_corpus"


def load_corpus(extra_files: Sequence[str | Path] = (), *, include_user_dir: bool = True,
                name: str = DEFAULT_CORPUS) -> ErrorCorpus:
    """The shipped corpus `name`, plus the user's files (config dir) and `extra_files`; duplicates dropped."""
    if name not in CORPORA:
        raise ConfigError(f"Unknown error corpus '{name}'.", hint=f"Use one of: {', '.join(CORPORA)}.")
    shipped = resource_path("error_corpus", CORPORA[name])
    doc = _read_json(shipped)
    sentences = _sentences_from_doc(doc, shipped, "shipped")
    sources = [str(shipped)]
    files: list[Path] = []
    if include_user_dir:
        folder = user_corpus_dir()
        if folder.is_dir():
            files += sorted(p for p in folder.iterdir() if p.suffix.lower() in (".json", ".tsv"))
    files += [Path(f).expanduser() for f in extra_files]
    for path in files:
        if not path.is_file():
            raise ConfigError(f"Error-corpus file not found: {path}", hint="Check the path.")
        extra = _read_tsv(path) if path.suffix.lower() == ".tsv" else _sentences_from_doc(_read_json(path), path,
                                                                                          str(path))
        sentences += extra
        sources.append(str(path))
    seen: set[str] = set()
    unique = []
    for s in sentences:
        norm = " ".join(s.text.lower().split())
        if norm not in seen:
            seen.add(norm)
            unique.append(s)
    return ErrorCorpus(unique, str(doc.get("reference_caption") or "a photo of a {class}."), sources)


def _read_json(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"Cannot read the error-corpus file {path}: {exc}",
                          hint="It must be JSON with a 'sentences' list "
                               "(see resources/error_corpus/README.md).") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("sentences"), list):
        raise ConfigError(f"The error-corpus file {path} has no 'sentences' list.",
                          hint="See resources/error_corpus/README.md for the format.")
    return doc


def _sentences_from_doc(doc: dict, path: Path, source: str) -> list[ErrorSentence]:
    out = []
    for i, item in enumerate(doc["sentences"]):
        if isinstance(item, str):
            item = {"text": item}
        text = str((item or {}).get("text") or "").strip() if isinstance(item, dict) else ""
        if not text:
            raise ConfigError(f"Sentence {i + 1} of the error-corpus file {path} has no text.")
        out.append(ErrorSentence(str(item.get("id") or f"{Path(path).stem}-{i + 1}"),
                                 str(item.get("category") or "other"), text, source))
    return out


def _read_tsv(path: Path) -> list[ErrorSentence]:
    out = []
    with open(path, encoding="utf-8", newline="") as f:
        for n, row in enumerate(csv.reader(f, delimiter="\t"), 1):
            if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
                continue
            if len(row) != 2 or not row[1].strip():
                raise ConfigError(f"Line {n} of the error-corpus file {path} is not 'category<TAB>sentence'.")
            out.append(ErrorSentence(f"{path.stem}-{n}", row[0].strip(), row[1].strip(), str(path)))
    return out


# -- the joint space ---------------------------------------------------------------------------------------------
class JointSpace:
    """Unit image and text embeddings from a CLIP-like model (NEMO zero-shot classifier or embedder)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.info = model.info
        if not (callable(getattr(model, "embed", None)) and callable(getattr(model, "embed_texts", None))):
            raise ConfigError(f"{model.info.model_id} cannot embed both images and text, which ErrorRetrieval needs.",
                              hint="Use a CLIP, SigLIP or open_clip model as the retrieval model (--retrieval-model).")

    def images(self, images: Sequence[Image.Image]) -> np.ndarray:
        return _unit(np.asarray(self.model.embed(list(images)), dtype=np.float32))

    def texts(self, texts: Sequence[str]) -> np.ndarray:
        return _unit(np.asarray(self.model.embed_texts(list(texts)), dtype=np.float32))


def _unit(x: np.ndarray) -> np.ndarray:
    x = x.reshape(x.shape[0], -1) if x.ndim != 2 else x
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


# -- ranking -----------------------------------------------------------------------------------------------------
def _z(v: np.ndarray) -> np.ndarray:
    sd = float(v.std())
    return (v - v.mean()) / sd if sd > 1e-12 else np.zeros_like(v)


def rank_sentences(image_emb: np.ndarray, reference_emb: np.ndarray, sentence_embs: np.ndarray, *,
                   contrast: str = "pdiff", filter_k: int = 20) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Sentence indices, best first, and the score vectors (see the module docstring)."""
    if contrast not in CONTRASTS:
        raise ConfigError(f"Unknown contrast '{contrast}'.", hint=f"Use one of: {', '.join(CONTRASTS)}.")
    t = np.asarray(sentence_embs, dtype=np.float64)
    v_img = t @ np.asarray(image_emb, dtype=np.float64).reshape(-1)
    v_ref = t @ np.asarray(reference_emb, dtype=np.float64).reshape(-1)
    d = _z(v_img) - _z(v_ref)
    idx = np.arange(len(t))
    if contrast in SIMILARITY:
        score = v_img
    elif contrast == "pdiff":
        score = d
    else:  # fpdiff: only sentences that describe the image well are eligible
        eligible = np.zeros(len(t), bool)
        eligible[np.lexsort((idx, -v_img))[:max(1, filter_k)]] = True
        score = np.where(eligible, d, -np.inf)
    order = np.lexsort((idx, -score))
    if contrast == "fpdiff":
        order = order[np.isfinite(score[order])]
    return order, {"score": score, "sim_image": v_img, "sim_reference": v_ref, "contrast": d}


# -- the pipeline ------------------------------------------------------------------------------------------------
@dataclass
class ErrorRetrievalConfig(BaselineConfig):
    contrast: str = "similarity"  # "similarity" (the paper's; alias "tops") | "pdiff" | "fpdiff" (this project's)
    corpus: str = DEFAULT_CORPUS  # "failure-statements" (paper-style) | "class-captions" (not comparable)
    filter_k: int = 20  # fpdiff: sentences most similar to the image that are eligible
    reference_caption: str | None = None  # None = the corpus's ("a photo of a {class}.")
    corpus_files: tuple[str, ...] = ()  # extra corpus files besides the config dir's
    retrieval_model: str | None = None  # joint image-text model (catalog id / family:source); see above
    show_top: int = 10  # ranked sentences kept in the manifest

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.contrast not in CONTRASTS:
            raise ConfigError(f"Unknown contrast '{self.contrast}'.", hint=f"Use one of: {', '.join(CONTRASTS)}.")
        if self.corpus not in CORPORA:
            raise ConfigError(f"Unknown error corpus '{self.corpus}'.", hint=f"Use one of: {', '.join(CORPORA)}.")
        self.corpus_files = tuple(str(f) for f in self.corpus_files)


def retrieval_embedder(config: ErrorRetrievalConfig | None, components: Any) -> dict[str, tuple[str, str]]:
    """The joint-space model to load (role 'embedder'): `retrieval_model`, else the default CLIP for a classifier
    that is not zero-shot; nothing when a zero-shot classifier is its own space."""
    ref = getattr(config, "retrieval_model", None)
    if ref is None and not getattr(components, "zero_shot", False):
        ref = DEFAULT_RETRIEVAL_MODEL
    return {"embedder": (ref, "classifier")} if ref else {}


@method_entry(METHOD, config=ErrorRetrievalConfig, version=VERSION, default_components=retrieval_embedder,
                 inputs=Inputs(mllm="optional", editor="optional", embedder="optional"),
                 description="ErrorRetrieval: the error-corpus sentence most similar to the image in CLIP space "
                             "(paper baseline).")
class ErrorRetrievalPipeline(BaselinePipeline):
    """ErrorRetrieval with its components injected; one `__call__` explains one image."""

    METHOD = METHOD
    CONFIG = ErrorRetrievalConfig

    def __init__(self, classifier: Any, mllm: Any = None, editor: Any = None, store: Any = None,
                 reference: Any = None, config: ErrorRetrievalConfig | None = None, *, embedder: Any = None,
                 corpus: ErrorCorpus | None = None, **kw: Any) -> None:
        super().__init__(classifier, mllm, editor, store, reference, config, **kw)
        self._space = JointSpace(embedder) if embedder is not None else None
        cfg: ErrorRetrievalConfig = self.config  # type: ignore[assignment]
        self.corpus = corpus or load_corpus(cfg.corpus_files, name=cfg.corpus)
        if not len(self.corpus):
            raise ConfigError("The error corpus is empty.", hint="Reinstall NEMO Desktop or check your corpus files.")

    @property
    def space(self) -> JointSpace:
        """The joint image-text space (see the module docstring): the injected embedder, else a zero-shot
        classifier itself. Models are loaded by the caller (`retrieval_embedder`), never here."""
        if self._space is None:
            cfg: ErrorRetrievalConfig = self.config  # type: ignore[assignment]
            if cfg.retrieval_model is None and getattr(self.classifier, "zero_shot", False):
                self._space = JointSpace(self.classifier)
            else:
                raise ConfigError("ErrorRetrieval needs a joint image-text embedder for this classifier, and none "
                                  "was given.", hint=f"Give --retrieval-model (default {DEFAULT_RETRIEVAL_MODEL}); "
                                                     "from Python, pass embedder= to the pipeline.")
        return self._space

    def _identity(self) -> dict[str, Any]:
        return {"embedder": model_part(self.space.info), "corpus_sha256": self.corpus.sha256}

    def _models_manifest(self) -> dict[str, Any]:
        return {"embedder": model_manifest(self.space.info)}

    def _reference_caption(self) -> str:
        cfg: ErrorRetrievalConfig = self.config  # type: ignore[assignment]
        return cfg.reference_caption or self.corpus.reference_caption

    def _propose(self, ctx: JobContext, units: UnitCache, img: Image.Image, image_sha: str, file_sha: str | None,
                 clf: dict, sample: Any, n: int) -> Proposal:
        cfg: ErrorRetrievalConfig = self.config  # type: ignore[assignment]
        ctx.check_cancelled()
        ctx.progress("Retrieving error sentences", 0, 1)
        name = sample.true_name
        texts = [s.fill(name) for s in self.corpus.sentences]
        reference = self._reference_caption().replace("{class}", name)
        image_emb = self._image_embedding(units, img, image_sha)
        text_embs = self._text_embeddings(units, [reference, *texts])
        order, scores = rank_sentences(image_emb, text_embs[0], text_embs[1:], contrast=cfg.contrast,
                                       filter_k=cfg.filter_k)
        ctx.progress("Retrieving error sentences", 1, 1)
        candidates = [Candidate(hypothesis=texts[i]) for i in order[:n]]
        notes = []
        if len(candidates) < n:
            notes.append(f"Only {len(candidates)} sentences were eligible ({n} requested).")

        def row(i: int) -> dict[str, Any]:
            s = self.corpus.sentences[i]
            return {"id": s.id, "category": s.category, "sentence": texts[i], "score": _finite(scores["score"][i]),
                    "sim_image": float(scores["sim_image"][i]), "sim_reference": float(scores["sim_reference"][i])}

        details = {"reference_caption": reference, "contrast": cfg.contrast, "corpus": cfg.corpus,
                   "corpus_size": len(texts),
                   "corpus_sources": self.corpus.sources, "ranking": [row(int(i)) for i in order[:cfg.show_top]],
                   "categories": [self.corpus.sentences[int(i)].category for i in order[:n]]}
        return Proposal(candidates=candidates, details=details, notes=notes)

    def _image_embedding(self, units: UnitCache, img: Image.Image, image_sha: str) -> np.ndarray:
        key = unit_key("joint-image-embedding", image_sha256=image_sha, embedder=model_part(self.space.info))
        hit = units.get(key)
        if hit is not None:
            return hit.load_array("embedding")
        emb = self.space.images([img])[0]
        units.put(key, "joint-image-embedding", {"image_sha256": image_sha, "embedder": model_part(self.space.info)},
                  {"embedding": emb})
        return emb

    def _text_embeddings(self, units: UnitCache, texts: list[str]) -> np.ndarray:
        key = unit_key("joint-text-embeddings", texts_sha256=sha_text("\n".join(texts)),
                       embedder=model_part(self.space.info))
        hit = units.get(key)
        if hit is not None:
            return hit.load_array("embeddings")
        embs = self.space.texts(texts)
        if embs.shape[0] != len(texts):
            raise ConfigError(f"The retrieval model returned {embs.shape[0]} text embeddings for {len(texts)} texts.")
        units.put(key, "joint-text-embeddings", {"count": len(texts), "embedder": model_part(self.space.info)},
                  {"embeddings": embs})
        return embs


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


@method_entry(METHOD + VALIDATED_SUFFIX, config=ErrorRetrievalConfig, version=VERSION,
                 default_components=retrieval_embedder,
                 inputs=Inputs(mllm="required", editor="interventions", embedder="optional"),
                 description="ErrorRetrieval with validation: the M best sentences, the one with the largest CEI "
                             "(Table 2).")
class ErrorRetrievalValidatedPipeline(ErrorRetrievalPipeline):
    VALIDATED = True


# The module's registry entries, named by its entry point (pyproject.toml, nemo_desktop.analyses).
ANALYSES = (ErrorRetrievalPipeline.ENTRY, ErrorRetrievalValidatedPipeline.ENTRY)

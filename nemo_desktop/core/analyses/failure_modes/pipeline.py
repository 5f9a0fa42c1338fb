"""The failure-modes analysis over a reference index (dataset kind): components injected, one __call__.

    pipe = FailureModesPipeline(classifier=clf, embedder=None, store=store, config=FailureModesConfig())
    result = pipe(index, ctx)          # FailureModesResult, stored under result.result_key

Stages (ctx stage names): "Joint embeddings: Embedding images" (resumable, cancellable between batches),
"Embedding sentences", "Analysing <group>" (split, clustering, ranking, evaluation per group; cancellable
between groups; one scipy Ward call cannot be interrupted). VQA relevance reports its own stage through
the context it was given.
The joint space is `embedder`, or the classifier itself when it is zero-shot (CLIP/SigLIP/open_clip);
an ordinary classifier without an embedder is a ConfigError. A result is keyed by the analysis version,
the index (id + content fingerprint), the embedder, the settings, the sentence set and the relevance
source; a re-run with the same key is answered from the store.
"""
from __future__ import annotations

import json
import time
from typing import Any, Sequence

import numpy as np

from .... import __version__
from ...base.errors import ConfigError
from ...base.job_context import JobContext
from ...store.keys import result_key
from .config import FailureModesConfig
from .discover import GroupData, analyse_group
from .embeddings import embedder_identity, image_embeddings, reuses_index_features, text_embeddings
from .result import STORE_KIND, VERSION, FailureModesResult
from .sentences import SentenceSet, load_sentence_sets
from .split import (Split, correctness_split, entropy_from_top5, entropy_split, probability_split,
                    ranking_split)

# Settings that change how the work is done, not what it finds, or that select an input whose identity is in
# the key already (the manifest: through the relevance identity's path, size and mtime): not part of the key.
_NOT_IN_KEY = ("embed_batch_size", "attributes_manifest")


def joint_space(classifier: Any, embedder: Any) -> Any:
    """The embedder, else a zero-shot classifier as its own joint space; a ConfigError when there is none."""
    if embedder is None:
        if classifier is None or not getattr(classifier, "zero_shot", False):
            raise ConfigError("Failure modes need a joint image-text space.",
                              hint="Choose an embedder (e.g. the catalog's open-clip-vit-b32-laion2b), or analyse "
                                   "an index built with a CLIP/SigLIP/open_clip classifier.")
        embedder = classifier
    for attr in ("embed", "embed_texts", "info"):
        if not hasattr(embedder, attr):
            raise ConfigError(f"{type(embedder).__name__} cannot embed both images and texts (no {attr}).",
                              hint="Use a CLIP/SigLIP/open_clip model as the embedder.")
    return embedder


class FailureModesPipeline:
    def __init__(self, classifier: Any = None, embedder: Any = None, store: Any = None,
                 config: FailureModesConfig | None = None, relevance: Any = None) -> None:
        self.config = config or FailureModesConfig()
        embedder = joint_space(classifier, embedder)
        if self.config.relevance != "none" and relevance is None:
            raise ConfigError(f"Relevance '{self.config.relevance}' was chosen but no relevance source was given.",
                              hint="Pass relevance=AttributeRelevance(<the CSV manifest>) or use relevance='none'.")
        self.classifier = classifier
        self.embedder = embedder
        self.store = store
        self.relevance = relevance if self.config.relevance != "none" else None
        mode = getattr(self.relevance, "mode", None)
        if self.config.relevance == "vqa" and mode is not None and mode != self.config.vqa_question:
            raise ConfigError(f"The VQA relevance source asks {mode} questions but the settings say "
                              f"vqa_question='{self.config.vqa_question}'.",
                              hint="Build VqaRelevance(question=config.vqa_question), so the result records what "
                                   "was asked.")

    # -- identity ---------------------------------------------------------------------------------------------
    def result_key(self, index: Any, sentences: SentenceSet) -> str:
        cfg = {k: v for k, v in self.config.to_dict().items() if k not in _NOT_IN_KEY}
        return result_key(STORE_KIND, version=VERSION, index_id=index.index_id, fingerprint=index.fingerprint(),
                          embedder=embedder_identity(self.embedder), config=cfg, sentences=sentences.sha256,
                          relevance=self.relevance.identity() if self.relevance is not None else None)

    def _check_classifier(self, index: Any) -> None:
        if self.classifier is None:
            return
        info = self.classifier.info
        if (info.model_id, info.revision) != (index.classifier_id, index.classifier_revision):
            raise ConfigError(f"The index {index.index_id} was built with {index.classifier_id}, not {info.model_id}.",
                              hint="Analyse an index built with this classifier (`nemo index DATASET --classifier "
                                   "ID`), or pass the classifier the index was built with.")

    # -- run --------------------------------------------------------------------------------------------------
    def __call__(self, index: Any, ctx: JobContext | None = None) -> FailureModesResult:
        ctx = ctx or JobContext()
        cfg = self.config
        self._check_classifier(index)
        if len(index) == 0:
            raise ConfigError(f"The index {index.index_id} holds no images.", hint="Build it on a dataset first.")
        sentences = load_sentence_sets(cfg.sentence_sets, index.class_names)
        key = self.result_key(index, sentences)
        if self.store is not None:
            rec = self.store.get(key)
            if rec is not None:
                return FailureModesResult.from_dict(rec.payload)
        timings: dict[str, float] = {}
        notes: list[str] = []

        t = time.perf_counter()
        joint = image_embeddings(index, self.embedder, self.store, ctx.sub("Joint embeddings"),
                                 batch_size=cfg.embed_batch_size)
        timings["embed_images"] = time.perf_counter() - t
        features = np.asarray(joint.matrix, np.float32)
        valid = ~np.isnan(features).any(axis=1)
        if not valid.all():
            notes.append(f"{int((~valid).sum())} image(s) could not be read and are left out")

        e = index.entries
        scores_all = self._scores(index, notes) if cfg.split == "entropy" else None
        groups = self._groups(index, valid)
        text_cache: dict[str, np.ndarray] = {}
        results = []
        for gi, (name, cidx, rows) in enumerate(groups):
            ctx.check_cancelled()
            ctx.progress(f"Analysing {name}", gi, len(groups))
            filled = sentences.filled(name if cidx is not None else None)
            t = time.perf_counter()
            if filled.sha256 not in text_cache:
                ctx.progress("Embedding sentences", 0, len(filled))
                text_cache[filled.sha256], _ = text_embeddings(filled.texts, filled.sha256, self.embedder, self.store)
                ctx.progress("Embedding sentences", len(filled), len(filled))
            timings["embed_sentences"] = timings.get("embed_sentences", 0.0) + time.perf_counter() - t
            rows, split, scores = self._split(index, rows, cidx, scores_all, valid)
            data = GroupData(name, cidx, rows, e.paths[rows], features[rows], e.correct[rows], e.labels[rows],
                             e.preds[rows], scores)
            rel = None
            if self.relevance is not None:
                t = time.perf_counter()
                rel = self.relevance.matrix([str(p) for p in data.paths], filled.sentences)
                timings["relevance"] = timings.get("relevance", 0.0) + time.perf_counter() - t
            t = time.perf_counter()
            g = analyse_group(data, split, text_cache[filled.sha256], filled.texts, cfg, index.class_names,
                              relevance=rel)
            timings["analyse"] = timings.get("analyse", 0.0) + time.perf_counter() - t
            if filled.texts != sentences.texts:
                g.sentences = filled.texts
            results.append(g)
            ctx.progress(f"Analysing {name}", gi + 1, len(groups))

        result = FailureModesResult(
            config=cfg.to_dict(), index=_index_info(index), sentences=[s.to_dict() for s in sentences.sentences],
            groups=results, evaluation=_macro(results, cfg.methods) if self.relevance is not None else None,
            p_at_k=_macro_p_at_k(results, cfg.p_at_k) if self.relevance is not None else None,
            manifest=self._manifest(index, sentences, joint.source, joint.embedded_now), notes=notes,
            timings=timings, result_key=key, excluded=int((~valid).sum()))
        if self.store is not None:
            self.store.put(key, STORE_KIND, result.to_dict())
        return result

    # -- pieces -----------------------------------------------------------------------------------------------
    def _groups(self, index: Any, valid: np.ndarray) -> list[tuple[str, int | None, np.ndarray]]:
        cfg, e = self.config, index.entries
        if not cfg.analyses_per_class:
            return [("all", None, np.flatnonzero(valid))]
        names = list(index.class_names)
        if cfg.classes:
            unknown = [c for c in cfg.classes if c not in names]
            if unknown:
                raise ConfigError(f"Unknown class(es): {', '.join(unknown[:5])}.",
                                  hint="Use class names of the classifier the index was built with.")
            wanted = [names.index(c) for c in cfg.classes]
        else:
            wanted = sorted(set(e.labels.tolist()))
        return [(names[c], c, np.flatnonzero(valid & (e.labels == c))) for c in wanted]

    def _split(self, index, rows, cidx, scores_all, valid) -> tuple[np.ndarray, Split, np.ndarray | None]:
        cfg, e = self.config, index.entries
        if cfg.split == "class-ranking":
            ranked_rows, split = ranking_split(e.labels[valid], e.preds[valid], cidx)
            return np.flatnonzero(valid)[ranked_rows], split, None
        if cfg.split == "entropy":
            s = scores_all[rows]
            return rows, entropy_split(s, cfg.a), s
        if cfg.split == "class-probability":
            s = e.prob_label[rows].astype(np.float64)
            return rows, probability_split(s, cfg.a), s
        s = e.correct[rows].astype(np.float64)
        return rows, correctness_split(s, cfg.a), s

    def _scores(self, index: Any, notes: list[str]) -> np.ndarray:
        """Per-row entropy; rows indexed before the entropy column get the top-5 estimate."""
        ent = np.asarray(index.entries.entropy, np.float64).copy()
        missing = np.flatnonzero(np.isnan(ent))
        if len(missing):
            if self.store is None:
                raise ConfigError("This index predates stored entropies and no results store was given to read "
                                  "its top-5 probabilities from.", hint="Re-index the dataset, or pass the store.")
            top5 = _top5_by_path(self.store, index.index_id)
            n_classes = len(index.class_names)
            for r in missing.tolist():
                ent[r] = entropy_from_top5(top5.get(str(index.entries.paths[r]), []), n_classes)
            notes.append(f"{len(missing)} image(s) were indexed before entropies were stored: their entropy is "
                         "estimated from the top-5 probabilities (re-index for exact values)")
        return ent

    def _manifest(self, index: Any, sentences: SentenceSet, joint_source: str, embedded_now: int) -> dict[str, Any]:
        import scipy

        clf = self.classifier.info if self.classifier is not None else None
        return {"analysis": "failure-modes", "analysis_version": VERSION, "nemo_version": __version__,
                "created_at": time.time(), "numpy": np.__version__, "scipy": scipy.__version__,
                "embedder": embedder_identity(self.embedder),
                "classifier": {"id": clf.model_id, "revision": clf.revision} if clf else
                {"id": index.classifier_id, "revision": index.classifier_revision},
                "joint_space": "classifier" if reuses_index_features(index, self.embedder) else "embedder",
                "joint_embeddings": joint_source, "images_embedded_now": embedded_now,
                "sentence_sets": list(sentences.specs), "sentences_sha256": sentences.sha256,
                "sentence_count": len(sentences),
                "relevance": _relevance_record(self.relevance)}


def _relevance_record(relevance: Any) -> dict[str, Any] | None:
    """The relevance source's identity, plus what it did when it says (VQA: the questions asked)."""
    if relevance is None:
        return None
    details = getattr(relevance, "details", None)
    return {**relevance.identity(), **(details() if callable(details) else {})}


def _index_info(index: Any) -> dict[str, Any]:
    return {"index_id": index.index_id, "fingerprint": index.fingerprint(), "dataset_root": index.dataset_root,
            "classifier_id": index.classifier_id, "classifier_revision": index.classifier_revision,
            "rows": len(index), "class_names": list(index.class_names)}


def _top5_by_path(store: Any, index_id: str) -> dict[str, list]:
    with store.transaction() as conn:
        return {p: json.loads(t) if t else [] for p, t in conn.execute(
            "SELECT path, top5 FROM index_entries WHERE index_id=? AND entropy IS NULL", (index_id,))}


def _macro(groups: Sequence[Any], methods: Sequence[str]) -> dict[str, Any]:
    """Per method, the mean of each metric over the groups where it is defined (n says over how many)."""
    out = {}
    for m in methods:
        row = {}
        for metric in ("ahr", "acr", "tpr", "ji"):
            vals = [g.evaluation["methods"][m][metric] for g in groups
                    if g.evaluation and g.evaluation["methods"][m][metric] is not None]
            row[metric] = float(np.mean(vals)) if vals else None
            row[f"{metric}_n"] = len(vals)
        out[m] = row
    return out


def _macro_p_at_k(groups: Sequence[Any], k: int) -> dict[str, Any]:
    """P@K of the clusters, the mean over the groups where it is defined (n says over how many)."""
    vals = [g.evaluation["p_at_k"]["value"] for g in groups
            if g.evaluation and g.evaluation.get("p_at_k", {}).get("value") is not None]
    return {"k": int(k), "value": float(np.mean(vals)) if vals else None, "n": len(vals)}

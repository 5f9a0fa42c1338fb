"""The jobs behind "Rank images by this sentence" and "Validate with CEI" on a failure-modes result (Qt-free).

Both work on the index the analysis ran on. Ranking uses the result's own joint space (its image embeddings are in
the store, so only the sentence is embedded); validation uses the session's classifier, MLLM and image editor."""
from __future__ import annotations

from typing import Any

from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.base.job_context import JobContext


def result_embedder(session, result: Any, ctx: JobContext) -> Any:
    """The joint space the result was computed in: the session's embedder or zero-shot classifier when it is that
    model, else the catalog model of that id, loaded as the embedder. GPU lane."""
    from nemo_desktop.core.models.catalog import get_entry

    want = result.manifest.get("embedder") or {}
    wanted = (want.get("id"), want.get("revision"))
    if wanted[0] is None:
        raise ConfigError("The result does not name the joint space it was computed in.")
    for kind in ("embedder", "classifier"):
        model = session.get(kind)
        if model is not None and hasattr(model, "embed_texts") and \
                (model.info.model_id, model.info.revision) == wanted:
            return model
    try:
        get_entry(wanted[0])
    except Exception:  # noqa: BLE001 - not a catalog id: nothing to load it from
        raise ConfigError(f"The result's joint space {wanted[0]} is not loaded, and the catalog has no model of "
                          "that id to load.", hint="Load that model as the embedder (a script can put it in the "
                                                   "session), or run the analysis again with a catalog embedder.")
    model = session.load("embedder", wanted[0], ctx, catalog_kind="classifier").model
    if model.info.revision != wanted[1]:
        raise ConfigError(f"The catalog's {wanted[0]} is revision {model.info.revision}, not the "
                          f"{wanted[1]} the result was computed with.", hint="Run the analysis again.")
    return model


def rank_images(session, result: Any, sentence: str, ctx: JobContext):
    """Every image of the result's index by similarity to `sentence` (a failure_modes.by_sentence.SentenceRanking)."""
    from nemo_desktop.core.analyses.failure_modes.by_sentence import rank_index
    from nemo_desktop.core.data.reference_index import ReferenceIndex

    store = session.store()
    ctx.progress("Loading the reference index", 0, None)
    index = ReferenceIndex.load(store, result.index["index_id"])
    space = result_embedder(session, result, ctx.sub("Joint space", 0.0, 0.2))
    return rank_index(index, sentence, embedder=space, store=store, ctx=ctx.sub("Ranking", 0.2, 1.0))


def cei_models(session) -> list[str]:
    """The session models a CEI check needs: an ordinary classifier's edits need an image editor."""
    return ["classifier", "mllm"] + ([] if session.classifier_is_zero_shot() else ["editor"])


def validate_with_cei(session, result: Any, mode: Any, sentence: str, ctx: JobContext):
    """`sentence` checked with CEI on the mode's misclassified images (validate.validate_sentence). GPU lane."""
    from nemo_desktop.core.analyses.failure_modes.validate import SentenceValidator, validate_sentence
    from nemo_desktop.core.data.reference_index import ReferenceIndex

    session.preflight(cei_models(session))
    models = ctx.sub("Models", 0.0, 0.1)
    classifier = session.ensure("classifier", models)
    mllm = session.ensure("mllm", models)
    editor = None if getattr(classifier, "zero_shot", False) else session.ensure("editor", models)
    store = session.store()
    index = ReferenceIndex.load(store, mode.index_id)
    validator = SentenceValidator(classifier, mllm, editor, store)
    return validate_sentence(result, index, validator, mode.group, mode.cluster, sentence,
                             ctx=ctx.sub("CEI", 0.1, 1.0))

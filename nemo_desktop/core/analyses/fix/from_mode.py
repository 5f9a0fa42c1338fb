"""A fix that starts from a failure mode (issue 29): a stored failure-modes result's key and the mode's position
in it (1 = the first, in the order list_modes gives and the app's picker shows) name the finding. Its images,
with their true labels read from the reference index the analysis ran on, join an edit fix's training data
(FixData.finding); its sentence is recorded with the data. Kept apart from the training code so that the two
change independently.

    settings = fix_settings_for_mode(store, key, position)   # the fix page's settings, and the mode's sentence
    settings = fix_settings_for_ref(store, mode_ref)         # the same for a ModeRef of the app's pickers
    data = with_mode_images(data, config, store, ctx)         # the pipeline adds the mode's images

A mode's image that is also one of the held-out images (affected/ or rest/, matched by pixels) is left out of
training and counted, so the before/after figures are never measured on images the fix trained on.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...base.errors import ConfigError
from ...base.job_context import JobContext

ANALYSIS = "failure-modes"


def load_modes(store: Any, key: str) -> tuple[Any, list[Any]]:
    """(the stored failure-modes result, its modes in list order)."""
    from ..failure_modes.members import list_modes
    from ..failure_modes.result import FailureModesResult

    hit = store.get(key) if store is not None and key else None
    if hit is None or hit.payload.get("analysis") != ANALYSIS:
        raise ConfigError(f"No stored failure-modes result has the key '{key}'.",
                          hint="Run the failure-modes analysis first and give its result key.")
    result = FailureModesResult.from_dict(hit.payload)
    return result, list_modes(result)


def pick_mode(store: Any, key: str, position: int) -> tuple[Any, Any]:
    """(result, ModeRef) of the mode at `position` (1-based) of the stored result `key`."""
    result, modes = load_modes(store, key)
    if not 1 <= int(position) <= len(modes):
        raise ConfigError(f"The failure-modes result {key[:12]} has {len(modes)} failure mode(s); there is no "
                          f"mode {position}.", hint=f"Give a position from 1 to {len(modes)}." if modes else None)
    return result, modes[int(position) - 1]


def position_of(modes: list[Any], group: int, cluster: int) -> int:
    """The 1-based position of the mode (group, cluster) among `modes`."""
    for i, m in enumerate(modes):
        if m.group == group and m.cluster == cluster:
            return i + 1
    raise ConfigError("That failure mode is not in its stored result any more.")


def _classes(result: Any, mode: Any) -> tuple[str, str]:
    """The mode's errors as (true classes, predicted classes), most frequent confusion first."""
    confusions = result.groups[mode.group].hard_clusters[mode.cluster].confusions
    true = dict.fromkeys(c["true"] for c in confusions)
    pred = dict.fromkeys(c["pred"] for c in confusions)
    return ",".join(true), ",".join(pred)


def fix_settings_for_mode(store: Any, key: str, position: int) -> dict[str, Any]:
    """{"settings": the fix page's form values, "title", "sentence", "best", "images"} for one failure mode: an
    edit fix whose targeted data is the mode's images with their true labels; the affected and predicted classes
    are the mode's confusions (used should the user add an edit or pick a control)."""
    result, mode = pick_mode(store, key, position)
    affected, predicted = _classes(result, mode)
    settings = {"data": "edit", "failure_modes": key, "failure_mode": int(position), "instruction": "",
                "cue_instruction": "", "affected_classes": affected, "predicted_classes": predicted}
    return {"settings": settings, "title": mode.title, "sentence": mode.sentence, "best": mode.best,
            "images": len(mode.paths)}


def fix_settings_for_ref(store: Any, mode: Any) -> dict[str, Any]:
    """fix_settings_for_mode for a failure_modes.members.ModeRef (the app's pickers hold those)."""
    if not mode.result_key:
        raise ConfigError("This failure-modes result is not stored, so a fix cannot name it.",
                          hint="Run the failure-modes analysis with a results store, then try the fix again.")
    _, modes = load_modes(store, mode.result_key)
    return fix_settings_for_mode(store, mode.result_key, position_of(modes, mode.group, mode.cluster))


def with_mode_images(data: Any, config: Any, store: Any, ctx: JobContext) -> Any:
    """`data` with the failure mode's images (true labels) added to its finding images, and what was added
    recorded in its description."""
    from ...data.reference_index import ReferenceIndex
    from ...base.images import load_image
    from ...store.keys import content_hash
    from ..failure_modes.members import mode_members

    if not (config.failure_modes and config.failure_mode):
        raise ConfigError("A failure mode is named by its result's key and its position; one of them is missing.",
                          hint="Give both --failure-modes KEY and --failure-mode N.")
    _, mode = pick_mode(store, config.failure_modes, config.failure_mode)
    if mode.index_id is None:
        raise ConfigError("The failure-modes result names no reference index, so its images' labels are unknown.")
    members, missing = mode_members(mode, ReferenceIndex.load(store, mode.index_id))
    held_out = {content_hash(im.convert("RGB")) for im, _ in data.affected + data.rest}
    items, overlap = [], 0
    for i, m in enumerate(members):
        ctx.check_cancelled()
        img = load_image(m.path)
        if content_hash(img) in held_out:
            overlap += 1
        else:
            items.append((img, data.class_index(m.true_name)))
        ctx.progress("Loading the failure mode's images", i + 1, len(members))
    if not items:
        raise ConfigError(f"None of the {len(mode.paths)} images of {mode.title.lower()} can be trained on "
                          f"({overlap} are held-out images, {missing} are no longer in the index).",
                          hint="Measure the fix on other held-out images than the ones the failure mode came from.")
    record = {"result": config.failure_modes, "position": int(config.failure_mode), "title": mode.title,
              "sentence": mode.sentence, "best": mode.best, "holds": mode.holds, "images": len(items),
              "held_out_excluded": overlap, "missing": missing}
    return replace(data, finding=list(data.finding) + items,
                   description={**data.description, "failure_mode": record})

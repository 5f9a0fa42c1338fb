"""The extra a model reference needs (base/extras.py names the extras): from the catalog alone, before anything is
loaded, so a command or the app can say "install nemo-desktop[editing]" instead of failing half-way."""
from __future__ import annotations

from nemo_desktop.core.base.extras import available, extra_for_family, require
from nemo_desktop.core.models.catalog import resolve_model_ref


def family_of(ref: str, kind: str) -> str | None:
    """The model family a reference names (catalog id or <family>:<source>), from the catalog alone; None when it
    cannot be told without loading (the loader then checks)."""
    try:
        return resolve_model_ref(ref, kind).family
    except Exception:  # noqa: BLE001 - an unknown reference is reported by whoever loads it
        return None


def extra_for_ref(ref: str | None, kind: str) -> str | None:
    """The extra a model reference needs that is not installed, else None."""
    family = family_of(ref, kind) if ref else None
    extra = extra_for_family(family) if family else None
    return extra if extra and not available(extra) else None


def require_for_ref(ref: str | None, kind: str) -> None:
    extra = extra_for_ref(ref, kind)
    if extra:
        require(extra, f"The {kind} {ref}")

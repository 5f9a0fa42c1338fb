"""The catalog of models NEMO Desktop knows by id (classifiers, multimodal LLMs, image editors).

    list_catalog("mllm")                 # CatalogEntry objects, shipped + user entries
    get_entry("vit-b16-augreg2").spec()  # -> registry.ModelSpec with catalog_id set
    resolve_model_ref("timm:local-dir:/models/mine", "classifier")   # an id or "<family>:<source>"

Shipped entries: `resources/catalog.json`. Users add or override entries (same id = replace) in
`<config dir>/catalog.json` (`get_paths().config_dir`; NEMO_HOME moves it), with the same format:

    {"entries": [{"id": "my-vit", "kind": "classifier", "family": "timm",
                  "repo": "me/my-vit", "source": "hf-hub:me/my-vit", "revision": "main",
                  "license": "apache-2.0", "gated": false, "disk_size_bytes": 346000000,
                  "vram_bf16_gb": 1.0, "recommended_gpu": "any", "description": "My fine-tuned ViT",
                  "options": {"class_file": "/data/my_classes.txt"}}]}

Entry fields: id, kind (classifier | mllm | editor | generator), family (a registered adapter family), repo (Hub repo id
or local path), source (what the family loader takes; default = repo), revision (branch or commit),
license, gated, disk_size_bytes, vram_bf16_gb, recommended_gpu, description; optional: parameters,
allow_patterns (files a download needs), options (family options), estimated (fields that are estimates),
paper_default, notes. Light module: no torch.
"""
from __future__ import annotations

import difflib
import json
from dataclasses import MISSING, dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..base.errors import ConfigError
from ..base.resources import resource_path
from .families import KINDS, ModelSpec

USER_CATALOG_NAME = "catalog.json"
ZERO_SHOT_FAMILIES = ("hf-clip", "hf-siglip", "open_clip")  # classifier families that classify by text prompts


@dataclass(frozen=True)
class CatalogEntry:
    id: str
    kind: str
    family: str
    repo: str
    revision: str
    license: str
    gated: bool
    disk_size_bytes: int
    vram_bf16_gb: float
    recommended_gpu: str
    description: str
    source: str | None = None
    parameters: int | None = None
    allow_patterns: tuple[str, ...] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    estimated: tuple[str, ...] = ()
    paper_default: bool = False
    notes: str = ""
    origin: str = "shipped"  # "shipped" or the user catalog file it came from

    def spec(self) -> ModelSpec:
        return ModelSpec(kind=self.kind, family=self.family, source=self.source or self.repo,
                         revision=self.revision or None, options=dict(self.options), catalog_id=self.id)

    @property
    def license_url(self) -> str:
        return f"https://huggingface.co/{self.repo}"

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["allow_patterns"] = list(self.allow_patterns) if self.allow_patterns is not None else None
        out["estimated"] = list(self.estimated)
        return out

    def problems(self) -> list[str]:
        """What is wrong with this entry (empty when valid); the registry check is separate."""
        out = []
        for name in ("id", "family", "repo", "revision", "license", "recommended_gpu", "description"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name).strip():
                out.append(f"'{name}' must be non-empty text")
        if self.kind not in KINDS:
            out.append(f"'kind' must be one of {', '.join(KINDS)} (got {self.kind!r})")
        if not isinstance(self.gated, bool):
            out.append("'gated' must be true or false")
        if not isinstance(self.disk_size_bytes, int) or isinstance(self.disk_size_bytes, bool) \
                or self.disk_size_bytes <= 0:
            out.append("'disk_size_bytes' must be a positive integer")
        if not isinstance(self.vram_bf16_gb, (int, float)) or isinstance(self.vram_bf16_gb, bool) \
                or self.vram_bf16_gb <= 0:
            out.append("'vram_bf16_gb' must be a positive number")
        if self.parameters is not None and (not isinstance(self.parameters, int) or self.parameters <= 0):
            out.append("'parameters' must be a positive integer")
        if not isinstance(self.options, dict):
            out.append("'options' must be an object")
        unknown = set(self.estimated) - {f.name for f in fields(self)}
        if unknown:
            out.append(f"'estimated' names unknown fields: {', '.join(sorted(unknown))}")
        return out


_REQUIRED = {f.name for f in fields(CatalogEntry) if f.default is MISSING and f.default_factory is MISSING}
_KNOWN = {f.name for f in fields(CatalogEntry)} - {"origin"}


def entry_from_dict(data: dict[str, Any], origin: str = "shipped") -> CatalogEntry:
    if not isinstance(data, dict):
        raise ConfigError(f"A catalog entry in {origin} is not a JSON object.")
    label = data.get("id", "<no id>")
    missing = sorted(_REQUIRED - set(data))
    unknown = sorted(set(data) - _KNOWN)
    if missing or unknown:
        parts = ([f"missing {', '.join(missing)}"] if missing else []) + \
                ([f"unknown {', '.join(unknown)}"] if unknown else [])
        raise ConfigError(f"Catalog entry '{label}' in {origin}: {'; '.join(parts)}.",
                          hint="See the catalog format in nemo_desktop/core/models/catalog.py.")
    values = dict(data)
    for key in ("allow_patterns", "estimated"):
        if values.get(key) is not None:
            values[key] = tuple(values[key])
    entry = CatalogEntry(**values, origin=origin)
    problems = entry.problems()
    if problems:
        raise ConfigError(f"Catalog entry '{label}' in {origin} is invalid: {'; '.join(problems)}.",
                          hint="Fix the entry in the catalog file.")
    return entry


def _entries_in(path: Path, origin: str) -> list[CatalogEntry]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"Cannot read the model catalog {path}.", hint="Fix or remove the file (it must be JSON "
                          "with an 'entries' list).", detail=repr(exc)) from exc
    items = data.get("entries") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise ConfigError(f"The model catalog {path} has no 'entries' list.")
    return [entry_from_dict(item, origin) for item in items]


@lru_cache(maxsize=1)
def _shipped() -> tuple[CatalogEntry, ...]:
    return tuple(_entries_in(resource_path("catalog.json"), "shipped"))


def user_catalog_path() -> Path:
    from ..store.paths import get_paths

    return get_paths().config_dir / USER_CATALOG_NAME


def _merged() -> dict[str, CatalogEntry]:
    entries = {e.id: e for e in _shipped()}
    user = user_catalog_path()
    if user.is_file():  # read every time: the user may edit it while the app runs
        for e in _entries_in(user, str(user)):
            entries[e.id] = e
    return entries


def list_catalog(kind: str | None = None) -> list[CatalogEntry]:
    if kind is not None and kind not in KINDS:
        raise ConfigError(f"Unknown model kind '{kind}'.", hint=f"Use one of: {', '.join(KINDS)}.")
    return [e for e in _merged().values() if kind is None or e.kind == kind]


def get_entry(entry_id: str) -> CatalogEntry:
    entries = _merged()
    if entry_id in entries:
        return entries[entry_id]
    folded = {k.lower(): v for k, v in entries.items()}
    if entry_id.lower() in folded:
        return folded[entry_id.lower()]
    close = difflib.get_close_matches(entry_id.lower(), list(folded), n=5, cutoff=0.5)
    close = close or [k for k in folded if entry_id.lower() in k][:5]
    hint = (f"Did you mean: {', '.join(folded[c].id for c in close)}? " if close else "") + \
        "`nemo models list` shows every id."
    raise ConfigError(f"No model with id '{entry_id}' in the catalog.", hint=hint)


def resolve_model_ref(ref: str, kind: str) -> ModelSpec:
    """A catalog id, or `<family>:<source>` (e.g. `timm:local-dir:/m`, `hf-clip:/models/clip`)."""
    from .families import list_families

    ref = ref.strip()
    entries = _merged()
    if ref in entries or ref.lower() in {k.lower() for k in entries}:
        entry = get_entry(ref)
        if entry.kind != kind:
            raise ConfigError(f"'{entry.id}' is a {entry.kind}, not a {kind}.",
                              hint=f"Pick a {kind} from `nemo models list`.")
        return entry.spec()
    family, sep, source = ref.partition(":")
    families = [f for k, f in list_families(kind)]
    if sep and family in families and source:
        return ModelSpec(kind=kind, family=family, source=source)
    try:
        get_entry(ref)
    except ConfigError as exc:
        raise ConfigError(f"'{ref}' is neither a catalog id nor <family>:<source>.",
                          hint=f"{exc.hint} {kind.capitalize()} families: {', '.join(families)} "
                               f"(e.g. timm:local-dir:/path/to/model).") from None
    raise AssertionError("unreachable")  # pragma: no cover


def clear_cache() -> None:
    """Forget the parsed shipped catalog (tests that point NEMO_RESOURCES elsewhere)."""
    _shipped.cache_clear()


def format_size(n_bytes: int) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n_bytes < 1000 or unit == "TB":
            return f"{n_bytes:.0f} {unit}" if unit == "B" else f"{n_bytes:.1f} {unit}"
        n_bytes /= 1000
    return f"{n_bytes} B"  # pragma: no cover


__all__ = ["CatalogEntry", "list_catalog", "get_entry", "resolve_model_ref", "entry_from_dict",
           "user_catalog_path", "format_size", "clear_cache", "USER_CATALOG_NAME"]

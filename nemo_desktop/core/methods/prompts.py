"""Versioned prompt templates shipped in `resources/prompts/` (one file per prompt: `<name>.v<N>.txt`).

    tpl = load_prompt("scitx_hypothesis")          # highest version on disk
    tpl.version                                    # "scitx_hypothesis/v1+3f9a0c12" (name, file version, text hash)
    text = tpl.render(true_label_1="cat", prediction="dog", ...)

The version includes a hash of the text, so editing a template changes every cache key that uses it.
Rendering substitutes `{identifier}` placeholders in a single pass: other braces (the JSON examples in the
paper's prompts) stay literal, and values inserted (model output, class names) are never formatted again.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from ..base.errors import ConfigError
from ..base.resources import resource_path

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_FILE = re.compile(r"^(?P<name>[A-Za-z0-9_\-]+)\.v(?P<n>\d+)\.txt$")


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    number: int  # the file's version number (v1, v2, ...)
    text: str
    path: Path

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @property
    def version(self) -> str:
        return f"{self.name}/v{self.number}+{self.sha256[:8]}"

    @property
    def placeholders(self) -> frozenset[str]:
        return frozenset(PLACEHOLDER.findall(self.text))

    def render(self, **values: object) -> str:
        missing = self.placeholders - values.keys()
        if missing:
            raise ConfigError(f"Prompt '{self.version}' needs values for: {', '.join(sorted(missing))}.",
                              hint="This is a bug in the method that fills the prompt.")
        return PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), self.text)


def _prompts_dir() -> Path:
    return resource_path("prompts")


def available_prompts() -> dict[str, list[int]]:
    """name -> sorted version numbers present on disk."""
    found: dict[str, list[int]] = {}
    for p in _prompts_dir().iterdir():
        m = _FILE.match(p.name)
        if m:
            found.setdefault(m["name"], []).append(int(m["n"]))
    return {k: sorted(v) for k, v in sorted(found.items())}


_cache: dict[tuple[str, int, int], PromptTemplate] = {}


def load_prompt(name: str, number: int | None = None) -> PromptTemplate:
    """Load `<name>.v<number>.txt` (the highest version when `number` is None)."""
    versions = available_prompts().get(name)
    if not versions:
        raise ConfigError(f"No prompt template named '{name}' in {_prompts_dir()}.",
                          hint="Reinstall NEMO Desktop, or check NEMO_RESOURCES.")
    n = versions[-1] if number is None else number
    if n not in versions:
        raise ConfigError(f"Prompt '{name}' has no version v{n} (available: "
                          f"{', '.join(f'v{v}' for v in versions)}).")
    path = _prompts_dir() / f"{name}.v{n}.txt"
    stamp = (str(path), n, path.stat().st_mtime_ns)
    tpl = _cache.get(stamp)
    if tpl is None:
        # Trailing whitespace is not part of the prompt (editors add newlines at the end of files).
        tpl = PromptTemplate(name, n, path.read_text(encoding="utf-8").rstrip(), path)
        _cache[stamp] = tpl
    return tpl

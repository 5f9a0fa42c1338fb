"""Fonts for the PDF renderer: the bundled DejaVu Sans, plus system fonts only for what it lacks.

DejaVu Sans (regular and bold, Bitstream Vera licence, see fonts/LICENSE-DejaVu.txt) ships with the
package, so a PDF looks the same on every machine and needs no installed font. It covers Latin, Greek,
Cyrillic, Arabic and Hebrew. Characters outside it (emoji, CJK) are looked up in well-known system fonts,
loaded only when the report contains such characters; whatever no font covers is shown as U+FFFD so the
rest of the line stays readable.
"""
from __future__ import annotations

import functools
import logging
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

log = logging.getLogger(__name__)

FONT_DIR = Path(__file__).resolve().parent / "fonts"
REGULAR = FONT_DIR / "DejaVuSans.ttf"
BOLD = FONT_DIR / "DejaVuSans-Bold.ttf"
REPLACEMENT = "\ufffd"

# Checked in order; the first that exist and cover missing characters become fallbacks.
SYSTEM_FALLBACKS: tuple[str, ...] = (
    "/usr/share/fonts/truetype/noto/NotoColorEmoji.ttf",
    "/usr/share/fonts/noto/NotoColorEmoji.ttf",
    "/usr/share/fonts/google-noto-emoji/NotoColorEmoji.ttf",
    "C:/Windows/Fonts/seguiemj.ttf",
    "/usr/share/fonts/truetype/ancient-scripts/Symbola_hint.ttf",
    "C:/Windows/Fonts/seguisym.ttf",
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/noto-cjk/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf",
    "C:/Windows/Fonts/msyh.ttc",
    "/System/Library/Fonts/Supplemental/Arial Unicode.ttf",
    "/Library/Fonts/Arial Unicode.ttf",
)

# Characters that need no glyph of their own (joiners, variation selectors, bidi marks, combining marks
# are handled by the shaper or the neighbouring glyph).
_NO_GLYPH_CATEGORIES = {"Cf", "Mn", "Me", "Zl", "Zp"}


@functools.lru_cache(maxsize=None)
def _cmap(path: str) -> frozenset[int]:
    from fontTools.ttLib import TTFont

    font = TTFont(path, fontNumber=0, lazy=True) if path.lower().endswith(".ttc") else TTFont(path, lazy=True)
    try:
        return frozenset(font.getBestCmap() or {})
    finally:
        font.close()


@dataclass
class FontPlan:
    fallbacks: list[Path]
    covered: frozenset[int]  # by DejaVu or a fallback
    main: frozenset[int] = frozenset()  # by DejaVu alone

    def in_main_font(self, text: str) -> bool:
        return all(ord(ch) in self.main for ch in text)

    def clean(self, text: str) -> str:
        """Drop control characters (keeping newlines and tabs as spaces) and replace uncovered ones."""
        out = []
        for ch in text:
            o = ord(ch)
            if o in self.covered or ch == "\n":
                out.append(ch)
            elif ch in "\t\r":
                out.append(" ")
            else:
                cat = unicodedata.category(ch)
                if cat == "Cc" or cat == "Cs":
                    continue
                out.append(ch if cat in _NO_GLYPH_CATEGORIES or ch == " " else REPLACEMENT)
        return "".join(out)


def plan_fonts(texts: Iterable[str], candidates: Iterable[str] | None = None) -> FontPlan:
    candidates = SYSTEM_FALLBACKS if candidates is None else candidates
    main = _cmap(str(REGULAR))
    covered = set(main)
    missing = {ord(ch) for t in texts for ch in t if ord(ch) not in covered and ch not in "\n\t\r"}
    missing = {o for o in missing if unicodedata.category(chr(o)) not in _NO_GLYPH_CATEGORIES | {"Cc", "Cs"}}
    fallbacks: list[Path] = []
    for cand in candidates if missing else ():
        p = Path(cand)
        if not p.is_file():
            continue
        try:
            cmap = _cmap(str(p))
        except Exception as exc:  # an unreadable system font is skipped, never fatal
            log.debug("font %s unusable: %s", p, exc)
            continue
        if cmap & missing:
            fallbacks.append(p)
            covered |= cmap
            missing -= cmap
        if not missing:
            break
    if missing:
        log.info("report: %d character(s) have no glyph in any available font; shown as U+FFFD", len(missing))
    return FontPlan(fallbacks, frozenset(covered), main)

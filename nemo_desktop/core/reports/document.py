"""The report document model: plain text, numbers and PNG/JPEG bytes in blocks and sections, rendered to
HTML (html.py) or PDF (pdf.py). Every string in it is untrusted (model output, file names) to both renderers."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Union

from .images import ReportImage

# Pixel bounds for embedded images: big enough to read, small enough that a 200-sample run stays portable.
MAIN_IMAGE_PX = 384
THUMB_PX = 160

SET_TITLES = {
    "A": "Set A: true class (correctly classified references)",
    "B": "Set B: predicted class (correctly classified references)",
    "C": "Set C: random references",
}


# ----------------------------------------------------------------------------------------------- blocks
@dataclass
class Paragraph:
    text: str
    style: str = "body"  # body | callout (the selected explanation) | muted | warning


@dataclass
class KeyValues:
    rows: list[tuple[str, str]]


Cell = Union[str, ReportImage]


@dataclass
class Table:
    header: list[str]
    rows: list[list[Cell]]
    align: list[str] | None = None  # per column "l" | "r" | "c"
    widths: list[float] | None = None  # relative column widths (PDF); HTML lets the browser decide
    caption: str = ""


@dataclass
class Figures:
    """Images shown side by side (wrapping), each with its caption."""

    images: list[ReportImage]
    caption: str = ""


@dataclass
class HistogramSeries:
    label: str
    counts: list[int]
    n: int
    mean: float | None


@dataclass
class Histogram:
    """Distribution per series over shared bins (`edges` has len(counts) + 1 entries)."""

    title: str
    x_label: str
    edges: list[float]
    series: list[HistogramSeries]

    def mean_text(self, s: HistogramSeries) -> str:
        """The series' mean as its label says it: "mean +12.3" on a CEI axis, "mean 0.97" on a 0-1 axis (one
        signed decimal made a mean competency of 0.968 read "+1.0")."""
        if s.mean is None:
            return "mean \u2014"
        span = self.edges[-1] - self.edges[0]
        return f"mean {s.mean:{'+' if self.edges[0] < 0 else ''}.{2 if span <= 2 else 1}f}"


@dataclass
class BeforeAfterRow:
    label: str
    n: int
    before: float | None  # accuracy in percent
    after: float | None
    before_ci: tuple[float, float] | None = None  # 95% interval, percent
    after_ci: tuple[float, float] | None = None


@dataclass
class BeforeAfter:
    """Accuracy before and after per set, on a 0-100 % axis, each with its interval and n (charts.py draws it)."""

    title: str
    rows: list[BeforeAfterRow]
    caption: str = ""


@dataclass
class ChangeRow:
    label: str
    n: int
    change: float | None  # points
    ci: tuple[float, float] | None = None
    flagged: bool = False  # beyond the margin (drawn in the warning colour)


@dataclass
class Changes:
    """Changes in points per row as bars from zero with their intervals; `margin` marks -margin (the guard's)."""

    title: str
    rows: list[ChangeRow]
    margin: float | None = None
    caption: str = ""


@dataclass
class IndexRow:
    anchor: str  # id of the section the row links to (built by us, never from model text)
    cells: list[str]


@dataclass
class Index:
    header: list[str]
    rows: list[IndexRow]


@dataclass
class Highlighted:
    """Text whose pieces carry weights in [0, 1] (e.g. token attribution). HTML shades each piece by its weight
    (escaped, the weight in its tooltip); PDF, which has no shading of runs here, brackets the pieces at or above
    `mark_at` (`plain()`)."""

    units: list[str]
    weights: list[float]
    caption: str = ""
    mark_at: float = 0.5

    def plain(self) -> str:
        return " ".join(f"[{u}]" if w >= self.mark_at else u for u, w in zip(self.units, self.weights))


Block = Union[Paragraph, KeyValues, Table, Figures, Histogram, Index, Highlighted, BeforeAfter, Changes]


@dataclass
class Section:
    title: str
    anchor: str = ""
    blocks: list[Block] = field(default_factory=list)
    children: list["Section"] = field(default_factory=list)
    new_page: bool = False  # PDF: start on a fresh page
    keep_together: bool = False  # PDF: start on a fresh page when it would split and fits on one (candidates)


@dataclass
class ReportDocument:
    kind: str  # "single" | "run"
    title: str
    subtitle: str
    generated_at: str
    sections: list[Section]
    meta: list[tuple[str, str]] = field(default_factory=list)

    def iter_sections(self) -> Iterator[tuple[int, Section]]:
        def walk(secs, depth):
            for s in secs:
                yield depth, s
                yield from walk(s.children, depth + 1)
        yield from walk(self.sections, 0)

    def iter_images(self) -> Iterator[ReportImage]:
        for _, s in self.iter_sections():
            for b in s.blocks:
                if isinstance(b, Figures):
                    yield from b.images
                elif isinstance(b, Table):
                    yield from (c for row in b.rows for c in row if isinstance(c, ReportImage))

    def iter_text(self) -> Iterator[str]:
        """Every string a renderer will draw (the PDF renderer checks font coverage with it)."""
        yield self.title
        yield self.subtitle
        for k, v in self.meta:
            yield k
            yield v
        for _, s in self.iter_sections():
            yield s.title
            for b in s.blocks:
                if isinstance(b, Paragraph):
                    yield b.text
                elif isinstance(b, KeyValues):
                    for k, v in b.rows:
                        yield k
                        yield v
                elif isinstance(b, (Table, Index)):
                    yield from b.header
                    rows = b.rows if isinstance(b, Table) else [r.cells for r in b.rows]
                    for row in rows:
                        for c in row:
                            yield c.caption if isinstance(c, ReportImage) else c
                    if isinstance(b, Table):
                        yield b.caption
                elif isinstance(b, Figures):
                    yield b.caption
                    for im in b.images:
                        yield im.caption
                elif isinstance(b, Histogram):
                    yield b.title
                    yield b.x_label
                    for srs in b.series:
                        yield srs.label
                elif isinstance(b, (BeforeAfter, Changes)):
                    yield b.title
                    yield b.caption
                    for r in b.rows:
                        yield r.label


# --------------------------------------------------------------------------------------------- format
DASH = "\u2014"

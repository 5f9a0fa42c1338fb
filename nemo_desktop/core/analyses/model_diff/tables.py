"""Plain tables of the measured differences, for reports and CSV export.

`difference_grid`: the mean accuracy difference (A - B) per pair of values of two attributes (the first two that
vary; CMNIST: digit x colour), averaged over the other attributes, each cell with its number of conditions.
Open conditions (free text) have no grid; `measurements_csv` lists every condition either way, `scores_csv` the
explanations' held-out scores, and `write_csv_export` writes both (`nemo compare run --csv` and the GUI's export).
"""
from __future__ import annotations

import csv
import io
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

from .differences import ConditionMeasurement


def difference_grid(measurements: Sequence[ConditionMeasurement]) \
        -> tuple[str, str, list[str], list[str], dict[tuple[str, str], tuple[float, int]]] | None:
    """(row attribute, column attribute, row values, column values, {(row, col): (mean delta, conditions)}),
    or None when fewer than two attributes vary."""
    if not measurements:
        return None
    names = [k for k, _ in measurements[0].condition.attributes]
    varying = [n for n in names if n != "text" and len({m.condition.get(n) for m in measurements}) > 1]
    if len(varying) < 2:
        return None
    row, col = varying[:2]
    cells: dict[tuple[str, str], list[float]] = defaultdict(list)
    for m in measurements:
        cells[(m.condition.get(row), m.condition.get(col))].append(m.delta)
    rows = _ordered({r for r, _ in cells})
    cols = _ordered({c for _, c in cells})
    return row, col, rows, cols, {k: (sum(v) / len(v), len(v)) for k, v in cells.items()}


def _ordered(values: set) -> list[str]:
    try:
        return sorted(values, key=float)
    except (TypeError, ValueError):
        return sorted(values)


def measurements_csv(test: Sequence[ConditionMeasurement], observed: Sequence[ConditionMeasurement] = ()) -> str:
    """One row per measured condition: which set it belongs to (held-out test conditions, or observed by the
    explainers), its attributes, label, n, both accuracies and the difference."""
    rows = [("held-out", m) for m in test] + [("observed", m) for m in observed]
    names: list[str] = []
    for _, m in rows:
        for k, _ in m.condition.attributes:
            if k not in names:
                names.append(k)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["set", *names, "label", "n", "accuracy_a", "accuracy_b", "difference_a_minus_b"])
    for which, m in rows:
        w.writerow([which, *(m.condition.get(n, "") for n in names), m.condition.label, m.n, f"{m.accuracy_a:.4f}",
                    f"{m.accuracy_b:.4f}", f"{m.delta:+.4f}"])
    return buf.getvalue()


def scores_csv(explanations: Sequence[Any]) -> str:
    """One row per explanation: its held-out scores with their n, how many conditions it observed, and why it
    failed when it did (a failed or unscored method has empty score cells, not zeros)."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["method", "observed_conditions", "n_held_out", "completeness", "completeness_undefined", "density",
                "density_undefined", "tokens", "unparsed", "unparsed_dropped", "error", "explanation"])
    for e in explanations:
        s = e.score
        w.writerow([e.method, e.observed_conditions, *(("", "", "", "", "", "", "", "") if s is None else (
            s.n, f"{s.completeness:.4f}", s.completeness_undefined, "" if s.density is None else f"{s.density:.4f}",
            s.density_undefined, s.tokens, s.unparsed, s.unparsed_dropped)), e.error or "", e.text])
    return buf.getvalue()


def scores_path(path: Path) -> Path:
    """Where the scores go beside the differences: diff.csv -> diff.scores.csv."""
    path = Path(path)
    return path.with_name(f"{path.stem}.scores{path.suffix or '.csv'}")


def write_csv_export(result: Any, path: Path) -> list[Path]:
    """The per-condition differences to `path` and the explanations' scores beside it (two tables of different
    shape, so two files), each written atomically. Returns both paths."""
    from ...store import atomic_write_text

    path = Path(path)
    atomic_write_text(path, measurements_csv(result.test, result.observed))
    atomic_write_text(scores_path(path), scores_csv(result.explanations))
    return [path, scores_path(path)]

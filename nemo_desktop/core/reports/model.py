"""The report data model and its builders, in one import (see document.py, format.py, sections/ and runs.py).

Where the builders read things (the contract other modules write to):

- A stored explanation is a `StoredResult` whose payload is `ExplanationResult.to_dict()` (or holds that
  dict under `payload["result"]`). Artifact names inside it (`sample.image_artifact`,
  `candidate.edited_artifact`, `observation.thumbnail_artifact`, the values of `evidence`) name artifacts
  of that same stored result.
- **LLM Match** is read from the stored payload's top-level field `llm_match`: a number in [0, 1], or a
  dict whose `score` (else `mean`) is that number. Results without it are left out of the LLM Match mean; the
  summary shows how many were judged.
- **Method** shown: the payload's top-level `method` label when present, else `ExplanationResult.method`.
- **Dataset / classifier** per result: payload `dataset` / `classifier`, else `manifest["dataset"]` /
  `manifest["classifier"]`, else the run config's `dataset` / `classifier`. The summary groups by (dataset,
  classifier, method).
- **Dataset-level sections** of a run report (the global explanation, ...) come from the builders registered
  with `sections.run_section`; a report of any analysis result from `sections.build_result_report`.
- Run items (`store.run_items`) with no stored result, or with an `error`, are listed as failures.
"""
from __future__ import annotations

from .document import (DASH, MAIN_IMAGE_PX, SET_TITLES, THUMB_PX, BeforeAfter, BeforeAfterRow, Block, Cell, ChangeRow,
                       Changes, Figures, Highlighted, Histogram, HistogramSeries, Index, IndexRow, KeyValues, Paragraph,
                       ReportDocument, Section, Table)
from .format import clip, fmt_cei, fmt_num, fmt_prob, llm_match_of
from .images import ImageCache, ReportImage
from .runs import build_run_report
from .sections import build_result_report
from .sections.sample import build_single_report, explanation_from_payload

__all__ = ["DASH", "MAIN_IMAGE_PX", "SET_TITLES", "THUMB_PX", "BeforeAfter", "BeforeAfterRow", "Block", "Cell",
           "ChangeRow", "Changes", "Figures", "Highlighted", "Histogram", "HistogramSeries", "ImageCache", "Index",
           "IndexRow", "KeyValues", "Paragraph", "ReportDocument",
           "ReportImage", "Section", "Table", "build_result_report", "build_run_report", "build_single_report",
           "clip", "explanation_from_payload", "fmt_cei", "fmt_num", "fmt_prob", "llm_match_of"]

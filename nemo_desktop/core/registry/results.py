"""The protocol every analysis result follows, so the store, the reports and the GUI treat them alike.

The result types implement it by deriving from the one result base, core/results.ResultBase (key, `to_dict` /
`from_dict` with a schema version); a plugin's result may do the same or implement the protocol itself."""
from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class AnalysisResult(Protocol):
    """kind: the analysis kind ('sample', 'dataset', 'model', 'fit'); analysis: its registry name;
    key: the results-store key (None until stored); manifest: models, versions, settings, date, app version."""

    @property
    def kind(self) -> str: ...

    @property
    def analysis(self) -> str: ...

    @property
    def key(self) -> str | None: ...

    manifest: dict[str, Any]

    def to_dict(self) -> dict[str, Any]: ...

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "AnalysisResult": ...

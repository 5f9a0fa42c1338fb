"""Reading explanation results back (Qt-free: jobs). Running a method on samples (`explain_samples`) is a model
job (`nemo_desktop.core.app.jobs.models`), so that the model worker process can run it."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from nemo_desktop.core.base.errors import ConfigError


def list_references(store) -> list[dict]:
    from nemo_desktop.core.data.reference_index import ReferenceIndex

    return ReferenceIndex.list(store)


@dataclass
class StoredSummary:
    key: str
    created_at: float
    method: str
    image: str
    image_sha256: str
    true_name: str
    pred_name: str
    cei: float | None
    explanation: str | None
    models: dict[str, str] = field(default_factory=dict)  # role (classifier, mllm, editor) -> model id


def list_results(store, limit: int = 500) -> list[StoredSummary]:
    out = []
    for r in store.find(kind="explanation", limit=limit):
        p, s = r.payload, r.payload.get("sample", {})
        models = {role: m["id"] for role, m in ((p.get("manifest") or {}).get("models") or {}).items()
                  if isinstance(m, dict) and m.get("id")}
        out.append(StoredSummary(r.key, r.created_at, p.get("method", "?"), Path(s.get("image_path") or "").name
                                 or "(image)", s.get("image_sha256", ""), s.get("true_name", "?"),
                                 s.get("pred_name", "?"), p.get("cei"), p.get("explanation"), models))
    return out


def results_for_sample(store, key: str) -> list:
    """The stored result `key` first, then the latest result of every other method on the same image."""
    first = store.get(key)
    if first is None:
        raise ConfigError("That result is no longer in the results store.",
                          hint="It may have been cleared (nemo cache clear); run the explanation again.")
    sha = first.payload.get("sample", {}).get("image_sha256")
    seen = {first.payload.get("method")}
    out = [first]
    if sha:
        for r in store.find(kind="explanation"):
            method = r.payload.get("method")
            if method not in seen and r.payload.get("sample", {}).get("image_sha256") == sha:
                seen.add(method)
                out.append(r)
    return out

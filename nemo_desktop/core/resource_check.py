"""Check that the files the program reads at run time are present and readable (for `nemo doctor`), in the folder
`resources.resources_root()` resolves (the shipped one, or the user's `NEMO_RESOURCES` copy)."""
from __future__ import annotations

from .errors import ConfigError
from .resources import resources_root

FOLDER = "resources"

# The files the program reads at run time: `nemo doctor` checks each is present and readable (a folder: every file
# in it). tests/core/test_resources.py fails when a shipped file is covered by no entry.
REQUIRED = (
    ("catalog.json",),
    ("prompts",),
    ("vocab",),
    ("error_corpus", "error_corpus.v1.json"),
    ("error_corpus", "failure_statements.v1.json"),
    ("benchmarks", "criteria.json"),
    ("benchmarks", "configs"),
    ("benchmarks", "imagenet_subset"),
    ("benchmarks", "objectnet"),
    ("model_diff",),
    ("icons", "nemo-desktop.svg"),
    ("icons", "nemo-desktop.png"),
)

def check_resources() -> list[dict]:
    """One row per required resource: its path and whether it is present and readable (for `nemo doctor`)."""
    rows = []
    try:
        root = resources_root()
    except ConfigError as exc:
        return [{"resource": FOLDER, "path": None, "ok": False, "problem": exc.message}]
    for parts in REQUIRED:
        p = root.joinpath(*parts)
        rows.append({"resource": "/".join(parts), "path": str(p), "ok": False, "problem": None})
        try:
            if p.is_dir():
                children = [c for c in p.iterdir() if c.is_file()]
                if not children:
                    raise OSError("the folder is empty")
                for c in children:
                    c.open("rb").close()
            elif p.is_file():
                p.open("rb").close()
            else:
                raise OSError("not found")
        except OSError as exc:
            rows[-1]["problem"] = exc.strerror or str(exc)
            continue
        rows[-1]["ok"] = True
    return rows

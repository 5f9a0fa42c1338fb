"""Check that the files the program reads at run time are present and readable (for `nemo doctor`), in the folder
`resources.resources_root()` resolves (the shipped one, or the user's `NEMO_RESOURCES` copy)."""
from __future__ import annotations

from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.base.resources import resource_file, resources_root, shipped_root

FOLDER = "resources"

# The files the program reads at run time, besides the prompt templates (every *.txt the package ships in prompts/;
# a user's NEMO_RESOURCES copy must have them all). tests/core/test_resources.py fails when a shipped file is
# covered by no entry.
REQUIRED = (
    ("catalog.json",),
    *(("vocab", f"{name}_classes.tsv") for name in ("imagenet1k", "imagenet_r", "objectnet_overlap", "imagenet_d")),
    ("error_corpus", "error_corpus.v1.json"),
    ("error_corpus", "failure_statements.v1.json"),
    ("benchmarks", "criteria.json"),
    *(("benchmarks", "configs", f"table{i}.toml") for i in range(1, 6)),
    ("benchmarks", "imagenet_subset", "mini_imagenet_synsets.txt"),
    ("benchmarks", "objectnet", "folder_to_objectnet_label.json"),
    ("model_diff", "cmnist_grid.v1.json"),
    ("model_diff", "digits_8x8.npz"),
    ("model_diff", "gender_captions.v1.json"),
    ("failure_modes", "sentences", "general.v1.json"),
    ("icons", "nemo-desktop.svg"),
    ("icons", "nemo-desktop.png"),
    ("desktop", "nemo-desktop.desktop"),
)


def shipped_prompts() -> list[str]:
    """The prompt templates the package itself ships (whatever folder NEMO_RESOURCES points to)."""
    folder = shipped_root() / "prompts"
    return sorted(f.name for f in folder.iterdir() if f.name.endswith(".txt"))


def required() -> list[tuple[str, ...]]:
    return [*REQUIRED, *(("prompts", name) for name in shipped_prompts())]


def check_resources() -> list[dict]:
    """One row per required file: its path and whether it is present and readable (for `nemo doctor`)."""
    try:
        root = resources_root()
    except ConfigError as exc:
        return [{"resource": FOLDER, "path": None, "ok": False, "problem": exc.message}]
    rows = []
    for parts in required():
        p = resource_file(*parts, root=root)
        row = {"resource": "/".join(parts), "path": str(p), "ok": False, "problem": None}
        try:
            if not p.is_file():
                raise OSError("not found")
            p.open("rb").close()
            row["ok"] = True
        except OSError as exc:
            row["problem"] = exc.strerror or str(exc)
        rows.append(row)
    return rows

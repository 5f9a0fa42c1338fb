"""Benchmark run configuration: datasets x classifiers x MLLMs x editors x methods, judges, selection.

A JSON or TOML file (see resources/benchmarks/configs/ for the paper's Tables 1-5):

    name = "table1"                    # the run id is <name>-<8 hex of the config's hash>
    seed = 0                           # selection (and the methods' seed unless their options set one)
    samples_per_dataset = 400
    [imagenet_subset]                  # optional extra observation source
    root = "/data/imagenet/val"        # val/<wnid>/... or flat + LOC_val_solution.csv
    classes = "mini-imagenet"          # or "all", or a file of wnids
    [[datasets]]
    kind = "imagenet-d"                # imagenet-r | objectnet | imagenet-d | folder | csv
    root = "/data/ImageNet-D"
    splits = ["background", "texture", "material"]
    [classifiers]                      # label = model reference
    ViT = "vit-b16-augreg2"            # catalog id, "<family>:<source>", or a table
    CLIP = { family = "hf-clip", source = "openai/clip-vit-base-patch32" }
    [mllms]
    "Qwen2.5-VL-7B" = "qwen2.5-vl-7b"
    [editors]
    Kontext = "flux-kontext-dev"
    editor_protocol = "reselect"       # with several editors: "reselect" (each editor runs the whole method)
                                       # or "rescore" (the first editor's explanations, re-tested by the others)
    [[methods]]
    label = "SciTX"
    method = "scitx"                   # method registry name
    options = { k = 3, m = 3 }         # fields of the method's config dataclass
    [judges]
    GPT = { model = { family = "openai-compatible", source = "https://api.openai.com/v1",
                      options = { model = "gpt-5-mini-2025-08-07", api_key = "env:OPENAI_API_KEY" } } }

Execution options (device, dtype, index_batch_size, judge_mode) do not change what is computed and are not
part of the hash, so shards on different GPUs share one run id. Neither is the reporting option
`[tables] missing = "drop" | "zero"` (how the tables treat a finished sample without a value, see
benchmark/tables.py): it is kept in the run's record when the run is created, and `nemo bench table
--missing` overrides it.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.errors import ConfigError
from ..base.secret_refs import find_inline_secrets
from .selection import DEFAULT_N

_LABEL = re.compile(r"^[^|/\n]{1,80}$")
EXECUTION_KEYS = ("device", "dtype", "index_batch_size", "judge_mode", "store")
REPORT_KEYS = ("tables",)  # how results are reported, not what is computed: outside the hash too
JUDGE_MODES = ("inline", "after")
EDITOR_PROTOCOLS = ("reselect", "rescore")


@dataclass(frozen=True)
class ModelRef:
    label: str
    kind: str  # classifier | mllm | editor
    ref: Any  # str, or dict {family, source, revision, options} / {ref, options}

    def spec(self):
        """The ModelSpec this reference names (catalog id, <family>:<source>, or an explicit table)."""
        from ..models.catalog import resolve_model_ref
        from ..models.families import ModelSpec

        r = self.ref
        if isinstance(r, str):
            return resolve_model_ref(r, self.kind)
        if "ref" in r:
            base = resolve_model_ref(str(r["ref"]), self.kind)
            options = {**base.options, **dict(r.get("options") or {})}
            return ModelSpec(base.kind, base.family, base.source, r.get("revision", base.revision), options,
                             base.catalog_id)
        return ModelSpec(self.kind, str(r["family"]), str(r["source"]), r.get("revision"), dict(r.get("options") or {}))


@dataclass(frozen=True)
class DatasetConfig:
    label: str
    kind: str
    root: str
    splits: tuple[str, ...] | None = None
    criterion: str | None = None  # generic datasets: the failure factor for LLM Match
    n: int | None = None  # overrides samples_per_dataset


@dataclass(frozen=True)
class MethodConfig:
    label: str
    method: str
    options: dict = field(default_factory=dict)
    validation: bool = False  # Table 2: chooses among candidates by CEI (SciTX always does)
    variant_of: str | None = None  # Table 2: the label of the same method without validation


@dataclass(frozen=True)
class JudgeConfig:
    label: str
    model: ModelRef
    max_attempts: int = 3
    max_new_tokens: int = 512


@dataclass(frozen=True)
class SubsetConfig:
    root: str
    classes: Any = "mini-imagenet"
    per_class: int | None = None


@dataclass
class BenchConfig:
    name: str
    seed: int
    samples_per_dataset: int
    datasets: list[DatasetConfig]
    classifiers: list[ModelRef]
    mllms: list[ModelRef]
    editors: list[ModelRef]
    methods: list[MethodConfig]
    judges: list[JudgeConfig]
    imagenet_subset: SubsetConfig | None
    aggregate: str = "max"
    device: str = "auto"
    dtype: str = "auto"
    index_batch_size: int = 32
    judge_mode: str = "inline"
    raw: dict = field(default_factory=dict)  # the config as given, minus execution options
    tables: dict = field(default_factory=dict)  # reporting options: {"missing": "drop" | "zero"}
    editor_protocol: str = "reselect"  # "reselect" | "rescore" (core/methods/rescore.py)

    @property
    def sha256(self) -> str:
        from ..store.keys import canonical_json
        import hashlib

        return hashlib.sha256(canonical_json(self.raw).encode("ascii")).hexdigest()

    @property
    def run_id(self) -> str:
        return f"{self.name}-{self.sha256[:8]}"

    def method(self, label: str) -> MethodConfig:
        return next(m for m in self.methods if m.label == label)


# ----------------------------------------------------------------------------------------------- loading

def load_config(path: str | Path) -> BenchConfig:
    """Read a .json or .toml config file."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise ConfigError(f"Benchmark config not found: {p}",
                          hint="Give a .toml or .json file; `nemo bench configs` lists the shipped examples.")
    text = p.read_text(encoding="utf-8")
    try:
        if p.suffix.lower() == ".toml":
            import tomllib

            data = tomllib.loads(text)
        else:
            data = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"The benchmark config {p} cannot be parsed: {exc}",
                          hint="Check its syntax (TOML for .toml files, JSON otherwise).") from exc
    return parse_config(data, base_dir=p.parent)


def parse_config(data: dict, *, base_dir: Path | None = None) -> BenchConfig:
    if not isinstance(data, dict):
        raise ConfigError("A benchmark config must be a table / object at the top level.")
    known = {"name", "seed", "samples_per_dataset", "datasets", "classifiers", "mllms", "mllm", "editors",
             "editor", "methods", "judges", "imagenet_subset", "aggregate", "editor_protocol", *EXECUTION_KEYS,
             *REPORT_KEYS}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"Unknown benchmark config key(s): {', '.join(unknown)}.",
                          hint=f"Known keys: {', '.join(sorted(known))}.")
    inline = find_inline_secrets(data)
    if inline:  # the config is stored with the run: a key in it would land in the results database
        raise ConfigError(f"The benchmark config holds a secret in {', '.join(inline)}.",
                          hint="Give the NAME of an environment variable (api_key = \"env:OPENAI_API_KEY\") or "
                               "'keyring:SERVICE/USER' instead of the key itself.")
    base_dir = base_dir or Path.cwd()
    name = str(data.get("name") or "bench")
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$", name):
        raise ConfigError(f"The run name '{name}' may only use letters, digits, '.', '_' and '-'.")
    seed = _int(data.get("seed", 0), "seed")
    n = _int(data.get("samples_per_dataset", DEFAULT_N), "samples_per_dataset", minimum=0)
    datasets = [_dataset(d, i, base_dir) for i, d in enumerate(_list(data.get("datasets"), "datasets"))]
    _unique([d.label for d in datasets], "dataset")
    classifiers = _models(data.get("classifiers"), "classifier", required=True)
    mllms = _models(data.get("mllms", data.get("mllm")), "mllm", required=False)
    editors = _models(data.get("editors", data.get("editor")), "editor", required=False)
    methods = [_method(m, i) for i, m in enumerate(_list(data.get("methods"), "methods"))]
    _unique([m.label for m in methods], "method")
    judges = [_judge(label, j) for label, j in _labelled(data.get("judges"), "judges")]
    subset = None
    if data.get("imagenet_subset"):
        s = data["imagenet_subset"]
        if not isinstance(s, dict) or not s.get("root"):
            raise ConfigError("imagenet_subset needs a 'root' folder.")
        per_class = s.get("per_class")
        subset = SubsetConfig(str(_path(s["root"], base_dir)), s.get("classes", "mini-imagenet"),
                              None if per_class is None else _int(per_class, "imagenet_subset.per_class", minimum=1))
    editor_protocol = str(data.get("editor_protocol", "reselect"))
    if editor_protocol not in EDITOR_PROTOCOLS:
        raise ConfigError(f"editor_protocol must be one of {', '.join(EDITOR_PROTOCOLS)}, not '{editor_protocol}'.",
                          hint="'reselect': every editor runs the whole method; 'rescore': the first editor's "
                               "explanations are tested again with the other editors (paper Table 3).")
    aggregate = str(data.get("aggregate", "max"))
    if aggregate not in ("max", "sum"):
        raise ConfigError(f"aggregate must be 'max' or 'sum', not '{aggregate}'.")
    judge_mode = str(data.get("judge_mode", "inline"))
    if judge_mode not in JUDGE_MODES:
        raise ConfigError(f"judge_mode must be one of {', '.join(JUDGE_MODES)}, not '{judge_mode}'.")
    tables = _tables(data.get("tables"))
    raw = {k: v for k, v in data.items() if k not in EXECUTION_KEYS and k not in REPORT_KEYS}
    # Paths are resolved against the config's folder, and the hash sees them resolved.
    raw["datasets"] = [{**d, "root": str(ds.root)} for d, ds in zip(_list(data.get("datasets"), "datasets"),
                                                                    datasets)]
    if subset is not None:
        raw["imagenet_subset"] = {**data["imagenet_subset"], "root": subset.root}
    return BenchConfig(name, seed, n, datasets, classifiers, mllms, editors, methods, judges, subset, aggregate,
                       str(data.get("device", "auto")), str(data.get("dtype", "auto")),
                       _int(data.get("index_batch_size", 32), "index_batch_size", minimum=1), judge_mode, raw,
                       tables, editor_protocol=editor_protocol)


def _tables(value: Any) -> dict:
    from .table_data import check_missing

    if value is None:
        return {"missing": "drop"}
    if not isinstance(value, dict) or set(value) - {"missing"}:
        raise ConfigError("'tables' takes one setting: missing = \"drop\" or \"zero\".")
    return {"missing": check_missing(str(value.get("missing", "drop")))}


def _int(value: Any, what: str, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"'{what}' must be an integer, not {value!r}.")
    if minimum is not None and value < minimum:
        raise ConfigError(f"'{what}' must be at least {minimum}.")
    return value


def _list(value: Any, what: str) -> list:
    if not value:
        raise ConfigError(f"The benchmark config lists no {what}.", hint=f"Add at least one entry to '{what}'.")
    if not isinstance(value, list):
        raise ConfigError(f"'{what}' must be a list of tables / objects.")
    return value


def _label(label: Any, what: str) -> str:
    text = str(label)
    if not _LABEL.match(text):
        raise ConfigError(f"The {what} label {text!r} is not usable.",
                          hint="Labels are 1-80 characters without '|' or '/'.")
    return text


def _unique(labels: list[str], what: str) -> None:
    dup = sorted({x for x in labels if labels.count(x) > 1})
    if dup:
        raise ConfigError(f"Two {what}s share the label(s) {', '.join(dup)}.", hint="Give each one its own label.")


def _path(value: Any, base_dir: Path) -> Path:
    p = Path(str(value)).expanduser()
    return (p if p.is_absolute() else base_dir / p).resolve()


def _dataset(d: Any, i: int, base_dir: Path) -> DatasetConfig:
    if not isinstance(d, dict) or not d.get("kind") or not d.get("root"):
        raise ConfigError(f"datasets[{i}] needs a 'kind' and a 'root'.")
    kind = str(d["kind"]).lower()
    splits = d.get("splits")
    if splits is not None and (not isinstance(splits, list) or not splits):
        raise ConfigError(f"datasets[{i}].splits must be a non-empty list.")
    nn = d.get("n")
    return DatasetConfig(_label(d.get("label", kind), "dataset"), kind, str(_path(d["root"], base_dir)),
                         tuple(splits) if splits else None, d.get("criterion"),
                         None if nn is None else _int(nn, f"datasets[{i}].n", minimum=0))


def _labelled(value: Any, what: str) -> list[tuple[str, Any]]:
    """A {label: ref} table, or a list of {label, model} / plain references."""
    if value is None:
        return []
    if isinstance(value, dict):
        return [(_label(k, what), v) for k, v in value.items()]
    if isinstance(value, (str,)):
        return [(_label(value, what), value)]
    if isinstance(value, list):
        out = []
        for i, v in enumerate(value):
            if isinstance(v, dict) and "model" in v:
                out.append((_label(v.get("label", f"{what}{i + 1}"), what), v))
            elif isinstance(v, str):
                out.append((_label(v, what), v))
            else:
                raise ConfigError(f"{what}[{i}] must be a model reference or a table with 'model'.")
        return out
    raise ConfigError(f"'{what}' must be a table of label = model reference, or a list.")


def _model_ref(label: str, ref: Any, kind: str) -> ModelRef:
    if isinstance(ref, dict) and "model" in ref:
        ref = ref["model"]
    if isinstance(ref, str) and ref.strip():
        return ModelRef(label, kind, ref.strip())
    if isinstance(ref, dict) and ("ref" in ref or ("family" in ref and "source" in ref)):
        return ModelRef(label, kind, dict(ref))
    raise ConfigError(f"The {kind} '{label}' needs a model reference: a catalog id, '<family>:<source>', or a "
                      "table with family and source.")


def _models(value: Any, kind: str, required: bool) -> list[ModelRef]:
    refs = [_model_ref(label, ref, kind) for label, ref in _labelled(value, f"{kind}s")]
    if required and not refs:
        raise ConfigError(f"The benchmark config lists no {kind}s.")
    _unique([r.label for r in refs], kind)
    return refs


def _method(m: Any, i: int) -> MethodConfig:
    if isinstance(m, str):
        m = {"method": m}
    if not isinstance(m, dict) or not m.get("method"):
        raise ConfigError(f"methods[{i}] needs a 'method' (a registered method name such as scitx).")
    options = dict(m.get("options") or {})
    name = str(m["method"])
    validation = bool(m.get("validation", validates(name, options)))
    return MethodConfig(_label(m.get("label", name), "method"), name, options, validation, m.get("variant_of"))


def validates(method: str, options: dict) -> bool:
    """Whether a method picks its explanation among candidates by CEI (Table 2's "w/ validation")."""
    return method == "scitx" or method.endswith("-validated") or bool(options.get("validate", False))


def _judge(label: str, j: Any) -> JudgeConfig:
    opts = j if isinstance(j, dict) else {}
    return JudgeConfig(label, _model_ref(label, j, "mllm"), _int(opts.get("max_attempts", 3), "max_attempts", 1),
                       _int(opts.get("max_new_tokens", 512), "max_new_tokens", 1))

"""User settings, persisted as JSON in `AppPaths.settings_file`, with a schema version and migrations.

Schema history (append a migration for every change; never edit a shipped one):
  v1  flat keys: device, dtype ("fp16"/"bf16"/"fp32"), cpu_offload, hf_token_env, hf_cache ("default"/"app"),
      default_classifier, default_mllm, default_editor, trust_remote_code, editor_resolution, scitx_k,
      scitx_m, endpoints, window_geometry. A file without "schema_version" is v1.
  v2  grouped sections compute / models / hub / scitx / gui plus the endpoints list; dtypes spelled as in
      torch ("float16", "bfloat16", "float32"); hub.cache "huggingface-default" | "app".

Keys this version does not know are kept (top level and inside each section) and written back, so an
older NEMO Desktop never destroys settings of a newer one that wrote at the same schema version.
Secrets are never stored: endpoints and the hub name an environment variable or "keyring:SERVICE/USER"
(resolved by core/base/secrets.py; `Endpoint.api_key_ref` gives the reference in that module's form).
"""
from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable

from ..base.errors import ConfigError
from ..base.secret_refs import SECRET_FIELD_NAMES as _SECRET_KEYS, is_secret_reference
from .atomic import atomic_write_text, corrupt_aside_name
from .paths import AppPaths, get_paths

log = logging.getLogger(__name__)

SETTINGS_SCHEMA_VERSION = 2

DEVICES_RE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")
DTYPES = ("auto", "float32", "float16", "bfloat16")
HF_CACHE_CHOICES = ("huggingface-default", "app")
MODEL_PROCESS_CHOICES = ("in-process", "worker")
# The names of core/models/profiles.py's PROFILES (the store sits below the models layer; a test keeps them equal).
MEMORY_PROFILES = ("80 GB", "48 GB", "24 GB", "CPU")


def _bad(where: str, problem: str) -> ConfigError:
    return ConfigError(f"Setting '{where}' {problem}.",
                       hint="Fix it in the settings dialog or the settings file, or delete the file to go back "
                            "to the defaults.")


def _check_secret_ref(where: str, value: Any) -> None:
    """A reference to a secret (env var NAME, env:NAME or keyring:SERVICE/USER), never the secret itself."""
    if value is None:
        return
    if not is_secret_reference(value):
        # Never echo the value: it may be the key someone pasted by mistake.
        raise _bad(where, "must be the NAME of an environment variable (e.g. OPENAI_API_KEY) or "
                          "'keyring:SERVICE/USER', not the key itself")


def secret_ref(value: str | None) -> str | None:
    """The reference in core/base/secrets.py's form: a bare variable NAME becomes 'env:NAME'."""
    if value is None or ":" in value:
        return value
    return f"env:{value}"


def _check(where: str, ok: bool, problem: str) -> None:
    if not ok:
        raise _bad(where, problem)


@dataclass
class _Section:
    """Known fields as attributes; unknown keys kept in `extra` and written back unchanged."""

    extra: dict = field(default_factory=dict, repr=False, kw_only=True)

    @classmethod
    def from_dict(cls, data: Any, where: str):
        _check(where, isinstance(data, dict), "must be a JSON object")
        names = {f.name for f in fields(cls) if f.name != "extra"}
        obj = cls(**{k: v for k, v in data.items() if k in names})
        obj.extra = {k: v for k, v in data.items() if k not in names}
        obj.validate(where)
        return obj

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        return {**self.extra, **out}

    def validate(self, where: str) -> None:
        pass


@dataclass
class ComputeSettings(_Section):
    device: str = "auto"  # auto | cpu | cuda | cuda:N | mps
    dtype: str = "auto"  # auto | float32 | float16 | bfloat16
    cpu_offload: bool = False  # let accelerate/diffusers offload layers when the GPU is too small
    # Where the GUI's model jobs run: "worker" (a supervised child process: a crash or an out-of-memory kill there
    # fails the job, not the app) or "in-process" (a thread of the app, for debugging). See core/app/worker. The CLI
    # always runs in one process.
    model_process: str = "worker"
    cancel_grace_s: float = 10.0  # worker mode: seconds a cancelled job may take before its process is restarted
    worker_memory_limit_gb: float | None = None  # worker mode: address-space cap of the model process (RLIMIT_AS)
    # The memory profile models load under ("80 GB", "48 GB", "24 GB", "CPU"; core/models/profiles.py), as the
    # CLI's --profile; None: every model as loaded.
    memory_profile: str | None = None

    def validate(self, where: str) -> None:
        _check(f"{where}.device", isinstance(self.device, str) and bool(DEVICES_RE.match(self.device)),
               "must be auto, cpu, cuda, cuda:N or mps")
        _check(f"{where}.dtype", self.dtype in DTYPES, f"must be one of {', '.join(DTYPES)}")
        _check(f"{where}.cpu_offload", isinstance(self.cpu_offload, bool), "must be true or false")
        _check(f"{where}.model_process", self.model_process in MODEL_PROCESS_CHOICES,
               f"must be one of {', '.join(MODEL_PROCESS_CHOICES)}")
        g = self.cancel_grace_s
        _check(f"{where}.cancel_grace_s", isinstance(g, (int, float)) and not isinstance(g, bool) and 0 < g <= 600,
               "must be a number of seconds between 0 and 600")
        m = self.worker_memory_limit_gb
        _check(f"{where}.worker_memory_limit_gb",
               m is None or (isinstance(m, (int, float)) and not isinstance(m, bool) and m >= 1),
               "must be null or a number of gigabytes of at least 1")
        _check(f"{where}.memory_profile", self.memory_profile is None or self.memory_profile in MEMORY_PROFILES,
               f"must be null or one of {', '.join(MEMORY_PROFILES)}")


@dataclass
class ModelDefaults(_Section):
    classifier: str | None = None  # catalog / registry ids chosen by default in the GUI and CLI
    mllm: str | None = None
    editor: str | None = None
    editor_resolution: int = 512  # side length the image editor works at
    trust_remote_code: bool = False  # only ever True when the user turns it on

    def validate(self, where: str) -> None:
        for name in ("classifier", "mllm", "editor"):
            value = getattr(self, name)
            _check(f"{where}.{name}", value is None or (isinstance(value, str) and value.strip() != ""),
                   "must be a model id or null")
        r = self.editor_resolution
        _check(f"{where}.editor_resolution",
               isinstance(r, int) and not isinstance(r, bool) and 64 <= r <= 4096 and r % 16 == 0,
               "must be a multiple of 16 between 64 and 4096")
        _check(f"{where}.trust_remote_code", isinstance(self.trust_remote_code, bool), "must be true or false")


@dataclass
class HubSettings(_Section):
    cache: str = "huggingface-default"  # share the user's HF cache, or "app": NEMO's own weights folder
    token_env: str | None = "HF_TOKEN"  # env var NAME holding the token, or "keyring:SERVICE/USER"

    @property
    def token_ref(self) -> str | None:
        """For `core.base.secret_refs.resolve_secret`."""
        return secret_ref(self.token_env)

    def validate(self, where: str) -> None:
        _check(f"{where}.cache", self.cache in HF_CACHE_CHOICES, f"must be one of {', '.join(HF_CACHE_CHOICES)}")
        _check_secret_ref(f"{where}.token_env", self.token_env)


@dataclass
class ScitxSettings(_Section):
    # The paper leaves K and M open; these defaults keep a diagnosis to a few editor runs.
    k: int = 5  # reference observations retrieved per evidence set
    m: int = 3  # candidate hypotheses generated and tested

    def validate(self, where: str) -> None:
        for name in ("k", "m"):
            v = getattr(self, name)
            _check(f"{where}.{name}", isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 64,
                   "must be a whole number between 1 and 64")


@dataclass
class GuiSettings(_Section):
    window_geometry: str | None = None  # base64 of QWidget.saveGeometry()

    def validate(self, where: str) -> None:
        g = self.window_geometry
        if g is None:
            return
        try:
            ok = isinstance(g, str) and bool(base64.b64decode(g.encode("ascii"), validate=True))
        except (binascii.Error, UnicodeEncodeError):
            ok = False
        _check(f"{where}.window_geometry", ok, "must be base64 text or null")


@dataclass
class Endpoint(_Section):
    """An OpenAI-compatible chat endpoint (a local vLLM / llama.cpp server or a hosted API)."""

    name: str = ""
    base_url: str = ""
    model: str = ""
    api_key_env: str | None = None  # env var NAME, or "keyring:SERVICE/USER"; None for servers without a key

    @property
    def api_key_ref(self) -> str | None:
        """For `core.base.secret_refs.resolve_secret`."""
        return secret_ref(self.api_key_env)

    def validate(self, where: str) -> None:
        _check(f"{where}.name", isinstance(self.name, str) and self.name.strip() != "", "must be a non-empty name")
        _check(f"{where}.base_url", isinstance(self.base_url, str) and self.base_url.startswith(("http://",
               "https://")), "must start with http:// or https://")
        _check(f"{where}.model", isinstance(self.model, str) and self.model.strip() != "", "must name a model")
        _check_secret_ref(f"{where}.api_key_env", self.api_key_env)
        secrets = sorted(k for k in self.extra if k.lower().replace("-", "_") in _SECRET_KEYS)
        _check(where, not secrets, f"contains {', '.join(secrets)}: NEMO Desktop never keeps keys in its settings; "
               "put the key in an environment variable and set api_key_env to that variable's NAME")


_SECTIONS: dict[str, type[_Section]] = {"compute": ComputeSettings, "models": ModelDefaults, "hub": HubSettings,
                                        "scitx": ScitxSettings, "gui": GuiSettings}


@dataclass
class Settings:
    compute: ComputeSettings = field(default_factory=ComputeSettings)
    models: ModelDefaults = field(default_factory=ModelDefaults)
    hub: HubSettings = field(default_factory=HubSettings)
    scitx: ScitxSettings = field(default_factory=ScitxSettings)
    gui: GuiSettings = field(default_factory=GuiSettings)
    endpoints: list[Endpoint] = field(default_factory=list)
    extra: dict = field(default_factory=dict, repr=False)  # unknown top-level keys, kept as they were
    # Not persisted: where the settings came from, and where a damaged file was moved to.
    source: Path | None = field(default=None, compare=False, repr=False)
    recovered_from: Path | None = field(default=None, compare=False, repr=False)

    def endpoint(self, name: str) -> Endpoint | None:
        return next((e for e in self.endpoints if e.name == name), None)

    def validate(self) -> "Settings":
        for name in _SECTIONS:
            getattr(self, name).validate(name)
        for i, e in enumerate(self.endpoints):
            e.validate(f"endpoints[{i}]")
        names = [e.name for e in self.endpoints]
        dupes = sorted({n for n in names if names.count(n) > 1})
        _check("endpoints", not dupes, f"has more than one endpoint named {', '.join(dupes)}")
        return self

    def to_dict(self) -> dict:
        out: dict[str, Any] = {**self.extra, "schema_version": SETTINGS_SCHEMA_VERSION}
        for name in _SECTIONS:
            out[name] = getattr(self, name).to_dict()
        out["endpoints"] = [e.to_dict() for e in self.endpoints]
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "Settings":
        """From a current-schema dict (run `migrate_settings_dict` first for older files)."""
        known = set(_SECTIONS) | {"endpoints", "schema_version"}
        kwargs: dict[str, Any] = {name: sec.from_dict(data.get(name, {}), name) for name, sec in _SECTIONS.items()}
        endpoints = data.get("endpoints", [])
        _check("endpoints", isinstance(endpoints, list), "must be a list")
        kwargs["endpoints"] = [Endpoint.from_dict(e, f"endpoints[{i}]") for i, e in enumerate(endpoints)]
        s = cls(**kwargs, extra={k: v for k, v in data.items() if k not in known})
        return s.validate()


# ---------------------------------------------------------------- migrations

def _v1_to_v2(old: dict) -> dict:
    d = dict(old)
    take = d.pop
    dtype = take("dtype", "auto")
    hf_cache = take("hf_cache", "default")
    new = {
        "compute": {"device": take("device", "auto"),
                    "dtype": {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}.get(dtype, dtype),
                    "cpu_offload": take("cpu_offload", False)},
        "models": {"classifier": take("default_classifier", None), "mllm": take("default_mllm", None),
                   "editor": take("default_editor", None), "editor_resolution": take("editor_resolution", 512),
                   "trust_remote_code": take("trust_remote_code", False)},
        "hub": {"cache": "huggingface-default" if hf_cache == "default" else hf_cache,
                "token_env": take("hf_token_env", "HF_TOKEN")},
        "scitx": {"k": take("scitx_k", 5), "m": take("scitx_m", 3)},
        "gui": {"window_geometry": take("window_geometry", None)},
        "endpoints": take("endpoints", []),
    }
    d.pop("schema_version", None)
    return {**d, **new, "schema_version": 2}  # keys v1 did not know stay at the top level


# from_version -> function returning the dict at from_version + 1
SETTINGS_MIGRATIONS: dict[int, Callable[[dict], dict]] = {1: _v1_to_v2}


def migrate_settings_dict(data: dict, source: object = "settings") -> dict:
    version = data.get("schema_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ConfigError(f"The settings file {source} has an invalid schema_version {version!r}.",
                          hint="Fix or delete the file to go back to the defaults.")
    if version > SETTINGS_SCHEMA_VERSION:
        raise ConfigError(
            f"The settings file {source} was written by a newer version of NEMO Desktop (settings schema "
            f"{version}; this version understands up to {SETTINGS_SCHEMA_VERSION}).",
            hint="Upgrade NEMO Desktop, or point NEMO_HOME at another folder to keep separate settings for this "
                 "version. The file was left untouched.")
    while version < SETTINGS_SCHEMA_VERSION:
        data = SETTINGS_MIGRATIONS[version](data)
        version += 1
        if data.get("schema_version") != version:  # a bug in a migration, not in the user's file
            raise RuntimeError(f"settings migration to v{version} did not set schema_version")
    return data


# ---------------------------------------------------------------- load / save

def _settings_path(paths: AppPaths | None, path: str | os.PathLike | None) -> Path:
    if path is not None:
        return Path(path)
    return (paths or get_paths()).settings_file


def _move_aside(path: Path) -> Path:
    target = corrupt_aside_name(path)
    os.replace(path, target)
    return target


def load_settings(paths: AppPaths | None = None, *, path: str | os.PathLike | None = None) -> Settings:
    """Settings from disk; defaults when there is no file. Read-only: migrated settings are written on save.

    Unreadable JSON -> the file is moved aside with a timestamp and defaults are used (warning logged).
    A newer schema or an invalid value -> ConfigError saying which setting and what to do."""
    p = _settings_path(paths, path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        return Settings(source=p)
    except OSError as exc:
        raise ConfigError(f"The settings file {p} cannot be read.",
                          hint="Check its permissions, or point NEMO_HOME at another folder.",
                          detail=repr(exc)) from exc
    try:
        data = json.loads(raw.decode("utf-8"))
        if not isinstance(data, dict):
            raise ValueError(f"top level is a JSON {type(data).__name__}, not an object")
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        try:
            moved = _move_aside(p)
        except OSError as move_exc:
            raise ConfigError(f"The settings file {p} is damaged and could not be moved aside.",
                              hint="Move or delete it yourself; NEMO Desktop then starts with default settings.",
                              detail=f"{exc!r}; {move_exc!r}") from exc
        log.warning("The settings file %s could not be read (%s); it was moved to %s and default settings are "
                    "used.", p, exc, moved)
        return Settings(source=p, recovered_from=moved)
    try:
        settings = Settings.from_dict(migrate_settings_dict(data, p))
    except ConfigError as exc:
        if str(p) in exc.message:
            raise
        raise ConfigError(f"{exc.message} (in {p})", hint=exc.hint, detail=exc.detail) from exc
    settings.source = p
    return settings


def save_settings(settings: Settings, paths: AppPaths | None = None, *,
                  path: str | os.PathLike | None = None) -> Path:
    """Validate and write atomically (never leaves a half-written settings file)."""
    p = Path(path) if path is not None else (settings.source if paths is None and settings.source
                                             else _settings_path(paths, None))
    settings.validate()
    text = json.dumps(settings.to_dict(), indent=2, ensure_ascii=False) + "\n"
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(p, text)
    except OSError as exc:
        raise ConfigError(f"The settings could not be saved to {p}.",
                          hint="Check the folder's permissions and free space, or point NEMO_HOME elsewhere.",
                          detail=repr(exc)) from exc
    settings.source = p
    return p

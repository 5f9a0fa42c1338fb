"""Per-user paths (platformdirs), with `NEMO_HOME` overriding the root and a portable mode.

Layout under the root (or the platform's standard places when no root is set):
    config/settings.json    logs/nemo.log    store/results.sqlite    store/artifacts/
    thumbnails/             weights/  (app-managed weights; by default the user's Hugging Face cache is used)

Portable mode (`NEMO_PORTABLE=1`) keeps everything inside the checkout: data under `models_cache/nemo_home`
and weights (HF_HOME) under `models_cache/huggingface`.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import StoreError

APP_NAME = "nemo-desktop"
APP_AUTHOR = "NEMO"


def checkout_root() -> Path:
    return Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class AppPaths:
    config_dir: Path
    log_dir: Path
    store_dir: Path
    thumbnails_dir: Path
    weights_dir: Path
    portable: bool = False

    @property
    def settings_file(self) -> Path:
        return self.config_dir / "settings.json"

    @property
    def database(self) -> Path:
        return self.store_dir / "results.sqlite"

    @property
    def artifacts_dir(self) -> Path:
        return self.store_dir / "artifacts"

    @property
    def log_file(self) -> Path:
        return self.log_dir / "nemo.log"

    def hf_cache_dir(self) -> str | None:
        """Where Hugging Face weights go: None means huggingface_hub's own default (HF_HOME / ~/.cache)."""
        return str(self.weights_dir / "huggingface") if self.portable else None

    def as_dict(self) -> dict[str, str]:
        return {"config": str(self.config_dir), "settings_file": str(self.settings_file), "logs": str(self.log_dir),
                "store": str(self.store_dir), "database": str(self.database),
                "artifacts": str(self.artifacts_dir), "thumbnails": str(self.thumbnails_dir),
                "weights": str(self.weights_dir)}

    def ensure(self) -> "AppPaths":
        """Create every directory; an unwritable root gives a clear StoreError."""
        for d in (self.config_dir, self.log_dir, self.store_dir, self.artifacts_dir, self.thumbnails_dir,
                  self.weights_dir):
            ensure_writable_dir(d)
        return self


def ensure_writable_dir(d: Path) -> Path:
    """mkdir -p and prove we can write there, or raise a StoreError that says what to do."""
    try:
        d.mkdir(parents=True, exist_ok=True)
        probe = d / ".nemo-write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise StoreError(
            f"NEMO Desktop cannot write to {d}.",
            hint="Check the folder's permissions and free space, or choose another location with the "
                 "NEMO_HOME environment variable (e.g. NEMO_HOME=~/nemo-data).",
            detail=repr(exc)) from exc
    return d


def _under(root: Path, portable: bool = False) -> AppPaths:
    return AppPaths(config_dir=root / "config", log_dir=root / "logs", store_dir=root / "store",
                    thumbnails_dir=root / "thumbnails", weights_dir=root / "weights", portable=portable)


def get_paths(home: str | os.PathLike | None = None, portable: bool | None = None) -> AppPaths:
    """Resolve the paths in use: explicit `home`, else NEMO_HOME, else portable mode, else platformdirs."""
    if portable is None:
        portable = os.environ.get("NEMO_PORTABLE", "").lower() in ("1", "true", "yes")
    home = home or os.environ.get("NEMO_HOME")
    if home:
        return _under(Path(home).expanduser())
    if portable:
        root = checkout_root() / "models_cache"
        p = _under(root / "nemo_home", portable=True)
        return AppPaths(p.config_dir, p.log_dir, p.store_dir, p.thumbnails_dir, root, portable=True)
    import platformdirs

    dirs = platformdirs.PlatformDirs(APP_NAME, APP_AUTHOR)
    data = Path(dirs.user_data_dir)
    return AppPaths(config_dir=Path(dirs.user_config_dir), log_dir=Path(dirs.user_log_dir),
                    store_dir=data / "store", thumbnails_dir=Path(dirs.user_cache_dir) / "thumbnails",
                    weights_dir=data / "weights")

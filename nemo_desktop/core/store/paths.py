"""Per-user paths (platformdirs), with `NEMO_HOME` overriding the root and a portable mode.

Layout under the root (or the platform's standard places when no root is set):
    config/settings.json    logs/nemo.log    store/results.sqlite    store/artifacts/
    thumbnails/             weights/  (app-managed weights; by default the user's Hugging Face cache is used)

Portable mode keeps everything, weights included, in one folder: data under `<folder>/nemo_home`, the Hugging
Face hub cache under `<folder>/huggingface`, the torch hub cache (LPIPS' AlexNet trunk, the FID Inception) under
`<folder>/torch` (TORCH_HOME, set by `use_portable_caches` unless the user set it), the demo's classifier under
`<folder>/demo`. `NEMO_PORTABLE=1` uses the checkout's `models_cache/` (only when run from a checkout; see its
README); `NEMO_PORTABLE=/some/dir` uses that folder. An installed copy never writes into its own
site-packages: without a checkout, portable mode needs a folder and says so.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..base.errors import StoreError

APP_NAME = "nemo-desktop"
APP_AUTHOR = "NEMO"


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")


def checkout_root() -> Path | None:
    """The source checkout this package runs from, or None for an installed copy (a wheel in site-packages)."""
    root = Path(__file__).resolve().parents[3]
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file() or "site-packages" in root.parts or "dist-packages" in root.parts:
        return None
    try:
        return root if 'name = "nemo-desktop"' in pyproject.read_text(encoding="utf-8") else None
    except OSError:
        return None


def portable_root(setting: str | None = None) -> Path:
    """The folder portable mode keeps everything in: a path given in NEMO_PORTABLE, else the checkout's
    models_cache/. StoreError when neither exists (an installed copy has no checkout to write into)."""
    setting = (os.environ.get("NEMO_PORTABLE", "") if setting is None else setting).strip()
    if setting and setting.lower() not in _TRUE:
        return Path(setting).expanduser().resolve()
    checkout = checkout_root()
    if checkout is None:
        raise StoreError(
            "Portable mode needs a folder to keep data and weights in, and this is an installed copy of NEMO "
            "Desktop (no checkout): it does not write into its own installation folder.",
            hint="Give the folder: NEMO_PORTABLE=/path/to/folder (or `--portable-dir DIR`), or use --home DIR.")
    return checkout / "models_cache"


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


def use_portable_caches(paths: AppPaths) -> None:
    """In portable mode, point the torch hub cache into the portable folder too (TORCH_HOME=<folder>/torch), unless
    TORCH_HOME is already set: torch.hub reads it at each call, so LPIPS' and the FID Inception's weights then live
    beside the Hugging Face weights. Called by the CLI and the app at start-up, before any model is loaded."""
    if paths.portable and not os.environ.get("TORCH_HOME"):
        os.environ["TORCH_HOME"] = str(paths.weights_dir / "torch")


def _under(root: Path, portable: bool = False) -> AppPaths:
    return AppPaths(config_dir=root / "config", log_dir=root / "logs", store_dir=root / "store",
                    thumbnails_dir=root / "thumbnails", weights_dir=root / "weights", portable=portable)


def get_paths(home: str | os.PathLike | None = None, portable: bool | None = None) -> AppPaths:
    """Resolve the paths in use: explicit `home`, else NEMO_HOME, else portable mode, else platformdirs."""
    if portable is None:
        portable = os.environ.get("NEMO_PORTABLE", "").strip().lower() not in _FALSE
    home = home or os.environ.get("NEMO_HOME")
    if home:
        return _under(Path(home).expanduser())
    if portable:
        root = portable_root()
        p = _under(root / "nemo_home", portable=True)
        return AppPaths(p.config_dir, p.log_dir, p.store_dir, p.thumbnails_dir, root, portable=True)
    import platformdirs

    dirs = platformdirs.PlatformDirs(APP_NAME, APP_AUTHOR)
    data = Path(dirs.user_data_dir)
    return AppPaths(config_dir=Path(dirs.user_config_dir), log_dir=Path(dirs.user_log_dir),
                    store_dir=data / "store", thumbnails_dir=Path(dirs.user_cache_dir) / "thumbnails",
                    weights_dir=data / "weights")

from pathlib import Path

import pytest

from nemo_desktop.core.errors import StoreError
from nemo_desktop.core.store.paths import checkout_root, get_paths


def test_nemo_home_overrides_everything(tmp_path, monkeypatch):
    monkeypatch.setenv("NEMO_HOME", str(tmp_path / "h"))
    p = get_paths()
    for d in (p.config_dir, p.log_dir, p.store_dir, p.thumbnails_dir, p.weights_dir):
        assert d.is_relative_to(tmp_path / "h")
    assert p.hf_cache_dir() is None  # weights go to the user's standard Hugging Face cache


def test_platformdirs_default_is_per_user(monkeypatch):
    monkeypatch.delenv("NEMO_HOME")
    p = get_paths()
    assert "nemo-desktop" in str(p.config_dir) and "nemo-desktop" in str(p.store_dir)
    assert p.config_dir != p.store_dir != p.log_dir


def test_portable_mode_stays_inside_the_checkout(monkeypatch):
    monkeypatch.delenv("NEMO_HOME")
    monkeypatch.setenv("NEMO_PORTABLE", "1")
    p = get_paths()
    root = checkout_root() / "models_cache"
    assert p.portable and p.store_dir.is_relative_to(root) and p.weights_dir == root
    assert Path(p.hf_cache_dir()).is_relative_to(root)


def test_ensure_creates_directories_and_rejects_unwritable_root(tmp_path):
    p = get_paths(tmp_path / "ok").ensure()
    assert p.artifacts_dir.is_dir() and p.thumbnails_dir.is_dir()
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError, match="cannot write") as e:
        get_paths(blocker / "sub").ensure()
    assert "NEMO_HOME" in e.value.hint

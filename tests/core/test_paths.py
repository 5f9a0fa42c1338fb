from pathlib import Path

import pytest

from nemo_desktop.core.base.errors import StoreError
from nemo_desktop.core.store.paths import checkout_root, get_paths, use_portable_caches


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


def test_an_installed_copy_never_writes_portable_data_into_site_packages(monkeypatch):
    """Without a checkout (a wheel in site-packages) portable mode needs a folder, and says so."""
    from nemo_desktop.core.store import paths as paths_mod

    monkeypatch.delenv("NEMO_HOME")
    monkeypatch.setattr(paths_mod, "checkout_root", lambda: None)
    monkeypatch.setenv("NEMO_PORTABLE", "1")
    with pytest.raises(StoreError, match="installed copy") as err:
        get_paths()
    assert "NEMO_PORTABLE=/path/to/folder" in err.value.hint


def test_portable_mode_in_a_folder_the_user_gives(tmp_path, monkeypatch):
    monkeypatch.delenv("NEMO_HOME")
    monkeypatch.setenv("NEMO_PORTABLE", str(tmp_path / "stick"))
    p = get_paths().ensure()
    assert p.portable and p.weights_dir == tmp_path / "stick" and p.store_dir.is_relative_to(tmp_path / "stick")
    assert p.hf_cache_dir() == str(tmp_path / "stick" / "huggingface")


def test_checkout_root_is_only_a_checkout(tmp_path):
    root = checkout_root()
    assert root is not None and (root / "pyproject.toml").is_file()  # the tests run from a checkout
    assert "site-packages" not in root.parts


def test_cli_portable_dir_option(tmp_path, monkeypatch, capsys):
    import json

    from nemo_desktop.cli.main import main

    monkeypatch.delenv("NEMO_HOME")
    monkeypatch.setenv("NEMO_PORTABLE", "")  # recorded, so main()'s change is undone afterwards
    assert main(["--portable-dir", str(tmp_path / "p"), "doctor", "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["paths"]["portable"] is True and facts["paths"]["weights"] == str(tmp_path / "p")


def test_portable_mode_keeps_the_torch_hub_cache_in_its_folder(tmp_path, monkeypatch):
    """LPIPS' AlexNet trunk and the FID Inception come from the torch hub cache: in portable mode it is
    <folder>/torch, beside the Hugging Face weights; a TORCH_HOME the user set wins; other modes leave it alone."""
    import torch

    monkeypatch.delenv("NEMO_HOME")
    use_portable_caches(get_paths())
    assert "TORCH_HOME" not in __import__("os").environ  # not portable: nothing changes
    monkeypatch.setenv("NEMO_PORTABLE", str(tmp_path / "stick"))
    use_portable_caches(get_paths())
    assert Path(torch.hub.get_dir()) == tmp_path / "stick" / "torch" / "hub"
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "mine"))
    use_portable_caches(get_paths())
    assert Path(torch.hub.get_dir()) == tmp_path / "mine" / "hub"


def test_the_checkout_models_cache_is_the_portable_folder_and_git_ignores_its_contents():
    root = checkout_root()
    readme = (root / "models_cache" / "README.md").read_text()
    assert "NEMO_PORTABLE" in readme and "huggingface" in readme and "torch" in readme and "nemo_home" in readme
    ignore = (root / ".gitignore").read_text().splitlines()
    assert "models_cache/*" in ignore and "!models_cache/README.md" in ignore


def test_cli_portable_mode_puts_metric_weights_in_the_portable_folder(tmp_path, monkeypatch, capsys):
    import json

    from nemo_desktop.cli.main import main

    monkeypatch.delenv("NEMO_HOME")
    monkeypatch.setenv("NEMO_PORTABLE", "")
    assert main(["--portable-dir", str(tmp_path / "p"), "doctor", "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert Path(facts["metric_weights"]["lpips-alex"]["path"]).is_relative_to(tmp_path / "p" / "torch")

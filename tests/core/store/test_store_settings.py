import base64
import json

import pytest

from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.store import Settings, get_paths, load_settings, save_settings
from nemo_desktop.core.store.settings import SETTINGS_SCHEMA_VERSION, Endpoint, migrate_settings_dict

V1_FILE = {
    "schema_version": 1,
    "device": "cuda:1",
    "dtype": "bf16",
    "cpu_offload": True,
    "hf_token_env": "MY_HF_TOKEN",
    "hf_cache": "default",
    "default_classifier": "timm/vit_base_patch16_224.augreg2_in21k_ft_in1k",
    "default_mllm": "Qwen/Qwen2.5-VL-7B-Instruct",
    "default_editor": "black-forest-labs/FLUX.1-Kontext-dev",
    "trust_remote_code": False,
    "editor_resolution": 768,
    "scitx_k": 8,
    "scitx_m": 4,
    "endpoints": [{"name": "local-vllm", "base_url": "http://localhost:8000/v1", "model": "qwen",
                   "api_key_env": None}],
    "window_geometry": base64.b64encode(b"\x01\xd9\xd0\xcb geometry").decode(),
    "recent_files": ["/data/a.png"],  # a key v1 of the app did not know itself: must survive
}


def test_defaults_when_there_is_no_file():
    s = load_settings()
    assert s.source == get_paths().settings_file and s.recovered_from is None
    assert (s.compute.device, s.compute.dtype, s.compute.cpu_offload) == ("auto", "auto", False)
    assert s.models.trust_remote_code is False and s.models.editor_resolution == 512
    assert s.hub.cache == "huggingface-default" and s.hub.token_env == "HF_TOKEN"
    assert s.endpoints == [] and s.gui.window_geometry is None
    assert s.scitx.k >= 1 and s.scitx.m >= 1


def test_save_and_load_round_trip_is_atomic_json():
    s = Settings()
    s.compute.device = "cuda"
    s.models.mllm = "Qwen/Qwen2.5-VL-7B-Instruct"
    s.endpoints.append(Endpoint("openai", "https://api.openai.com/v1", "gpt-4o", api_key_env="OPENAI_API_KEY"))
    s.endpoints.append(Endpoint("vault", "https://llm.example.org/v1", "m", api_key_env="keyring:nemo-desktop/vault"))
    s.gui.window_geometry = base64.b64encode(b"geom").decode()
    path = save_settings(s)
    assert path == get_paths().settings_file
    data = json.loads(path.read_text())
    assert data["schema_version"] == SETTINGS_SCHEMA_VERSION
    assert data["endpoints"][0] == {"name": "openai", "base_url": "https://api.openai.com/v1", "model": "gpt-4o",
                                    "api_key_env": "OPENAI_API_KEY"}
    assert [p.name for p in path.parent.iterdir()] == ["settings.json"]  # no temp files left
    again = load_settings()
    assert again == s
    assert again.endpoint("vault").api_key_env == "keyring:nemo-desktop/vault" and again.endpoint("x") is None


def test_secret_references_match_the_secrets_module(monkeypatch):
    from nemo_desktop.core.base.secret_refs import describe_secret_ref, resolve_secret

    e = Endpoint("openai", "https://api.openai.com/v1", "gpt-4o", api_key_env="OPENAI_API_KEY")
    assert e.api_key_ref == "env:OPENAI_API_KEY"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-value-0123456789")
    assert resolve_secret(e.api_key_ref) == "sk-test-value-0123456789"
    for ref in ("env:MY_KEY", "keyring:nemo-desktop/openai"):
        s = Settings.from_dict({"schema_version": 2, "hub": {"token_env": ref},
                                "endpoints": [{"name": "e", "base_url": "http://h/v1", "model": "m",
                                               "api_key_env": ref}]})
        assert s.endpoints[0].api_key_ref == s.hub.token_ref == ref
        assert describe_secret_ref(ref) != "an invalid API key reference"
    assert Settings().hub.token_ref == "env:HF_TOKEN"
    with pytest.raises(ConfigError):  # the secrets module needs SERVICE/USER for the keyring
        Settings.from_dict({"schema_version": 2, "hub": {"token_env": "keyring:only-service"}})


def test_v1_flat_file_migrates_to_grouped_v2(tmp_path):
    f = get_paths().settings_file
    f.parent.mkdir(parents=True)
    f.write_text(json.dumps(V1_FILE))
    s = load_settings()
    assert (s.compute.device, s.compute.dtype, s.compute.cpu_offload) == ("cuda:1", "bfloat16", True)
    assert s.hub.cache == "huggingface-default" and s.hub.token_env == "MY_HF_TOKEN"
    assert s.models.classifier == V1_FILE["default_classifier"] and s.models.editor_resolution == 768
    assert s.models.mllm == V1_FILE["default_mllm"] and s.models.editor == V1_FILE["default_editor"]
    assert (s.scitx.k, s.scitx.m) == (8, 4)
    assert s.endpoints == [Endpoint("local-vllm", "http://localhost:8000/v1", "qwen", None)]
    assert s.gui.window_geometry == V1_FILE["window_geometry"]
    assert s.extra == {"recent_files": ["/data/a.png"]}
    assert json.loads(f.read_text()) == V1_FILE  # loading never rewrites the file
    save_settings(s)
    data = json.loads(f.read_text())
    assert data["schema_version"] == 2 and data["recent_files"] == ["/data/a.png"]
    assert data["compute"] == {"device": "cuda:1", "dtype": "bfloat16", "cpu_offload": True,
                               "model_process": "worker", "cancel_grace_s": 10.0, "worker_memory_limit_gb": None,
                               "memory_profile": None}
    assert not {"device", "dtype", "hf_token_env", "scitx_k", "default_mllm"} & set(data)
    assert load_settings() == s


def test_file_without_version_is_v1_and_missing_keys_take_defaults():
    data = migrate_settings_dict({"device": "cpu", "dtype": "fp32", "hf_cache": "app"})
    s = Settings.from_dict(data)
    assert (s.compute.device, s.compute.dtype, s.hub.cache) == ("cpu", "float32", "app")
    assert s.models.editor_resolution == 512 and s.hub.token_env == "HF_TOKEN"


def test_unknown_keys_are_preserved_at_every_level():
    f = get_paths().settings_file
    f.parent.mkdir(parents=True)
    data = Settings().to_dict()
    data["future_feature"] = {"x": 1}
    data["compute"]["flash_attention"] = True
    data["endpoints"] = [{"name": "e", "base_url": "http://h/v1", "model": "m", "api_key_env": None,
                          "timeout_s": 30}]
    f.write_text(json.dumps(data))
    s = load_settings()
    s.compute.device = "cpu"
    save_settings(s)
    out = json.loads(f.read_text())
    assert out["future_feature"] == {"x": 1} and out["compute"]["flash_attention"] is True
    assert out["compute"]["device"] == "cpu" and out["endpoints"][0]["timeout_s"] == 30


def test_settings_from_a_newer_version_are_refused_untouched():
    f = get_paths().settings_file
    f.parent.mkdir(parents=True)
    f.write_text(json.dumps({"schema_version": SETTINGS_SCHEMA_VERSION + 1, "compute": {}}))
    before = f.read_bytes()
    with pytest.raises(ConfigError) as err:
        load_settings()
    assert "newer version of NEMO Desktop" in err.value.message and str(f) in err.value.message
    assert "Upgrade NEMO Desktop" in err.value.hint
    assert f.read_bytes() == before and [p.name for p in f.parent.iterdir()] == ["settings.json"]


@pytest.mark.parametrize("content", [b"{ not json", b"\xff\xfe\x00garbage", b"[1, 2, 3]", b""])
def test_corrupt_settings_are_moved_aside_and_defaults_used(content, caplog):
    f = get_paths().settings_file
    f.parent.mkdir(parents=True)
    f.write_bytes(content)
    with caplog.at_level("WARNING"):
        s = load_settings()
    assert s == Settings()
    moved = s.recovered_from
    assert moved.exists() and moved.read_bytes() == content and not f.exists()
    assert moved.name.startswith("settings.json.corrupt-")
    assert "default settings are used" in caplog.text
    save_settings(s)  # the next save writes a fresh, valid file
    assert load_settings() == Settings()


def test_invalid_values_name_the_setting():
    cases = [({"compute": {"device": "gpu0"}}, "compute.device"),
             ({"compute": {"dtype": "int3"}}, "compute.dtype"),
             ({"hub": {"cache": "somewhere"}}, "hub.cache"),
             ({"models": {"editor_resolution": 500}}, "models.editor_resolution"),
             ({"scitx": {"k": 0}}, "scitx.k"),
             ({"gui": {"window_geometry": "not base64 !!"}}, "gui.window_geometry"),
             ({"endpoints": [{"name": "e", "base_url": "ftp://x", "model": "m"}]}, "endpoints[0].base_url"),
             ({"endpoints": [{"name": "e", "base_url": "http://x", "model": "m"}] * 2}, "endpoints")]
    for patch, where in cases:
        data = {"schema_version": SETTINGS_SCHEMA_VERSION, **patch}
        with pytest.raises(ConfigError) as err:
            Settings.from_dict(data)
        assert f"'{where}'" in err.value.message, (patch, err.value.message)


def test_secrets_are_never_accepted_as_settings():
    key = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
    for endpoint in ({"name": "e", "base_url": "https://x/v1", "model": "m", "api_key_env": key},
                     {"name": "e", "base_url": "https://x/v1", "model": "m", "api_key": key}):
        with pytest.raises(ConfigError) as err:
            Settings.from_dict({"schema_version": 2, "endpoints": [endpoint]})
        assert key not in err.value.message and key not in (err.value.hint or "")
        assert "environment variable" in err.value.message
    token = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01"  # syntactically a valid variable name, but a token
    with pytest.raises(ConfigError) as err:
        Settings.from_dict({"schema_version": 2, "hub": {"token_env": token}})
    assert token not in err.value.message and "'hub.token_env'" in err.value.message
    s = Settings()
    s.hub.token_env = "hf_AbCdEf secret with spaces"
    with pytest.raises(ConfigError):
        save_settings(s)
    assert not get_paths().settings_file.exists()


def test_an_invalid_value_in_the_file_names_the_file_and_the_setting():
    f = get_paths().settings_file
    f.parent.mkdir(parents=True)
    f.write_text(json.dumps({"schema_version": 2, "compute": {"device": "gpu"}}))
    with pytest.raises(ConfigError) as err:
        load_settings()
    assert "'compute.device'" in err.value.message and str(f) in err.value.message
    assert f.exists()  # a readable file with a wrong value is the user's to fix, not moved aside


def test_unwritable_settings_location_gives_config_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError) as err:
        save_settings(Settings(), path=blocker / "config" / "settings.json")
    assert "could not be saved" in err.value.message and "NEMO_HOME" in err.value.hint

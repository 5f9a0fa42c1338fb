"""Secret references resolve, fail clearly without echoing values, and never survive into logs."""
from __future__ import annotations

import io
import logging
import sys
import types

import pytest

from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.base.secrets import REDACTED, SecretsFilter, install_secrets_filter, redact, register_secret
from nemo_desktop.core.base.secret_refs import describe_secret_ref, resolve_secret

KEY = "zq7-Secret-Value-9f8e7d6c5b4a"  # no well-known shape: only value-based redaction can catch it


def test_env_reference(monkeypatch):
    monkeypatch.setenv("NEMO_TEST_KEY", KEY)
    assert resolve_secret("env:NEMO_TEST_KEY") == KEY
    assert resolve_secret(None) is None and resolve_secret("  ") is None


def test_missing_env_variable_is_named(monkeypatch):
    monkeypatch.delenv("NEMO_TEST_MISSING", raising=False)
    with pytest.raises(ConfigError) as err:
        resolve_secret("env:NEMO_TEST_MISSING")
    assert "NEMO_TEST_MISSING" in err.value.message and "export NEMO_TEST_MISSING" in err.value.hint


@pytest.mark.parametrize("ref", ["sk-proj-abcdefghijklmnopqrstuvwx", KEY, "env:not a name", "keyring:no-slash",
                                 "vault:x/y"])
def test_invalid_reference_never_echoes_what_was_given(ref):
    with pytest.raises(ConfigError) as err:
        resolve_secret(ref)
    text = err.value.user_text() + (err.value.detail or "")
    assert ref not in text and ref.split(":")[-1] not in text
    assert "env:VARIABLE_NAME" in err.value.hint


def test_keyring_not_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "keyring", None)  # makes `import keyring` raise ImportError
    with pytest.raises(ConfigError) as err:
        resolve_secret("keyring:nemo-desktop/openai")
    assert "keyring" in err.value.message and "pip install keyring" in err.value.hint


def test_keyring_lookup_with_a_stand_in_backend(monkeypatch):
    store = {("nemo-desktop", "openai"): KEY}
    fake = types.ModuleType("keyring")
    fake.get_password = lambda service, user: store.get((service, user))
    monkeypatch.setitem(sys.modules, "keyring", fake)
    assert resolve_secret("keyring:nemo-desktop/openai") == KEY
    with pytest.raises(ConfigError, match="no entry for service 'nemo-desktop', user 'other'") as err:
        resolve_secret("keyring:nemo-desktop/other")
    assert "keyring set nemo-desktop other" in err.value.hint


def test_describe_reference_names_the_place_not_the_value():
    assert describe_secret_ref("env:OPENAI_API_KEY") == "environment variable OPENAI_API_KEY"
    assert "service 'svc', user 'me'" in describe_secret_ref("keyring:svc/me")
    assert describe_secret_ref(None) == "no API key configured"
    assert KEY not in describe_secret_ref(KEY)


def test_redact_values_and_token_shapes():
    text = (f"key {KEY} and hf_{'a' * 30} and sk-proj-{'B' * 24} with header Authorization: Bearer abc.def-ghi_jkl "
            "and api_key=supersecretvalue plus the ordinary words max_new_tokens=512 token budget")
    out = redact(text, [KEY])
    for leaked in (KEY, "hf_aaaa", "sk-proj-BBBB", "abc.def-ghi_jkl", "supersecretvalue"):
        assert leaked not in out
    assert "max_new_tokens=512" in out and "token budget" in out and out.count(REDACTED) == 5


def test_resolved_secrets_are_redacted_without_being_passed(monkeypatch):
    value = "registered-only-" + "x1y2z3w4"
    monkeypatch.setenv("NEMO_TEST_KEY2", value)
    resolve_secret("env:NEMO_TEST_KEY2")
    assert value not in redact(f"oops {value}")
    register_secret("abc")  # too short to redact safely: ignored, ordinary text survives
    assert redact("abc def") == "abc def"


def _capture(logger_name: str):
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(name)s %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    return stream, handler, root


def test_filter_on_root_handlers_covers_child_loggers_args_and_tracebacks():
    register_secret(KEY)
    stream, handler, root = _capture("x")
    old_level = root.level
    root.setLevel(logging.DEBUG)
    flt = install_secrets_filter()
    try:
        assert install_secrets_filter() is flt and handler.filters.count(flt) == 1  # idempotent
        child = logging.getLogger("nemo_desktop.some.child")
        child.info("calling with key=%s", KEY)
        child.warning("header: Bearer %s", "tok-" + "9" * 20)
        try:
            raise RuntimeError(f"server echoed {KEY}")
        except RuntimeError:
            child.exception("request failed")
        child.info("plain message %d", 42)
    finally:
        root.removeHandler(handler)
        root.removeFilter(flt)
        root.setLevel(old_level)
    out = stream.getvalue()
    assert KEY not in out and "tok-9999" not in out
    assert "request failed" in out and "RuntimeError: server echoed [REDACTED]" in out
    assert "plain message 42" in out


def test_filter_survives_a_broken_format_string():
    record = logging.LogRecord("n", logging.INFO, __file__, 1, "value %s %s", (KEY,), None)
    assert SecretsFilter().filter(record) is True


def test_benchmark_config_refuses_an_inline_key_before_anything_is_stored():
    from nemo_desktop.core.benchmark.config import parse_config
    from nemo_desktop.core.base.errors import ConfigError

    key = "sk-" + "z" * 40
    cfg = {"name": "x", "judges": {"GPT": {"family": "openai-compatible", "source": "gpt",
                                            "options": {"api_key": key}}}}
    with pytest.raises(ConfigError) as e:
        parse_config(cfg)
    assert "judges.GPT.options.api_key" in e.value.message
    assert key not in e.value.message + (e.value.hint or "")


def test_secret_references_are_accepted_and_keys_are_not():
    from nemo_desktop.core.base.secret_refs import find_inline_secrets, is_secret_reference

    assert is_secret_reference("env:OPENAI_API_KEY") and is_secret_reference("keyring:nemo/openai")
    assert not is_secret_reference("sk-" + "a" * 30) and not is_secret_reference("hf_" + "b" * 34)
    assert find_inline_secrets({"a": [{"token": "env:HF_TOKEN"}, {"token": "abc def"}]}) == ["a[1].token"]


def test_error_dicts_never_carry_a_token():
    from nemo_desktop.core.base.errors import ModelError

    tok = "hf_" + "Q" * 34
    d = ModelError(f"failed with {tok}", detail=f"Authorization: Bearer {tok}").to_dict()
    assert tok not in str(d)


def test_endpoint_urls_with_credentials_are_refused():
    from nemo_desktop.core.base.errors import ConfigError
    from nemo_desktop.core.models.adapters.openai_compatible import normalize_base_url

    assert normalize_base_url("http://localhost:8000") == "http://localhost:8000/v1"
    for bad in ("https://user:secret@api.example.com/v1", "https://api.example.com/v1?api_key=abc"):
        with pytest.raises(ConfigError):
            normalize_base_url(bad)

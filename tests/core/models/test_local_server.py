"""A local OpenAI-compatible server as the MLLM in one step (issue 40 §6): the check against a loopback server,
its errors in words, and `use_local_server` keeping it (endpoint + default MLLM) so the session chats with it."""
from __future__ import annotations

import pytest

from fixtures_tiny.openai_server import LoopbackOpenAI, closed_port_url

from nemo_desktop.core.base.errors import ConfigError, ModelError
from nemo_desktop.core.models.local_server import LOCAL_SERVER, check_server
from nemo_desktop.core.models.protocols import ChatMessage
from nemo_desktop.core.app.session import ModelSession
from nemo_desktop.core.app.jobs.models import use_local_server


@pytest.fixture
def server():
    s = LoopbackOpenAI(models=("tiny/vl-a", "tiny/vl-b")).start()
    yield s
    s.stop()


def test_the_check_lists_the_served_models(server):
    check = check_server(server.url + "/")
    assert check.base_url == server.url and check.models == ("tiny/vl-a", "tiny/vl-b") and check.engine == "vllm"
    assert server.requests == [("GET", "/v1/models", None)]
    assert check_server(server.url.removesuffix("/v1")).base_url == server.url  # a bare host gets /v1


def test_the_check_says_in_words_what_is_wrong():
    url = closed_port_url()
    with pytest.raises(ModelError) as err:
        check_server(url)
    assert err.value.message.startswith(f"Nothing answers at {url}") and "Start the server" in err.value.hint
    web = LoopbackOpenAI(html=True).start()
    try:
        with pytest.raises(ModelError) as err:
            check_server(web.url)
        assert "answers, but not as an OpenAI-compatible API" in err.value.message
        assert "did not return a model list" in err.value.message and "/v1" in err.value.hint
    finally:
        web.stop()
    other = LoopbackOpenAI().start()
    try:
        with pytest.raises(ModelError, match="not as an OpenAI-compatible API: GET .* gave HTTP 404"):
            check_server(other.url.removesuffix("/v1") + "/api")
    finally:
        other.stop()
    with pytest.raises(ConfigError, match="is not an http"):
        check_server("localhost:8000")


def test_use_local_server_makes_it_the_mllm_and_the_session_chats_with_it(server):
    session = ModelSession()
    check, settings = use_local_server(session, server.url)
    endpoint = settings.endpoint(LOCAL_SERVER)
    assert (endpoint.base_url, endpoint.model, endpoint.api_key_env) == (server.url, "tiny/vl-a", None)
    assert session.settings().models.mllm == f"endpoint:{LOCAL_SERVER}"  # saved
    mllm = session.ensure("mllm")  # the default MLLM: the server
    assert mllm.chat([ChatMessage("user", ["hello"])]) == "tiny/vl-a heard: hello"
    assert ("POST", "/v1/chat/completions") in [(m, p) for m, p, _b in server.requests]
    session.unload("mllm")

    # Checked again after the user picked the other model under Endpoints: that choice is kept.
    session.update_settings(lambda s: setattr(s.endpoint(LOCAL_SERVER), "model", "tiny/vl-b"))
    _check, settings = use_local_server(session, server.url)
    assert settings.endpoint(LOCAL_SERVER).model == "tiny/vl-b" and len(settings.endpoints) == 1


def test_a_failed_check_saves_nothing():
    session = ModelSession()
    with pytest.raises(ModelError, match="Nothing answers"):
        use_local_server(session, closed_port_url())
    settings = session.settings()
    assert settings.endpoints == [] and settings.models.mllm is None

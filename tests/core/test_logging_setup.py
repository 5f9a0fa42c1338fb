import logging

from nemo_desktop.core.app.logging_setup import setup_logging
from nemo_desktop.core.base.secrets import redact
from nemo_desktop.core.store.paths import get_paths

HF = "hf_" + "x" * 34
OPENAI = "sk-" + "y" * 40


def test_log_file_is_rotating_and_never_holds_secrets(tmp_path):
    paths = get_paths(tmp_path)
    log_file = setup_logging(paths)
    log = logging.getLogger("nemo_desktop.test")
    log.info("download with token %s", HF)
    log.warning("headers: Authorization: Bearer %s", OPENAI)
    try:
        raise RuntimeError(f"server rejected api_key={OPENAI}")
    except RuntimeError:
        log.exception("request failed")
    for h in logging.getLogger().handlers:
        if getattr(h, "baseFilename", None):
            h.flush()
    text = log_file.read_text()
    assert "download with token" in text and "request failed" in text
    assert HF not in text and OPENAI not in text
    assert "[REDACTED]" in text
    handler = next(h for h in logging.getLogger().handlers if getattr(h, "baseFilename", "") == str(log_file))
    assert handler.maxBytes > 0 and handler.backupCount > 0


def test_redact_leaves_ordinary_text_alone():
    assert redact("a photo of a dog, token count 12") == "a photo of a dog, token count 12"
    assert HF not in redact(f"x {HF} y")

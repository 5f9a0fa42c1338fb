"""`nemo explain` pieces that need no model: argument checks, the printed table (Ctrl-C: test_progress.py)."""
import pytest

from nemo_desktop.cli.commands import explain
from nemo_desktop.core.errors import ConfigError
from nemo_desktop.core.methods.result import Candidate, ClassScore, ExplanationResult, SampleInfo


def test_edit_size_parsing():
    # --edit-size is derived from SciTXConfig.edit_size (core/registry/params.py)
    from nemo_desktop.core.methods.scitx import SciTXConfig
    from nemo_desktop.core.registry.params import config_params, parse_value

    size = next(p for p in config_params(SciTXConfig) if p.name == "edit_size")
    assert parse_value(size, "512x384") == (512, 384)
    assert parse_value(size, "none") is None
    for bad in ("512", "0x5", "axb"):
        with pytest.raises(ConfigError):
            parse_value(size, bad)


def test_missing_image_is_a_clear_error(tmp_path, capsys):
    from nemo_desktop.cli.main import main

    code = main(["explain", str(tmp_path / "nope.png"), "--true-label", "cat", "--classifier", "x", "--mllm", "y",
                 "--reference", "none"])
    assert code == 2 and "No image file" in capsys.readouterr().err


def test_format_result_marks_the_selected_candidate():
    top = [ClassScore(1, "dog", 0.9), ClassScore(0, "cat", 0.1)]
    result = ExplanationResult(
        method="scitx", sample=SampleInfo("x.png", "abc", 0, "cat", 1, "dog", 0.1, 0.9, top),
        explanation="The snowy background.", selected_index=1, cei=42.0,
        candidates=[Candidate("Its pose.", "image", "Turn the cat", error="Editing failed: boom"),
                    Candidate("The snowy background.", "image", "Replace the snow with grass", None, 0.1, 0.52, 42.0,
                              top, [ClassScore(0, "cat", 0.52), ClassScore(1, "dog", 0.48)])],
        notes=["only 1 correctly classified reference of the predicted class 'dog' (3 requested)"],
        result_key="f" * 64)
    text = explain.format_result(result)
    assert "Explanation (CEI +42.00):\n  The snowy background." in text
    assert "*  2    +42.00  0.100 -> 0.520" in text
    assert "error: Editing failed: boom" in text and "edit: Replace the snow with grass" in text
    assert "top-1 after: 'cat' (0.520)" in text and "Notes:" in text and "ffffffffffffffff" in text

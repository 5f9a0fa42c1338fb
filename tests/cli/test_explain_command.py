"""`nemo explain` pieces that need no model: argument checks, the printed table (Ctrl-C: test_progress.py)."""
import pytest

from nemo_desktop.cli.commands import explain
from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.base.records import Candidate, ClassScore, ExplanationResult, SampleInfo


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


def test_format_result_is_neutral_without_a_positive_cei_and_shows_distances():
    top = [ClassScore(1, "dog", 0.9), ClassScore(0, "cat", 0.1)]
    result = ExplanationResult(
        method="scitx", sample=SampleInfo("x.png", "abc", 0, "cat", 1, "dog", 0.1, 0.9, top),
        explanation="The pose.", selected_index=2, cei=-3.0,
        candidates=[Candidate("The lighting.", "image", "Brighten", None, 0.1, 0.02, -8.0, edit_distance=0.12,
                              edit_distance_metric="1-ssim"),
                    Candidate("Noise.", "image", "Add noise", None, 0.1, 0.95, 85.0, edit_distance=0.97,
                              edit_distance_metric="1-ssim", edit_flagged=True, error=None),
                    Candidate("The pose.", "image", "Turn the cat", None, 0.1, 0.07, -3.0, edit_distance=0.2,
                              edit_distance_metric="lpips-alex")])
    text = explain.format_result(result)
    assert "Explanation (" not in text
    assert ("No hypothesis whose edit kept the image raised P(true) (best CEI -3.0); only flagged whole-image "
            "edits did; the least harmful one:\n  The pose.") in text
    result.candidates[1].edit_flagged = False
    result.candidates[1].cei = -20.0
    assert "No hypothesis raised P(true) (best CEI -3.0); the least harmful one:" in explain.format_result(result)
    # the selected one first, then by CEI
    assert text.index("The pose.\n") < text.index("  3     -3.00") < text.index("  2    +85.00") \
        < text.index("  1     -8.00")
    assert "distance from the original: 1-ssim 0.97, whole image changed (flagged)" in text
    assert "distance from the original: lpips-alex 0.20" in text


def test_a_profile_that_cannot_fit_is_refused_before_the_big_models_load(tmp_path, capsys, monkeypatch):
    """Issue 40: --profile '24 GB' with the paper's models on a stated 24 GB card stops, in words, after the
    (small) classifier and before the MLLM or the editor is read; on no GPU a GPU profile says it needs one."""
    import sys
    from pathlib import Path

    import numpy as np
    from PIL import Image

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from fixtures_tiny.classifiers import TINY_CLASSES, build_tiny_timm
    from nemo_desktop.cli.main import main
    from nemo_desktop.core.base import device

    folder = build_tiny_timm(tmp_path / "timm", label_names=TINY_CLASSES, input_size=32)
    image = tmp_path / "q.png"
    Image.fromarray(np.zeros((32, 32, 3), dtype=np.uint8)).save(image)
    argv = ["explain", str(image), "--true-label", "cat", "--classifier", f"timm:local-dir:{folder}",
            "--mllm", "qwen2.5-vl-7b", "--reference", "none", "--device", "cpu", "--profile", "24 GB"]
    monkeypatch.setattr(device, "gpu_info", lambda: [{"index": 0, "name": "RTX 4090", "total_bytes": int(23.6 * 2**30),
                                                      "free_bytes": int(23 * 2**30)}])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "The '24 GB' profile does not fit this GPU" in err and "flux-kontext-dev" in err
    monkeypatch.setattr(device, "gpu_info", lambda: [])
    assert main(argv) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err

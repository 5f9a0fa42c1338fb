"""The shipped prompt templates carry the NEMO paper's appendix A text verbatim, and render safely."""
import shutil

import pytest

from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.methods import prompts as prompts_mod
from nemo_desktop.core.methods.prompts import available_prompts, load_prompt
from nemo_desktop.core.base.resources import resource_path

# Sentences copied from the paper (shared/seeds/001_*, appendix A.1 and A.3).
PAPER = {
    "scitx_hypothesis": [
        "You are an expert in visual reasoning and model error analysis.",
        "The first image has the true label {true_label_1}, but the model incorrectly predicted\nit as {prediction}.",
        "Your goal is to identify visual differences between these sets of images and analyze the\nlikely reason "
        "for the models misclassification.",
        "1. Examine all provided sets (A, B, and/or C).",
        "   - If a set is missing, use the remaining sets for comparison or inference.",
        "2. Identify visual or semantic differences relevant to the misclassification.",
        "3. Consider whether factors like background, object texture, pose, or context influenced\nthe error.",
        "4. Formulate a concise, evidence-based explanation.",
        "- Set A (True Label: {true_label_1})\n{set_a_captions}\n- **Set B** (Predicted Label: {prediction})\n"
        "{set_b_captions}\n- **Set C** (Random Examples)\n{set_c_captions}",
        "Write your reasoning strictly in JSON format as shown below.",
        ' "cause_of_error": "A concrete, evidence-based conclusion directly explaining why the\n model predicted '
        "'{prediction}' instead of '{true_label_1}'. Mention the most influential\n visual cue\"",
        "Do not include any text outside of the JSON object in your output.",
    ],
    "scitx_edit_instruction": [
        "An image with the true label **{true_label_1}** was incorrectly predicted as **{prediction}**.",
        "- **Hypothesis for Misclassification:** {hypothesis}",
        "Your task is to write a concise editing prompt that would modify the image to correct this error. The "
        "prompt should describe a minimal visual change that helps a generative model fix the issue (e.g., \"Add a "
        "hat to the cat\").",
        "1. **Address the Hypothesis:** The edit must directly resolve the hypothesized cause of the "
        "misclassification.",
        "2. **Be Specific & Semantic:** The edit must be a *content-based* visual change (e.g., \"Add a stem to the "
        "apple,\" \"Change the shirt color to blue\"). Do NOT suggest generic, non-specific edits like \"make "
        "{true_label_1} larger,\" \"sharpen the image,\" or \"increase contrast.\"",
        "3. **Avoid the Class:** Do NOT reference or imply the incorrect label **{prediction}** in your solution.",
        "4. **Be Concise:** Output only one short, imperative command (ideally under 10 words).",
        ' "solution": "Short, concise, imperative editing prompt" # 1 sentence and lower than 10 words',
    ],
    "scitx_prompt_rewrite": [
        "1. **Specific Hypothesis:** {hypothesis}\n(The specific visual reason this image was misclassified.)",
        '2. Original Failed Prompt: "{original_prompt}"',
        "Generate a concise, CLIP-friendly zero-shot prompt to correct this error.",
        "Unlike human descriptions, CLIP prefers simple, direct captions. Avoid complex sentences\nor lists of "
        "features.",
        "1. Keep it Short: Use fewer than 15 words.",
        "4. No Negatives: Do NOT use words like \"not,\" \"no,\" or \"unlike.\" (e.g., instead of \"\nnot a "
        "close-up,\" say \"a full body shot\").",
        "5. Address the Hypothesis: Subtly include the missing visual cue identified in the\nHypothesis, but blend "
        "it naturally into the caption.",
        ' "solution": "a photo of [adjective] {true_label_1} [context/action]"',
    ],
}


@pytest.mark.parametrize("name", sorted(PAPER))
def test_paper_text_is_verbatim(name):
    text = load_prompt(name).text
    for sentence in PAPER[name]:
        assert sentence in text, f"{name} lacks: {sentence!r}"


def test_every_template_is_documented_and_versioned():
    readme = resource_path("prompts", "README.md").read_text()
    names = available_prompts()
    assert {"scitx_hypothesis", "scitx_caption", "scitx_edit_instruction", "scitx_prompt_rewrite",
            "json_repair"} <= set(names)
    for name in names:
        tpl = load_prompt(name)
        assert f"{name}.v{tpl.number}.txt" in readme
        assert tpl.version.startswith(f"{name}/v{tpl.number}+") and len(tpl.version.split("+")[1]) == 8


def test_render_fills_placeholders_once_and_keeps_json_braces():
    tpl = load_prompt("scitx_edit_instruction")
    assert tpl.placeholders == {"true_label_1", "prediction", "hypothesis"}
    out = tpl.render(true_label_1="tabby {cat}", prediction="dog", hypothesis="it says {prediction} and {0}")
    assert "**tabby {cat}**" in out and "it says {prediction} and {0}" in out  # inserted text is not formatted
    assert '{\n "reasoning"' in out and out.rstrip().endswith("output.")
    with pytest.raises(ConfigError, match="hypothesis"):
        tpl.render(true_label_1="a", prediction="b")


def test_editing_a_template_changes_its_version(tmp_path, monkeypatch):
    root = tmp_path / "resources"
    shutil.copytree(resource_path("prompts"), root / "prompts")
    monkeypatch.setenv("NEMO_RESOURCES", str(root))
    before = load_prompt("scitx_caption").version
    path = root / "prompts" / "scitx_caption.v1.txt"
    path.write_text(path.read_text() + " Be brief.")
    import os

    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    assert load_prompt("scitx_caption").version != before
    (root / "prompts" / "scitx_caption.v2.txt").write_text("Describe {thing}.")
    assert load_prompt("scitx_caption").number == 2 and load_prompt("scitx_caption", 1).number == 1
    with pytest.raises(ConfigError, match="no version v7"):
        load_prompt("scitx_caption", 7)
    with pytest.raises(ConfigError, match="No prompt template"):
        load_prompt("nope")
    assert prompts_mod.PLACEHOLDER.pattern

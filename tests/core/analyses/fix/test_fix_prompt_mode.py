"""Adopting a zero-shot prompt is the fix analysis' mode "prompt" (issue 41): built through the registry like every
fix, keyed (the prompts and the prompt set in the key, the trained fixes' keys unchanged), stored with a manifest,
answered from the store on a re-run, and refused in words for a trained classifier or without a prompt."""
from __future__ import annotations

import pytest
from test_fix_prompts import RedCarpetZeroShot, _data  # tests/core/analyses/fix: pytest puts it on sys.path

from nemo_desktop.core.analyses.fix import FixConfig
from nemo_desktop.core.analyses.fix.prompts import list_prompt_sets
from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.base.job_context import JobContext
from nemo_desktop.core.registry import Components, build_analysis
from nemo_desktop.core.store import result_key

GOOD = {"mode": "prompt", "prompts": "dog=a photo of a dog", "bootstrap": 200, "prompt_set": "no-carpet"}


def _adopt(store, **options):
    clf = RedCarpetZeroShot()
    return build_analysis("fix", Components(classifier=clf, store=store), {**GOOD, **options})(_data(), JobContext())


def test_a_prompt_is_adopted_keyed_stored_and_answered_from_the_store(store):
    result = _adopt(store)
    assert result.analysis == "fix" and result.adopts_prompt and result.key
    assert result.prompts == {"changes": {"dog": "a photo of a dog"},
                              "before": {"dog": "a photo of a dog on a red carpet"}, "set": "no-carpet"}
    assert result.affected["overall"]["change"] == 100.0 and result.guard["verdict"] == "keep"
    assert result.saved == {"name": "no-carpet", "version": 1}
    assert result.manifest["mode"] == "prompt" and result.manifest["classifier"]["id"] == RedCarpetZeroShot.info.model_id
    assert len(result.per_image["affected"]["sha256"]) == 30 and result.per_image["affected"]["after"] == [0] * 30
    stored = store.get(result.key)
    assert stored is not None and stored.payload["config"]["prompts"] == GOOD["prompts"]
    again = _adopt(store)
    assert again.key == result.key and again.saved == result.saved
    assert [s["version"] for s in list_prompt_sets(RedCarpetZeroShot.info.model_id)] == [1]  # not adopted twice
    assert _adopt(store, prompts="dog=a dog").key != result.key
    assert _adopt(store, prompt_set="other").key != result.key


def test_the_guard_still_rejects_and_nothing_is_saved(store):
    result = _adopt(store, prompts="cat=a photo of a cat or dog on a red carpet")
    assert result.guard["verdict"] == "reject-regression" and result.saved is None
    assert any("no prompt set version" in n for n in result.notes)


def test_mode_prompt_is_refused_in_words_for_a_trained_classifier_or_without_a_prompt(store):
    from fix_tiny_world import tiny_world  # tests/core/analyses/fix

    with pytest.raises(ConfigError, match="zero-shot classifier"):
        build_analysis("fix", Components(classifier=tiny_world(train_size=40, epochs=1, test_size=10).classifier),
                       GOOD)
    with pytest.raises(ConfigError, match="needs the prompt"):
        _adopt(store, prompts="")
    with pytest.raises(ConfigError, match="not CLASS=TEXT"):
        _adopt(store, prompts="a photo of a dog")
    with pytest.raises(ConfigError, match="adopting a prompt"):  # a zero-shot classifier is not trained
        build_analysis("fix", Components(classifier=RedCarpetZeroShot()), {"mode": "head"})


def test_the_keys_of_trained_fixes_do_not_change():
    """The prompt settings are in a fix's settings only in mode prompt: a trained fix's config dict (and so its key)
    is the one before prompt adoption joined the fix. The key below was computed with that code."""
    config = FixConfig(instruction="Make the background white", predicted_classes="seven", mode="head")
    assert "prompts" not in config.to_dict() and "prompt_set" not in config.to_dict()
    key = result_key("fix", version="3", classifier={"id": "c", "revision": "1", "family": "timm"}, editor=None,
                     generator=None, data="d" * 64, config=config.to_dict())
    assert key == KEY_BEFORE


KEY_BEFORE = "aba3ad5e07653a833fe8279c2c289bc4a6fc26997ecce3eedad8a75a13dcd7c4"  # main at c7a6773's FixConfig


def test_the_report_of_an_adopted_prompt_shows_the_prompts_and_the_set(store):
    from nemo_desktop.core.reports import render
    from nemo_desktop.core.reports.sections import stored_result_report

    result = _adopt(store)
    html = render(stored_result_report(store.get(result.key), store), "html").decode("utf-8")
    assert "Prompts adopted" in html and "a photo of a dog on a red carpet" in html and "Adopted prompt set" in html
    assert "Before and after" in html and "Training" not in html.split("Reproducibility manifest")[0]


def test_the_api_and_the_mcp_server_reach_the_prompt_mode(store, tmp_path):
    from nemo_desktop import api
    from nemo_desktop.mcp_server.tools import all_tools

    data = _data()
    for split, items in (("affected", data.affected), ("rest", data.rest)):
        for i, (im, y) in enumerate(items):
            (tmp_path / split / data.class_names[y]).mkdir(parents=True, exist_ok=True)
            im.save(tmp_path / split / data.class_names[y] / f"{i}.png")
    result = api.run_analysis("fix", tmp_path, classifier=RedCarpetZeroShot(), settings=GOOD, store=store,
                              progress=False)
    assert result.record.adopts_prompt and result.key and store.get(result.key) is not None
    assert result.record.affected["overall"]["change"] == 100.0 and result.record.saved["name"] == "no-carpet"
    tool = next(t for t in all_tools() if t.name == "analysis_fix")
    settings = tool.schema["properties"]["settings"]["properties"]
    assert "prompt" in settings["mode"]["enum"] and {"prompts", "prompt_set"} <= set(settings)

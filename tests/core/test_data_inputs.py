"""What an analysis runs on, chosen the same way for every analysis (core/registry/data_inputs.py)."""
from __future__ import annotations

import dataclasses

import pytest

from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.registry import Inputs, get_analysis
from nemo_desktop.core.registry.data_inputs import call_args, data_choices, data_prompt


def _with_data(data: str):
    spec = get_analysis("global-explanation")
    return dataclasses.replace(spec, inputs=dataclasses.replace(spec.inputs, data=data))


def test_stored_runs_are_offered_newest_first_with_their_size(tmp_path):
    from nemo_desktop.core.store import ResultsStore

    store = ResultsStore.open(db_path=tmp_path / "r.sqlite", artifacts_dir=tmp_path / "a")
    first = store.create_run("benchmark", {})
    second = store.create_run("benchmark", {})
    store.add_run_item(second, "item-1", None, "done")
    spec = get_analysis("global-explanation")
    assert data_prompt(spec) == ("Run", "store")
    choices = data_choices(spec, store)
    assert {c.value for c in choices} == {first, second}
    assert "1 items" in next(c.label for c in choices if c.value == second)
    store.close()


def test_paths_are_checked_before_any_model_is_loaded(tmp_path):
    folder = _with_data("dataset")
    assert call_args(folder, str(tmp_path)) == (str(tmp_path),)
    with pytest.raises(ConfigError, match="is not a folder"):
        call_args(folder, str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="Choose the dataset folder"):
        call_args(folder, None)
    with pytest.raises(ConfigError, match="is not a file"):
        call_args(_with_data("image"), str(tmp_path))
    assert call_args(_with_data("none"), None) == ()
    assert Inputs(data="none").data == "none"

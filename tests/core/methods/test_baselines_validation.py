"""The shared pieces of the validation-augmented baselines: CEI-argmax selection and which registry name (or
config) turns validation on."""
from __future__ import annotations

import pytest

from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.methods.cam_mllm import CamMLLMConfig
from nemo_desktop.core.methods.change_mllm import ChangeMLLMConfig
from nemo_desktop.core.registry.methods import get_method, list_methods
from nemo_desktop.core.base.records import Candidate
from nemo_desktop.core.methods.pipeline_steps import select_by_cei
from nemo_desktop.core.methods.validation import with_validation


def cand(cei, error=None):
    return Candidate(hypothesis=f"h{cei}", cei=cei, error=error)


def test_selection_is_the_cei_argmax_among_tested_candidates():
    assert select_by_cei([cand(3.0), cand(12.5), cand(-4.0)]) == 1
    assert select_by_cei([cand(3.0), cand(99.0, error="Editing failed"), cand(None), cand(7.0)]) == 3
    assert select_by_cei([cand(5.0), cand(5.0)]) == 0  # ties: the first
    assert select_by_cei([cand(-9.0), cand(-2.0)]) == 1  # the least harmful when none helps
    assert select_by_cei([cand(None), cand(1.0, error="x")]) is None


def test_selection_notes_say_when_the_choice_means_little():
    notes = []
    assert select_by_cei([cand(4.0)], notes) == 0 and notes == []
    assert select_by_cei([cand(-9.0), cand(-2.0)], notes, noun="hypothesis") == 1
    assert notes == ["No intervention raised the true-class probability (best CEI -2.00); the selected hypothesis "
                     "is the least harmful one and may not name the cause."]
    notes.clear()
    assert select_by_cei([cand(None), cand(1.0, error="x")], notes) is None
    assert notes == ["No candidate could be tested, so none was selected; see each candidate's error."]


def test_every_baseline_has_a_validated_variant_with_the_same_config():
    names = list_methods()
    for base in ("error-retrieval", "cam-mllm", "change-mllm"):
        plain, validated = get_method(base), get_method(base + "-validated")
        assert base in names and plain.config is validated.config
        assert validated.needs_editor and not plain.needs_editor
        assert plain.factory.VALIDATED is False and validated.factory.VALIDATED is True


def test_validation_comes_from_the_name_or_the_config():
    assert with_validation(None, CamMLLMConfig, False).validate is False
    assert with_validation(None, CamMLLMConfig, True).validate is True
    assert with_validation(CamMLLMConfig(validate=True, m=5), CamMLLMConfig, False).validate is True
    cfg = with_validation(CamMLLMConfig(m=5), CamMLLMConfig, True)
    assert cfg.validate and cfg.m == 5 and cfg.n_candidates == 5
    assert CamMLLMConfig(m=5).n_candidates == 1  # without validation: one candidate
    with pytest.raises(ConfigError):
        with_validation(ChangeMLLMConfig(), CamMLLMConfig, True)
    with pytest.raises(ConfigError):
        CamMLLMConfig(m=0)

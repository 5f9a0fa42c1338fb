"""Validating a failure-mode sentence with CEI (the sentence as the hypothesis of the existing counterfactual test)
in the digits ink world: the CNN's real shortcut is blue ink = eight, so removing the blue ink from the cluster's
errors raises their true class's probability, while thickening the strokes (a sentence about something else)
does not. The MLLM double only turns a hypothesis into an edit instruction; the edits are real (PIL) and the
classifier is the trained CNN."""
from __future__ import annotations

import pytest

from fm_digits_world import EditWriterMLLM, sentence_file
from nemo_desktop.core.analyses.failure_modes import AttributeRelevance, FailureModesConfig, FailureModesPipeline
from nemo_desktop.core.analyses.failure_modes.validate import SentenceValidator, cluster_errors, compare
from nemo_desktop.core.base.errors import ConfigError

BLUE, THICK = "a digit drawn in blue ink", "a thick digit"


@pytest.fixture
def found(ink_world, ink_manifest, tmp_path):
    clf, index, embedder, store = ink_world
    cfg = FailureModesConfig(clusters=5, tau=None, split="correctness", relevance="attributes",
                             sentence_sets=(str(sentence_file(tmp_path / "s.json")),))
    result = FailureModesPipeline(clf, embedder, store, cfg, AttributeRelevance(ink_manifest))(index)
    g = result.groups[0]
    cluster = max(g.hard_clusters, key=lambda c: any(p["text"] == BLUE for p in c.sentences["pdiff"]) * c.size)
    return clf, index, store, cluster


def test_the_real_cause_validates_and_the_other_sentence_does_not(found):
    from digits_world import DigitsEditor

    clf, index, store, cluster = found
    mllm, editor = EditWriterMLLM(), DigitsEditor()
    v = SentenceValidator(clf, mllm, editor, store)
    blue = v.validate(index, cluster, BLUE, max_images=6)
    thick = v.validate(index, cluster, THICK, max_images=6)
    errors = cluster_errors(index, cluster)
    assert blue.n == thick.n == min(6, len(errors)) > 0
    assert all(s.pred_name != s.true_name for s in blue.samples)
    assert blue.mean_cei > 50 and blue.mean_cei > thick.mean_cei + 40  # CEI in points (measured: 98.7 vs -1.1)
    assert [x.sentence for x in compare([thick, blue])] == [BLUE, THICK]
    calls = (len(mllm.calls), len(editor.calls))
    again = v.validate(index, cluster, BLUE, max_images=6)
    assert (len(mllm.calls), len(editor.calls)) == calls and again.mean_cei == blue.mean_cei  # from the store
    assert type(blue).from_dict(blue.to_dict()).to_dict() == blue.to_dict()


def test_validation_needs_an_editor_for_an_ordinary_classifier(found):
    clf, index, store, cluster = found
    with pytest.raises(ConfigError, match="image editor"):
        SentenceValidator(clf, EditWriterMLLM(), None, store)


def test_each_counted_edit_passed_the_reference_control(found):
    """Issue 45: the same edit on six references of other classes (from the index) must not raise the true class
    as it did on the image; the sentence's mean counts only edits that passed, each says which test decided."""
    from digits_world import DigitsEditor

    clf, index, store, cluster = found
    blue = SentenceValidator(clf, EditWriterMLLM(), DigitsEditor(), store).validate(index, cluster, BLUE,
                                                                                    max_images=4)
    counted = [s for s in blue.samples if s.error is None]
    assert counted and all(s.control["ran"] and s.control["passed"] and s.control["n_refs"] == 6 for s in counted)
    assert all(s.verdict_reason.startswith("reference control: the same edit raised P(true) by at most")
               for s in counted)
    off = SentenceValidator(clf, EditWriterMLLM(), DigitsEditor(), store, control_references=0).validate(
        index, cluster, BLUE, max_images=4)
    assert off.result_key != blue.result_key and all(s.control is None for s in off.samples)
    assert off.manifest["control_references"] == 0 and blue.manifest["control_references"] == 6
    with pytest.raises(ConfigError):
        SentenceValidator(clf, EditWriterMLLM(), DigitsEditor(), store, control_references=-1)


def test_what_the_control_left_out_is_kept_in_the_manifest(found, monkeypatch):
    """A reference the control leaves out (unreadable, or not classified as labelled) is said in the
    validation's manifest, once, not dropped."""
    from digits_world import DigitsEditor
    from nemo_desktop.core.methods.edit_control import ReferenceControl

    real = ReferenceControl._references

    def leaving_one_out(self):
        refs = real(self)
        note = "Reference control: ref.png is not classified as 'two' by this classifier; left out."
        if note not in self.notes:
            self.notes.append(note)
        return refs

    monkeypatch.setattr(ReferenceControl, "_references", leaving_one_out)
    clf, index, store, cluster = found
    blue = SentenceValidator(clf, EditWriterMLLM(), DigitsEditor(), store).validate(index, cluster, BLUE,
                                                                                    max_images=4)
    assert blue.manifest["control_notes"] == ["Reference control: ref.png is not classified as 'two' by this "
                                              "classifier; left out."]

"""ErrorRetrieval: the planted sentence is found in a constructed embedding case (and only thanks to the
contrast with the class reference caption), the shipped corpus and user extensions load, and the validated
variant picks the sentence with the largest CEI on the digits world."""
from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from baseline_doubles import PlantedSpace
from digits_world import EIGHT, THREE, DigitsEditor, ScriptedDigitsMLLM
from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.methods.error_retrieval import (CATEGORIES, ErrorCorpus, ErrorRetrievalConfig,
                                                       ErrorRetrievalPipeline, ErrorSentence, load_corpus,
                                                       rank_sentences)
from nemo_desktop.core.registry.methods import get_method
from nemo_desktop.core.models.protocols import ModelInfo

PLANTED = "a pencil sketch of a {class}."
CORPUS = [PLANTED, "a close-up photo of a {class}.", "a {class} in the snow.", "a photo of a {class} at night.",
          "a {class} made of wood."]
# dims: cat-ness, photo style, sketch style, snow, other detail
VECTORS = {"a photo of a cat.": [1, 1, 0, 0, 0],  # the class reference caption
           "a pencil sketch of a cat.": [1, 0, 1, 0, 0],
           "a close-up photo of a cat.": [2, 1, 0, 0, 0.3],  # mostly "cat": close to the image, says nothing
           "a cat in the snow.": [1, 1, 0, 1, 0],
           "a photo of a cat at night.": [1, 1, 0, 0, 0.1],
           "a cat made of wood.": [1, 0.8, 0, 0, 0.4]}
SKETCH = (200, 200, 200)  # corner colour of the query image
IMAGE_VECTOR = [1, 0, 0.25, 0, 0.05]  # a sketch of a cat, dominated by its content


class FixedClassifier:
    """Classifier double with fixed probabilities: the cat is taken for a dog."""

    zero_shot = False
    info = ModelInfo("test-double:fixed", "test-double", "1")
    class_names = ["cat", "dog", "fox"]

    def __init__(self) -> None:
        self.calls = 0

    def predict_proba(self, images, *, class_prompts=None):
        self.calls += 1
        return np.tile(np.array([[0.2, 0.7, 0.1]], np.float32), (len(images), 1))

    def embed(self, images):
        raise AssertionError("ErrorRetrieval must embed in the joint space, not the classifier's")


def corpus(texts=CORPUS) -> ErrorCorpus:
    return ErrorCorpus([ErrorSentence(f"s{i}", "test", t, "test") for i, t in enumerate(texts)],
                       "a photo of a {class}.")


PDIFF = ErrorRetrievalConfig(contrast="pdiff")


def sketch() -> Image.Image:
    return Image.new("RGB", (16, 16), SKETCH)


def test_planted_sentence_is_retrieved_by_contrast_with_the_class_caption(store):
    space = PlantedSpace(VECTORS, {SKETCH: IMAGE_VECTOR})
    clf = FixedClassifier()
    pipe = ErrorRetrievalPipeline(clf, None, store=store, embedder=space, corpus=corpus(), config=PDIFF)
    result = pipe(sketch(), "cat")

    assert result.method == "error-retrieval" and result.explanation == "a pencil sketch of a cat."
    assert result.sample.pred_name == "dog" and result.selected_index == 0 and len(result.candidates) == 1
    assert result.cei is None and any("not scored" in n and "no MLLM" in n for n in result.notes)
    # Exactly the reference caption and the filled sentences were embedded, once.
    assert space.text_calls == [["a photo of a cat."] + [t.replace("{class}", "cat") for t in CORPUS]]
    ranking = result.manifest["details"]["ranking"]
    assert ranking[0]["sentence"] == "a pencil sketch of a cat." and ranking[0]["score"] > ranking[1]["score"]
    assert result.manifest["models"]["embedder"]["id"] == "test-double:planted-space"

    # Re-run: answered from the store, no model call at all.
    calls = (clf.calls, space.image_calls, len(space.text_calls))
    again = ErrorRetrievalPipeline(clf, None, store=store, embedder=space, corpus=corpus(),
                                   config=PDIFF)(sketch(), "cat")
    assert again.to_dict() == result.to_dict()
    assert (clf.calls, space.image_calls, len(space.text_calls)) == calls


def test_without_contrast_a_class_heavy_sentence_wins():
    """The same vectors ranked by image similarity alone (TopS) pick the sentence that merely restates the
    class: the contrast is what finds the planted one. FPDiff agrees with PDiff here."""
    texts = [t.replace("{class}", "cat") for t in CORPUS]
    embs = np.stack([np.asarray(VECTORS[t], float) / np.linalg.norm(VECTORS[t]) for t in texts])
    ref = np.asarray(VECTORS["a photo of a cat."], float) / np.sqrt(2)
    img = np.asarray(IMAGE_VECTOR, float) / np.linalg.norm(IMAGE_VECTOR)
    tops, _ = rank_sentences(img, ref, embs, contrast="tops")
    pdiff, scores = rank_sentences(img, ref, embs, contrast="pdiff")
    fpdiff, _ = rank_sentences(img, ref, embs, contrast="fpdiff", filter_k=2)
    assert texts[tops[0]] == "a close-up photo of a cat."
    assert texts[pdiff[0]] == texts[fpdiff[0]] == "a pencil sketch of a cat."
    assert len(fpdiff) == 2  # only the two sentences most similar to the image are eligible
    assert scores["sim_image"][tops[0]] > scores["sim_image"][pdiff[0]]


def test_the_corpus_changes_the_key_and_the_answer(store):
    space = PlantedSpace(VECTORS, {SKETCH: IMAGE_VECTOR})
    first = ErrorRetrievalPipeline(FixedClassifier(), None, store=store, embedder=space, corpus=corpus(),
                                   config=PDIFF)(sketch(), "cat")
    smaller = corpus([t for t in CORPUS if t != PLANTED])
    second = ErrorRetrievalPipeline(FixedClassifier(), None, store=store, embedder=space, corpus=smaller,
                                    config=PDIFF)(sketch(), "cat")
    assert second.result_key != first.result_key and second.explanation != first.explanation


def test_defaults_are_the_papers_reading():
    """Plain image-sentence similarity over the class-agnostic failure statements; the contrastive ranking
    and the class-caption corpus are options."""
    cfg = ErrorRetrievalConfig()
    assert cfg.contrast == "similarity" and cfg.corpus == "failure-statements"
    space = PlantedSpace(VECTORS, {SKETCH: IMAGE_VECTOR})
    plain = ErrorRetrievalPipeline(FixedClassifier(), None, embedder=space, corpus=corpus())(sketch(), "cat")
    assert plain.explanation == "a close-up photo of a cat."  # the most similar sentence, no contrast
    assert plain.manifest["details"]["contrast"] == "similarity"
    with pytest.raises(ConfigError):
        ErrorRetrievalConfig(corpus="mine")


def test_shipped_failure_statements_are_class_agnostic_and_cite_the_paper():
    c = load_corpus(include_user_dir=False)
    assert len(c) >= 90 and len({s.text for s in c.sentences}) == len(c)
    assert not any("{class}" in s.text for s in c.sentences)
    assert len(c.categories()) >= 10
    # The paper's printed Retrieval rows (appendix C, Figs 10-12), verbatim.
    paper = [s for s in c.sentences if s.id.startswith("paper-")]
    assert len(paper) == 13
    texts = {s.text for s in c.sentences}
    assert {"Object is a plush toy lacking rigid structure.", "Camera is too close, showing only texture without "
            "shape.", "Typically co-occurring objects are missing from the scene."} <= texts
    # No category dominates (the class-caption corpus followed ImageNet-D's factors).
    counts = [sum(s.category == cat for s in c.sentences) for cat in c.categories()]
    assert max(counts) <= 0.2 * len(c)


def test_class_caption_corpus_stays_an_option():
    c = load_corpus(include_user_dir=False, name="class-captions")
    assert set(c.categories()) == set(CATEGORIES)
    for cat in CATEGORIES:
        assert sum(s.category == cat for s in c.sentences) >= 10, cat
    assert all("{class}" in s.text for s in c.sentences)
    assert len({s.text for s in c.sentences}) == len(c) >= 150
    assert c.reference_caption == "a photo of a {class}."


def test_user_files_extend_the_corpus(tmp_path, monkeypatch):
    from nemo_desktop.core.methods.error_retrieval import user_corpus_dir

    base = load_corpus(name="class-captions")
    folder = user_corpus_dir()
    folder.mkdir(parents=True)
    (folder / "mine.json").write_text(json.dumps({"sentences": [
        {"category": "weather", "text": "a {class} in heavy rain."}, "a {class} under water droplets."]}))
    (folder / "more.tsv").write_text("# my additions\nweather\ta {class} in a sandstorm.\n\n"
                                     "background and context\ta {class} in the snow.\n")  # a duplicate
    extended = load_corpus(name="class-captions")
    texts = [s.text for s in extended.sentences]
    assert len(extended) == len(base) + 3
    assert {"a {class} in heavy rain.", "a {class} under water droplets.", "a {class} in a sandstorm."} <= set(texts)
    assert extended.sha256 != base.sha256 and str(folder / "more.tsv") in extended.sources
    (folder / "bad.tsv").write_text("weather only one column\n")
    with pytest.raises(ConfigError, match="Line 1"):
        load_corpus(name="class-captions")


def test_non_zero_shot_classifier_needs_a_joint_space():
    with pytest.raises(ConfigError, match="cannot embed both"):
        ErrorRetrievalPipeline(FixedClassifier(), None, embedder=FixedClassifier(), corpus=corpus())


# -- validation on the digits world ----------------------------------------------------------------------------
DIGIT_SENTENCES = ["a {class} with thinner strokes.", "a slightly rotated {class}.", "a {class} written in blue ink.",
                   "a {class} on a sandy beach."]


def digits_space(blue_three_image):
    # The ranking puts the causal sentence (blue ink) third: only CEI can promote it.
    texts = {"a photo of a three.": [1, 0, 0, 0, 0, 1],
             "a three with thinner strokes.": [1, 1, 0, 0, 0, 0],
             "a slightly rotated three.": [1, 0, 1, 0, 0, 0],
             "a three written in blue ink.": [1, 0, 0, 1, 0, 0],
             "a three on a sandy beach.": [1, 0, 0, 0, 1, 0]}
    corner = blue_three_image.getpixel((0, 0))
    return PlantedSpace(texts, {corner: [1, 0.6, 0.4, 0.3, 0, 0]})


@pytest.mark.parametrize("method", ["error-retrieval", "error-retrieval-validated"])
def test_validation_picks_the_sentence_with_the_largest_cei(digits_classifier, blue_three, store, method):
    img = Image.open(blue_three).convert("RGB")
    entry = get_method(method)
    mllm, editor = ScriptedDigitsMLLM(), DigitsEditor()
    pipe = entry.factory(digits_classifier, mllm, editor=editor, store=store, config=ErrorRetrievalConfig(m=3),
                         embedder=digits_space(img))
    pipe.corpus = corpus(DIGIT_SENTENCES)
    result = pipe(blue_three, "three")
    assert result.sample.true_index == THREE and result.sample.pred_index == EIGHT
    if method == "error-retrieval":  # Table 1: the top-ranked sentence, still scored with CEI
        assert [c.hypothesis for c in result.candidates] == ["a three with thinner strokes."]
        assert result.explanation == "a three with thinner strokes." and result.cei is not None and result.cei < 10
        return
    assert [c.hypothesis for c in result.candidates] == ["a three with thinner strokes.", "a slightly rotated three.",
                                                         "a three written in blue ink."]
    ceis = [c.cei for c in result.candidates]
    assert all(c is not None for c in ceis) and result.selected_index == int(np.argmax(ceis)) == 2
    assert result.explanation == "a three written in blue ink." and result.cei == max(ceis) > 50
    assert result.method == "error-retrieval-validated" and result.manifest["validated"] is True
    assert editor.calls == ["Make the strokes thicker", "Rotate the digit slightly", "Recolour the digit red"]
    assert store.get(result.result_key).load_image("edited_2").size == img.size


def test_validated_variant_refuses_to_run_untested(digits_classifier, blue_three):
    pipe = get_method("error-retrieval-validated").factory(digits_classifier, ScriptedDigitsMLLM(), editor=None,
                                                            embedder=digits_space(Image.open(blue_three)))
    with pytest.raises(ConfigError, match="no image editor"):
        pipe(blue_three, "three")

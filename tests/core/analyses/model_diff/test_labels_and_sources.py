"""Label matching by class name, zero-shot prompt sets, and the condition grid/renderer."""
from __future__ import annotations

import json

import numpy as np
import pytest

from nemo_desktop.core.analyses.model_diff import (PromptedClassifier, SyntheticDigits, load_grid,
                                                   load_open_conditions, load_prompt_set, match_labels)
from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.models.protocols import ModelInfo


def test_labels_are_matched_by_name_in_any_order():
    m = match_labels(["cat", "Dog", "bird"], ["bird", "cat", "dog"], ["dog", "bird"])
    assert m.index_a == (1, 2) and m.index_b == (2, 0)


def test_a_class_one_model_lacks_is_named():
    with pytest.raises(ConfigError) as e:
        match_labels(["cat", "dog", "fox"], ["cat", "dog", "owl"], ["cat"])
    assert "Model B lacks 'fox'" in e.value.message and "Model A lacks 'owl'" in e.value.message
    with pytest.raises(ConfigError, match="'zebra'"):
        match_labels(["cat", "dog"], ["dog", "cat"], ["zebra"])


class FakeZeroShot:
    """Scores a class by whether its prompt mentions the image's dominant colour name (test double)."""

    zero_shot = True
    info = ModelInfo("test-double:zero-shot", "test-double", "1")
    class_names = ["man", "woman"]

    def predict_proba(self, images, *, class_prompts=None):
        out = []
        for im in images:
            red = np.asarray(im)[..., 0].mean() > 128
            s = [1.0 if ("black" in class_prompts[i]) != red else 0.0 for i in range(2)]
            out.append(np.exp(s) / np.exp(s).sum())
        return np.array(out)


def test_one_zero_shot_model_two_prompt_sets(tmp_path):
    from PIL import Image

    base = FakeZeroShot()
    f = tmp_path / "a.json"
    f.write_text(json.dumps({"Man": "a photo of a man with black hair", "woman": "a photo of a woman with blond hair"}))
    a = PromptedClassifier(base, load_prompt_set(f, base.class_names), "A")
    b = PromptedClassifier(base, ["a photo of a man with blond hair", "a photo of a woman with black hair"], "B")
    dark = Image.new("RGB", (4, 4), (0, 0, 0))
    assert a.predict_proba([dark]).argmax() == 0 and b.predict_proba([dark]).argmax() == 1
    assert a.info.revision != b.info.revision and a.info.model_id.endswith("#A")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"man": "x"}))
    with pytest.raises(ConfigError, match="no prompt for 'woman'"):
        load_prompt_set(bad, base.class_names)


def test_shipped_grid_and_renderer():
    grid = load_grid()
    assert grid.size() == 1300 and len({c.id for c in grid.all_conditions()}) == 1300
    assert grid.class_labels() == tuple(str(d) for d in range(10))
    with pytest.raises(ConfigError, match="allowed value"):
        grid.make({"digit": 3, "color": "chartreuse", "angle": 0})
    gen = SyntheticDigits(size=16)
    cond = grid.make({"digit": 3, "color": "green", "angle": -30})
    pairs = gen.sample(cond, 5, seed=1)
    assert [p[1] for p in pairs] == ["3"] * 5 and pairs[0][0].size == (16, 16)
    corner = np.asarray(pairs[0][0])[0, 0]
    assert tuple(corner) == (0, 255, 0)  # ReBias green background
    again = gen.sample(cond, 5, seed=1)
    assert all(np.array_equal(np.asarray(x[0]), np.asarray(y[0])) for x, y in zip(pairs, again))


def test_shipped_open_conditions():
    space = load_open_conditions("gender")
    assert space.size() == 100 and space.class_labels() == ("man", "woman")
    assert space.parse_proposal({"condition": "a woman holding a kite", "label": "1"}).label == "woman"


def test_attribute_dataset_csv(tmp_path):
    from PIL import Image

    from nemo_desktop.core.analyses.model_diff.attribute_dataset import AttributeDataset

    rows = ["path,label,light,background"]
    for i in range(5):
        Image.new("RGB", (8, 8), (i * 40, 0, 0)).save(tmp_path / f"{i}.png")
        rows.append(f"{i}.png,{'cat' if i < 3 else 'dog'},{'day' if i % 2 else 'night'},grass")
    (tmp_path / "data.csv").write_text("\n".join(rows) + "\n")
    ds = AttributeDataset(tmp_path / "data.csv")
    conds = ds.space.all_conditions()
    assert {c.text for c in conds} == {"light=day, background=grass", "light=night, background=grass"}
    assert ds.space.class_labels() == ("cat", "dog")
    cell = next(c for c in conds if c.label == "cat" and c.get("light") == "night")
    pairs = ds.sample(cell, 10, seed=0)
    assert len(pairs) == 2 and {p[1] for p in pairs} == {"cat"}  # fewer than m: the cell's n
    (tmp_path / "bad.csv").write_text("file,label\nx.png,cat\n")
    with pytest.raises(ConfigError, match="path"):
        AttributeDataset(tmp_path / "bad.csv")


def test_difference_grid_and_csv_by_hand():
    import csv
    import io

    from nemo_desktop.core.analyses.model_diff import ConditionMeasurement, load_grid
    from nemo_desktop.core.analyses.model_diff.tables import difference_grid, measurements_csv

    grid = load_grid()
    ms = [ConditionMeasurement(grid.make({"digit": d, "color": c, "angle": a}), 4, acc_a, acc_b)
          for d, c, a, acc_a, acc_b in [(3, "red", 0, 1.0, 0.5), (3, "red", 5, 0.5, 0.5), (3, "blue", 0, 0.0, 1.0),
                                        (10 - 3, "blue", 0, 1.0, 0.25)]]
    row, col, rows, cols, cells = difference_grid(ms)
    assert (row, col, rows, cols) == ("digit", "color", ["3", "7"], ["blue", "red"])
    assert cells[("3", "red")] == (0.25, 2) and cells[("3", "blue")] == (-1.0, 1) and ("7", "red") not in cells
    assert difference_grid(ms[:1]) is None  # nothing varies
    table = list(csv.reader(io.StringIO(measurements_csv(ms[:2], ms[3:]))))
    assert table[0] == ["set", "digit", "color", "angle", "label", "n", "accuracy_a", "accuracy_b",
                        "difference_a_minus_b"]
    assert table[1] == ["held-out", "3", "red", "0", "3", "4", "1.0000", "0.5000", "+0.5000"]
    assert table[3][0] == "observed" and table[3][-1] == "+0.7500"


def test_scores_csv_by_hand_and_the_export_writes_both_files(tmp_path):
    import csv
    import io

    from nemo_desktop.core.analyses.model_diff import ConditionMeasurement, load_grid
    from nemo_desktop.core.analyses.model_diff.result import ExplanationScore, MethodExplanation, ModelDiffResult
    from nemo_desktop.core.analyses.model_diff.tables import measurements_csv, scores_csv, write_csv_export

    good = MethodExplanation("optimization", 'Model A fails on "red", digits', ExplanationScore(0.5, 8, 12, 0.25), 6)
    failed = MethodExplanation("summarization", "", None, 6, error="no readable explanation")
    rows = list(csv.reader(io.StringIO(scores_csv([good, failed]))))
    assert rows[0][:4] == ["method", "observed_conditions", "n_held_out", "completeness"]
    assert rows[1] == ["optimization", "6", "8", "0.5000", "False", "0.2500", "False", "12", "0", "0", "",
                       'Model A fails on "red", digits']
    assert rows[2] == ["summarization", "6", "", "", "", "", "", "", "", "", "no readable explanation", ""]

    grid = load_grid()
    m = ConditionMeasurement(grid.make({"digit": 3, "color": "red", "angle": 0}), 4, 1.0, 0.5)
    result = ModelDiffResult(explanations=[good, failed], test=[m])
    paths = write_csv_export(result, tmp_path / "diff.csv")
    assert paths == [tmp_path / "diff.csv", tmp_path / "diff.scores.csv"]
    assert paths[0].read_bytes() == measurements_csv([m]).encode()
    assert paths[1].read_bytes() == scores_csv([good, failed]).encode()


class _AlwaysClass:
    """Test double: a classifier with the given class names that always answers class `answer`."""

    def __init__(self, class_names, answer):
        self.class_names, self.answer = list(class_names), answer

    def predict_proba(self, images):
        out = np.zeros((len(images), len(self.class_names)))
        out[:, self.class_names.index(self.answer)] = 1.0
        return out


@pytest.mark.parametrize("source", ["digits", "digits-ink"])
def test_the_shipped_digit_conditions_and_the_shipped_demo_classifier_name_the_same_classes(source, tmp_path):
    """Issue 28 #1: the demo classifier names its classes zero..nine, the grid's labels are 0..9; the grid
    declares the mapping (label_aliases), so Compare models works on the demo, with every digit on its class."""
    from nemo_desktop.core.analyses.model_diff.cache import UnitMemo
    from nemo_desktop.core.analyses.model_diff.differences import DifferenceMeter
    from nemo_desktop.core.analyses.model_diff.sources import open_condition_source
    from nemo_desktop.core.demo.digits import CLASS_NAMES as DEMO_CLASSES
    from nemo_desktop.core.analyses.model_diff.demo import CLASS_NAMES as DIGIT_CLASSES

    gen = open_condition_source(source, size=16)
    space = gen.space
    assert space.label_aliases["3"] == ("three",)
    demo = list(DEMO_CLASSES)
    shuffled = demo[5:] + demo[:5]  # another output order: matched by declared name, not by index
    m = match_labels(demo, shuffled, space.class_labels(), space.label_aliases)
    assert [demo[i] for i in m.index_a] == list(DEMO_CLASSES)
    assert [shuffled[i] for i in m.index_b] == list(DEMO_CLASSES)
    mixed = match_labels(demo, list(DIGIT_CLASSES), space.class_labels(), space.label_aliases)  # "three" vs "3"
    assert mixed.index_a == mixed.index_b == tuple(range(10))
    with pytest.raises(ConfigError, match="lack"):  # without the declared mapping it fails, as in the issue
        match_labels(demo, demo, space.class_labels())

    three = space.make({"digit": 3, "color": "green", "angle": 0})
    a, b = _AlwaysClass(demo, "three"), _AlwaysClass(shuffled, "four")
    meter = DifferenceMeter(a, b, gen, m, m=4, seed=0, memo=UnitMemo(None), key_parts={"t": source})
    result = meter.measure(three)
    assert (result.accuracy_a, result.accuracy_b) == (1.0, 0.0)
    assert result.predictions_a == ("3",) * 4 and result.predictions_b == ("4",) * 4
    assert space.resolve_label("three") == "3"  # an LLM proposal naming the class the demo's way


def test_declared_label_aliases_are_checked():
    from nemo_desktop.core.analyses.model_diff.conditions import grid_from_dict

    grid = load_grid()
    with pytest.raises(ConfigError, match="'three' twice, as '3' and 'three'"):
        match_labels([*map(str, range(10)), "three"], [*map(str, range(10)), "three"], grid.class_labels(),
                     grid.label_aliases)
    with pytest.raises(ConfigError, match="two classes"):
        match_labels(["a", "b"], ["a", "b"], ["a", "b"], {"a": ["x"], "b": ["x"]})
    data = {"name": "g", "task_description": "t", "label_attribute": "d",
            "attributes": [{"name": "d", "values": ["0", "1"]}], "label_aliases": {"7": ["seven"]}}
    with pytest.raises(ConfigError, match="not among its class labels"):
        grid_from_dict(data)

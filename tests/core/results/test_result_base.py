"""The shared result base (core/results): results stored by the code before it load to the same objects, the JSON
form carries a schema version, nested parts, optional fields and numpy values round-trip."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from result_examples import EXAMPLES  # tests/core/results: pytest puts it on sys.path

from nemo_desktop.core.analyses.fix.result import FixResult
from nemo_desktop.core.registry.results import AnalysisResult
from nemo_desktop.core.results import SCHEMA_FIELD, Record, ResultBase

DATA = Path(__file__).resolve().parents[2] / "data" / "results_v0"


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_a_result_stored_before_the_base_loads_to_the_same_object(name):
    expected = EXAMPLES[name]()
    stored = json.loads((DATA / f"{name}.json").read_text())
    assert type(expected).from_dict(stored) == expected


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_written_layout_is_the_old_one_plus_the_schema(name):
    result = EXAMPLES[name]()
    stored = json.loads((DATA / f"{name}.json").read_text())
    written = json.loads(json.dumps(result.to_dict()))

    added: list[str] = []

    def as_stored(w, s, path="result"):
        """`w` without the schema field and without the fields added since `s` was written (at any depth, e.g. a
        fix's `prompts`, a candidate's `edit_control`), each of which must hold its default, None."""
        if isinstance(w, dict) and isinstance(s, dict):
            out = {}
            for k, v in w.items():
                if k == SCHEMA_FIELD:
                    continue
                if k not in s:
                    assert v is None, f"{path}.{k} was added since and is not None: {v!r}"
                    added.append(f"{path}.{k}")
                    continue
                out[k] = as_stored(v, s[k], f"{path}.{k}")
            return out
        if isinstance(w, list) and isinstance(s, list) and len(w) == len(s):
            return [as_stored(a, b, f"{path}[{i}]") for i, (a, b) in enumerate(zip(w, s))]
        return w

    assert as_stored(written, stored) == stored, added
    assert type(result).from_dict(written) == result
    assert isinstance(result, AnalysisResult)


def test_every_stored_result_type_uses_the_base():
    for name, build in EXAMPLES.items():
        result = build()
        if name == "global_analysis":  # two stored results joined (summary + score), each on the base
            assert isinstance(result.explanation, ResultBase) and isinstance(result.score, ResultBase)
        else:
            assert isinstance(result, ResultBase), name
            assert result.to_dict()[SCHEMA_FIELD] == type(result).SCHEMA
            assert result.key == result.result_key


def test_a_result_of_a_newer_schema_is_refused_in_words():
    d = EXAMPLES["fix"]().to_dict()
    d[SCHEMA_FIELD] = FixResult.SCHEMA + 1
    with pytest.raises(ValueError, match="newer version of NEMO Desktop"):
        FixResult.from_dict(d)


def test_another_analysis_is_refused():
    d = EXAMPLES["fix"]().to_dict()
    d["analysis"] = "failure-modes"
    with pytest.raises(ValueError, match="not a fix result"):
        FixResult.from_dict(d)


@dataclass
class _Part(Record):
    values: np.ndarray
    scale: float


@dataclass
class _Toy(ResultBase):
    SCHEMA = 2
    parts: list[_Part]
    best: _Part | None = None
    by_name: dict[str, _Part] = field(default_factory=dict)
    pair: tuple[int, str] = (0, "")
    result_key: str | None = None

    @classmethod
    def upgrade(cls, d, schema):
        if schema < 2:  # schema 1 called `by_name` `named`
            d["by_name"] = d.pop("named", {})
        return d


def test_nested_optional_and_numpy_values_round_trip_through_json():
    toy = _Toy([_Part(np.arange(3, dtype=np.float32), np.float64(0.5))], None,
               {"a": _Part(np.zeros((2, 2)), 2.0)}, (3, "x"), "k")
    d = json.loads(json.dumps(toy.to_dict()))  # numpy values are plain numbers and lists
    back = _Toy.from_dict(d)
    assert isinstance(back.parts[0], _Part) and isinstance(back.parts[0].values, np.ndarray)
    np.testing.assert_array_equal(back.parts[0].values, [0, 1, 2])
    np.testing.assert_array_equal(back.by_name["a"].values, np.zeros((2, 2)))
    assert back.best is None and back.pair == (3, "x") and back.key == "k" and back.parts[0].scale == 0.5


def test_an_older_schema_is_upgraded():
    d = json.loads(json.dumps(_Toy([], by_name={"a": _Part(np.ones(1), 1.0)}).to_dict()))
    d["named"] = d.pop("by_name")
    d[SCHEMA_FIELD] = 1
    assert list(_Toy.from_dict(d).by_name) == ["a"]
    del d[SCHEMA_FIELD]  # no schema: written before the base, schema 1
    d["named"] = {"b": {"values": [1.0], "scale": 1.0}}
    d.pop("by_name", None)
    assert list(_Toy.from_dict(d).by_name) == ["b"]

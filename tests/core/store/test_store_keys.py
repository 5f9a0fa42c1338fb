import hashlib
import math
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from nemo_desktop.core.store import content_hash, result_key
from nemo_desktop.core.store.keys import canonical_json


def caption_parts(**over):
    parts = dict(image_sha256="ab" * 32, mllm="qwen2.5-vl-7b", mllm_revision="rev1",
                 prompt_version="scitx-caption/1", params={"max_new_tokens": 256, "temperature": 0.0, "top_p": 1.0},
                 seed=0)
    parts.update(over)
    return parts


def test_same_parts_in_any_order_give_the_same_key():
    a = caption_parts()
    b = dict(reversed(list(a.items())))
    b["params"] = dict(reversed(list(a["params"].items())))
    assert list(a) != list(b)
    assert result_key("caption", **a) == result_key("caption", **b)
    # tuples and lists are the same JSON; Paths become posix strings
    assert result_key("x", size=(1, 2)) == result_key("x", size=[1, 2])
    assert result_key("x", p=Path("a/b.png")) == result_key("x", p="a/b.png")
    assert result_key("x", p=np.float32(0.5)) == result_key("x", p=0.5)


@pytest.mark.parametrize("change", [
    {"prompt_version": "scitx-caption/2"},
    {"mllm_revision": "rev2"},
    {"params": {"max_new_tokens": 257, "temperature": 0.0, "top_p": 1.0}},
    {"params": {"max_new_tokens": 256, "temperature": 0.1, "top_p": 1.0}},
    {"seed": 1},
    {"image_sha256": "cd" * 32},
])
def test_any_changed_part_changes_the_key(change):
    assert result_key("caption", **caption_parts()) != result_key("caption", **caption_parts(**change))


def test_kind_and_types_are_part_of_the_key():
    assert result_key("caption", **caption_parts()) != result_key("hypotheses", **caption_parts())
    assert result_key("x", v=1) != result_key("x", v="1")
    assert result_key("x", v=True) != result_key("x", v=1)
    assert result_key("x", v=None) != result_key("x")


def test_key_is_sha256_of_canonical_json_and_stable():
    text = canonical_json({"kind": "x", "b": 0.1, "a": [1, {"z": 1, "y": 2}]})
    assert text == '{"a":[1,{"y":2,"z":1}],"b":0.1,"kind":"x"}'
    assert result_key("x", b=0.1, a=[1, {"z": 1, "y": 2}]) == hashlib.sha256(text.encode()).hexdigest()
    # pinned value: changing canonicalisation would silently orphan every stored result
    assert result_key("caption", image_sha256="0" * 64, seed=0) == hashlib.sha256(
        ('{"image_sha256":"' + "0" * 64 + '","kind":"caption","seed":0}').encode()).hexdigest()


def test_unrepresentable_parts_are_refused():
    with pytest.raises(ValueError, match="NaN"):
        result_key("x", cei=math.nan)
    with pytest.raises(TypeError, match="unsupported type"):
        result_key("x", thing=object())
    with pytest.raises(TypeError, match="non-string key"):
        result_key("x", params={1: "a"})


def test_content_hash_of_bytes_path_and_image(tmp_path):
    data = b"hello world" * 1000
    f = tmp_path / "f.bin"
    f.write_bytes(data)
    assert content_hash(data) == hashlib.sha256(data).hexdigest()
    assert content_hash(f) == content_hash(str(f)) == content_hash(data)

    pixels = np.arange(64 * 64 * 3, dtype=np.uint8).reshape(64, 64, 3)
    im = Image.fromarray(pixels)
    im.save(tmp_path / "a.png")
    im.save(tmp_path / "b.png", compress_level=0)
    with Image.open(tmp_path / "a.png") as a, Image.open(tmp_path / "b.png") as b:
        assert content_hash(a) == content_hash(b) == content_hash(im)  # pixels, not file encoding
    assert content_hash(tmp_path / "a.png") != content_hash(tmp_path / "b.png")  # file bytes differ
    assert content_hash(im.convert("RGBA")) != content_hash(im)
    assert content_hash(im.transpose(Image.Transpose.ROTATE_90)) != content_hash(im)
    with pytest.raises(TypeError):
        content_hash(12)

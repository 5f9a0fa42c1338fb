import pytest

from nemo_desktop.core.store import atomic_write_bytes
from nemo_desktop.core.store.atomic import atomic_write_text, atomic_writer


def test_atomic_write_replaces_and_leaves_no_temp(tmp_path):
    p = tmp_path / "a.txt"
    atomic_write_text(p, "one")
    atomic_write_bytes(p, b"two")
    assert p.read_bytes() == b"two"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["a.txt"]


def test_failure_while_writing_keeps_the_old_file(tmp_path):
    p = tmp_path / "a.txt"
    p.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_writer(p) as f:
            f.write(b"half of the new conte")
            raise RuntimeError("disk on fire")
    assert p.read_text() == "old"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["a.txt"]

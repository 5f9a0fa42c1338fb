import pytest

from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.methods.labels import resolve_label

NAMES = ["tench, Tinca tinca", "great white shark", "Great_Grey_Owl", "7", "cat"]


def test_names_synonyms_case_and_indices():
    assert resolve_label("cat", NAMES) == 4
    assert resolve_label("Great White Shark", NAMES) == 1
    assert resolve_label("great grey owl", NAMES) == 2
    assert resolve_label("Tinca tinca", NAMES) == 0
    assert resolve_label(2, NAMES) == 2
    assert resolve_label("2", NAMES) == 2
    assert resolve_label("7", NAMES) == 3  # a class named "7" wins over index 7


def test_unknown_label_lists_close_matches():
    with pytest.raises(ConfigError) as err:
        resolve_label("great white shrk", NAMES)
    assert "great white shark" in err.value.hint
    with pytest.raises(ConfigError, match="out of range"):
        resolve_label(9, NAMES)
    with pytest.raises(ConfigError, match="out of range"):
        resolve_label("12", NAMES)


def test_ambiguous_label():
    with pytest.raises(ConfigError, match="several classes"):
        resolve_label("crane", ["crane", "cat", "crane"])
    with pytest.raises(ConfigError, match=r"0 \(crane\), 2 \(CRANE\)"):
        resolve_label("Crane", ["crane", "cat", "CRANE"])

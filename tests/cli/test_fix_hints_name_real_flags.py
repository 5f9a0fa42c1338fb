"""Issue 42 §6: every flag the fix's messages and hints name is one `nemo fix` accepts (saving.py used to suggest
`--no-save`, which the CLI rejects: the flag is `--save false`)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from nemo_desktop.cli.main import main

FIX = Path(__file__).resolve().parents[2] / "nemo_desktop" / "core" / "analyses" / "fix"


def _fix_flags(capsys) -> set[str]:
    with pytest.raises(SystemExit):
        main(["fix", "--help"])
    return set(re.findall(r"(--[a-z][a-z-]+)", capsys.readouterr().out))


def test_the_flags_named_in_the_fix_messages_exist(capsys):
    accepted = _fix_flags(capsys)
    assert {"--save", "--min-gain", "--margin", "--mode"} <= accepted
    named = {flag: f.name for f in FIX.glob("*.py") for flag in re.findall(r"(--[a-z][a-z-]+)", f.read_text())}
    assert named and {k: v for k, v in named.items() if k not in accepted} == {}

"""Tuple-of-choices settings on the command line: comma-separated or the option repeated (argparse alone would keep
only the last), each name once, unknown names and an empty choice refused with exit code 2 before any work."""
from __future__ import annotations

import argparse

import pytest

from nemo_desktop.cli.main import main
from nemo_desktop.cli.options import add_config_options, given_options
from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.registry import get_analysis, make_config


def _parse(name, argv):
    parser = argparse.ArgumentParser()
    add_config_options(parser, [get_analysis(name).config])
    return make_config(get_analysis(name), given_options(parser.parse_args(argv)))


def test_comma_separated_and_repeated_give_the_same_config():
    a = _parse("model-diff", ["--methods", "summarization, optimization"])
    b = _parse("model-diff", ["--methods", "summarization", "--methods", "optimization"])
    assert a.methods == b.methods == ("summarization", "optimization")
    assert _parse("model-diff", []).methods == ("raw-differences", "summarization", "optimization")  # default
    c = _parse("competency-cf", ["--explain-methods", "lgd", "--explain-methods", "lgd,lnn", "--methods", "igd"])
    assert c.explain_methods == ("lgd", "lnn") and c.methods == ("igd",)


def test_unknown_or_no_names_are_refused():
    with pytest.raises(ConfigError, match="must be one of raw-differences, summarization, optimization, not 'best'"):
        _parse("model-diff", ["--methods", "summarization,best"])
    with pytest.raises(ConfigError, match="choose at least one"):
        _parse("competency-cf", ["--explain-methods", ","])


def test_help_says_how_to_give_several(capsys):
    with pytest.raises(SystemExit):
        main(["failure-modes", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--methods NAME[,NAME]" in out and "some of tops, pdiff, setdiff, fpdiff" in out
    assert "comma-separated or the option repeated" in out


@pytest.mark.parametrize("argv, message", [
    (["failure-modes", "no-such-index", "--methods", "pdiff,bogus"], "not 'bogus'"),
    (["compare", "run", "-a", "x", "--llm", "y", "--methods", "optimisation"], "not 'optimisation'"),
])
def test_commands_refuse_an_unknown_name_with_exit_2(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err

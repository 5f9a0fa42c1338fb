"""The documentation: the README is a front door whose links resolve, the MkDocs site builds with `--strict` (no
warning, no broken link), the generated command-line reference covers the whole parser, and every `nemo ...`
command and flag the documentation names exists in it."""
from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
HOOK = DOCS / "_hooks" / "cli_reference.py"
README_MAX_LINES = 250  # issue 41: the README is a front door


def _hook():
    spec = importlib.util.spec_from_file_location("nemo_docs_cli_reference", HOOK)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def reference() -> dict[str, str]:
    """The generated command-line reference: {page path: Markdown}."""
    return _hook().pages()


def _documented(pages: dict[str, str]) -> tuple[dict[str, set[str]], set[str]]:
    """From the generated pages: {`nemo a b`: its flags} and the global flags (the index page's table)."""
    commands: dict[str, set[str]] = {}
    for path, text in pages.items():
        if path.endswith("/index.md"):
            continue
        current = None
        for line in text.splitlines():
            heading = re.match(r"^#+ `(nemo[^`]*)`$", line)
            if heading:
                current = heading.group(1)
                commands[current] = set()
            elif current and line.startswith("| `"):
                first = line.split(" | ", 1)[0]
                commands[current] |= set(re.findall(r"`(--?[A-Za-z][\w-]*)`", first))
    index = next(t for p, t in pages.items() if p.endswith("/index.md"))
    globals_ = {f for line in index.splitlines() if line.startswith("| `-")
                for f in re.findall(r"`(--?[A-Za-z][\w-]*)`", line.split(" | ", 1)[0])}
    return commands, globals_ | {"-h", "--help"}


def _walk(parser: argparse.ArgumentParser, name: str = "nemo"):
    parser.format_help()  # derived options are added on first use (cli/options.py)
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _walk(sub, f"{name} {sub_name}")


def test_the_cli_reference_lists_every_command_and_option_of_the_parser(reference):
    from nemo_desktop.cli.main import build_parser

    commands, globals_ = _documented(reference)
    for name, parser in _walk(build_parser()):
        flags = {f for a in parser._actions for f in a.option_strings
                 if a.help != argparse.SUPPRESS and not isinstance(a, argparse._HelpAction)}
        if name == "nemo":
            assert flags <= globals_, ("global options missing from the reference", flags - globals_)
            continue
        assert name in commands, f"{name} has no section in the generated reference"
        assert flags <= commands[name], (name, flags - commands[name])
    assert {"nemo explain", "nemo competency score", "nemo bench run", "nemo cache quarantine list"} <= set(commands)


def test_a_command_added_to_the_parser_appears_in_the_reference():
    """Generic walk: a sub-command and option the generator has never seen (as a plugin's analysis would add) get
    their page and row."""
    parser = argparse.ArgumentParser(prog="nemo")
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run", help="run any analysis").add_subparsers(dest="analysis")
    thing = run.add_parser("throw-away", help="a throw-away analysis", description="Only for this test.")
    thing.add_argument("--frobnicate", metavar="N", type=int, default=3, help="how hard (%(default)s)")
    pages = _hook().pages(parser)
    commands, _ = _documented(pages)
    assert commands["nemo run throw-away"] == {"--frobnicate"}
    assert "how hard (3)" in pages["reference/cli/nemo-run.md"]


def _doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted(p for p in DOCS.rglob("*.md") if "_hooks" not in p.parts)]


def _named_commands(text: str) -> list[str]:
    """Every `nemo ...` the text names: inline code spans, and command lines in code blocks (a line continued
    with a backslash read as one)."""
    text = re.sub(r"\\\n\s*", " ", text)
    spans = [s for s in re.findall(r"`([^`\n]+)`", text) if s.startswith("nemo ")]
    for line in text.splitlines():
        for piece in re.split(r"&&|;", line.split(" # ", 1)[0]):
            piece = piece.strip()
            if piece.startswith("nemo ") and "`" not in piece:
                spans.append(piece)
    return spans


def _check(span: str, commands: dict[str, set[str]], globals_: set[str]) -> list[str]:
    """Problems with one named command: an unknown sub-command or a flag the command does not have."""
    problems = []
    current = "nemo"
    for i, raw in enumerate(span.split()[1:]):
        token = raw.strip("[](),.;:'\"")
        if token.startswith("-"):
            flag = token.split("=", 1)[0]
            if not re.fullmatch(r"--?[A-Za-z][\w-]*", flag):
                continue  # '-' (stdout), '--', ranges
            if flag not in commands.get(current, set()) | globals_:
                problems.append(f"{span!r}: {flag} is not an option of `{current}`")
            continue
        if f"{current} {token}" in commands:
            current = f"{current} {token}"
        elif current != "nemo" and f"{current.rsplit(' ', 1)[0]} {token}" in commands:
            current = f"{current.rsplit(' ', 1)[0]} {token}"  # an alternative: `nemo cache info | check`
        elif i == 0 and re.fullmatch(r"[a-z][a-z-]*", token):
            problems.append(f"{span!r}: `nemo {token}` is not a command")
    return problems


def test_every_command_and_flag_the_docs_name_exists(reference):
    commands, globals_ = _documented(reference)
    problems = []
    checked = 0
    for path in _doc_files():
        for span in _named_commands(path.read_text(encoding="utf-8")):
            checked += 1
            problems += [f"{path.relative_to(ROOT)}: {p}" for p in _check(span, commands, globals_)]
    assert problems == []
    assert checked > 100  # the guide names commands everywhere: the scan found them


def test_the_flag_check_catches_a_misspelt_flag_and_command(reference):
    commands, globals_ = _documented(reference)
    assert _check("nemo competency score IMAGES -c ID --treshold 0.5", commands, globals_)
    assert _check("nemo explian IMAGE", commands, globals_)
    assert not _check("nemo competency score IMAGES -c ID --threshold 0.5", commands, globals_)
    assert not _check("nemo cache info | check [--repair] | clear [--kind K] [--yes]", commands, globals_)


# Where a path the docs name in code is looked up: the checkout, the package (`core/...`, `cli/...`), the window's
# package (`widgets/...`), the analyses (`competency/results.py`) and the benchmark scripts (`startup.py`).
PATH_BASES = ("", "nemo_desktop", "nemo_desktop/gui", "nemo_desktop/core/analyses", "benchmarks")
_SOURCE_PATH = re.compile(r"[\w*.-]+\.py"
                          r"|(?:nemo_desktop|core|gui|cli|benchmarks|tests|resources|packaging|scripts|docs)/[\w*./-]*")


def _named_paths(text: str) -> list[str]:
    """Source paths the text names in code spans (`core/registry/registry.py:BUILTIN_MODULES` names the file)."""
    paths = []
    for span in re.findall(r"`([^`\n]+)`", text):
        path = re.split(r"[: ]", span)[0]
        installed = path.startswith("nemo_desktop/resources")  # the installed copy's layout (setup.py maps it)
        if _SOURCE_PATH.fullmatch(path) and "<" not in span.split(" ")[0] and not installed:
            paths.append(path)
    return paths


def test_every_source_path_the_docs_name_exists():
    """A module moved or renamed leaves no stale path in the docs."""
    problems, checked = [], 0
    for doc in _doc_files():
        for path in _named_paths(doc.read_text(encoding="utf-8")):
            checked += 1
            if not any(list(ROOT.glob(str(Path(base) / path))) for base in PATH_BASES):
                problems.append(f"{doc.relative_to(ROOT)}: {path}")
    assert problems == []
    assert checked > 100


def test_the_readme_is_a_front_door_whose_links_resolve():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    headings = {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-")
                for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert len(links) >= 20
    for link in links:
        if re.match(r"https?://|mailto:", link):
            continue
        if link.startswith("#"):
            assert link[1:] in headings, link
            continue
        assert (ROOT / link.split("#", 1)[0]).exists(), link
    # the set-up commands CI and a new user run (.ci/run runs the README's test command)
    assert "bash scripts/run.sh" in text and "bash scripts/test.sh" in text
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text()


def test_the_site_builds_strictly_offline(tmp_path):
    """`mkdocs build --strict`: no warning (broken links and anchors, pages missing from the nav, docstrings
    mkdocstrings cannot read) and nothing fetched from the network (Material's web fonts are off)."""
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None:
        pytest.skip("mkdocs is not installed: install the `docs` extra (pip install -e '.[docs]'); CI does")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=540)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    assert "WARNING" not in r.stderr, r.stderr[-5000:]
    site = tmp_path / "site"
    assert (site / "reference" / "cli" / "nemo-explain" / "index.html").is_file()
    api = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    assert 'id="nemo_desktop.api.explain"' in api and 'id="nemo_desktop.api.run_analysis"' in api
    assert "fonts.googleapis.com" not in (site / "index.html").read_text(encoding="utf-8")

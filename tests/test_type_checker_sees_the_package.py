"""A user's type checker sees the installed package and its typed results (issue 42 §4).

setuptools' default editable install is an import hook that mypy and pyright cannot follow, so a user's checker
reported `nemo_desktop` as missing and every result as `Any`. scripts/install_plan.py installs in "compat" mode (a
.pth path entry) and the package ships `py.typed`. This runs mypy, as a user would, on a script outside the
checkout, in a fresh process without the test run's PYTHONPATH, so only the installed package can be found.
(pyright resolves the same install: checked by hand, see the issue note; it needs Node and its npm package.)
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("mypy", reason="mypy is in the test extra: pip install -e '.[test]'")

USER_SCRIPT = textwrap.dedent("""
    import nemo_desktop as nemo
    from nemo_desktop import api

    e = api.explain("cat.jpg", "tabby", classifier="x")
    reveal_type(e)
    reveal_type(e.key)
    reveal_type(e.cei)
    reveal_type(e.candidates)
    reveal_type(e.candidates[0].edit_verdict)
    reveal_type(e.explanation)
    reveal_type(nemo.explain)
    stored = api.get_result("0" * 16)
    reveal_type(stored.key)
""")


def test_mypy_resolves_the_installed_package_and_types_an_explanation(tmp_path):
    (tmp_path / "user.py").write_text(USER_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}
    run = subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent", "--ignore-missing-imports",
                          "--no-incremental", "--cache-dir", str(tmp_path / ".mypy"), "user.py"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    revealed = [line.split("Revealed type is ", 1)[1].strip('"') for line in out.splitlines()
                if "Revealed type is" in line]
    assert revealed[0] == "nemo_desktop.api.Explanation", out  # not Any: the package was found and is typed
    assert revealed[1] == "builtins.str" or revealed[1] == "str", out
    assert revealed[2].replace("builtins.", "") == "float | None", out
    assert revealed[3].startswith(("builtins.list[nemo_desktop.", "list[nemo_desktop.")), out
    assert revealed[4].replace("builtins.", "") == "str | None", out
    assert revealed[5].replace("builtins.", "") == "str | None", out
    assert revealed[6].endswith("-> nemo_desktop.api.Explanation"), out
    assert revealed[7].replace("builtins.", "") == "str", out  # a stored result's key is a str

"""The checks every registry entry passes (an `AnalysisSpec`, built-in or a plugin's), as plain functions that raise
AssertionError with what is wrong. `AnalysisContract` (contract.py) runs them as tests; the repository's own
contract tests (tests/core/methods/test_analysis_contract.py) call them on every built-in entry.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable

from ..core.base.job_context import JobContext

KINDS_WITH_FORMS = ("int", "float", "bool", "str", "size", "paths")


@dataclass
class AnalysisCase:
    """How to run one entry small and fast: its components (doubles welcome), the arguments it is called with
    before the context ((image, true label), (folder,), ...), the base options, another valid value per config
    field (`variations`), the fields that do not change the result for the same inputs with why (`invariant`), and
    a counter of the expensive calls (model calls, batches) for the store and cancel checks."""

    components: Any
    args: tuple
    options: dict = field(default_factory=dict)
    variations: dict[str, Any] = field(default_factory=dict)
    invariant: dict[str, str] = field(default_factory=dict)
    calls: Callable[[], int] | None = None

    def model_calls(self) -> int:
        if self.calls is not None:
            return self.calls()
        mllm = getattr(self.components, "mllm", None)
        if mllm is not None and hasattr(mllm, "calls"):
            return len(mllm.calls)
        raise AssertionError("give the case a `calls` counter (how many model calls it made so far)")


def run_case(spec: Any, case: AnalysisCase, options: dict | None = None, ctx: JobContext | None = None) -> Any:
    """Build the entry through the one construction path and run it on the case's arguments."""
    from ..core.registry import build_analysis

    return build_analysis(spec, case.components, case.options if options is None else options)(
        *case.args, ctx or JobContext())


def check_entry(spec: Any) -> None:
    """The entry itself: a name the command line can carry, a kind, a version, a description, a config dataclass
    whose every field has field info a form, an option and a tool schema can be built from."""
    import re

    from ..core.registry.spec import KINDS, AnalysisSpec

    assert isinstance(spec, AnalysisSpec), f"{spec!r} is not an AnalysisSpec"
    assert re.fullmatch(r"[a-z0-9][a-z0-9-]*", spec.name), \
        f"'{spec.name}': name an analysis in lower case with dashes (it is a command: nemo run {spec.name})"
    assert spec.kind in KINDS and spec.version, f"{spec.name}: kind in {KINDS} and a version"
    assert spec.description.strip(), f"{spec.name}: give a description (the help, the app's list, the MCP tool)"
    assert callable(spec.factory), f"{spec.name}: the factory is not callable"
    if spec.config is not None:
        check_config_fields(spec)
    if spec.result is not None:
        for name in ("to_dict", "from_dict"):
            assert callable(getattr(spec.result, name, None)), f"{spec.name}: the result type has no {name}"


def check_config_fields(spec: Any) -> None:
    """Every editable field: a label and a default the field info accepts (within its range, among its choices),
    and a default that survives the command line (its text parsed back gives the same value)."""
    from ..core.registry.params import check_range, config_params, parse_value

    assert dataclasses.is_dataclass(spec.config), f"{spec.name}: the config must be a dataclass"
    spec.config()  # every field has a default: a form, `nemo run` and an MCP call may give no settings
    for p in config_params(spec.config):
        where = f"{spec.name}.{p.name}"
        assert p.label.strip(), f"{where}: no label"
        if p.kind is None:
            continue  # not editable on a form or the command line (documented by ParamInfo.kind)
        assert p.kind in KINDS_WITH_FORMS, f"{where}: kind {p.kind}"
        if p.minimum is not None and p.maximum is not None:
            assert p.minimum <= p.maximum, f"{where}: min {p.minimum} > max {p.maximum}"
        if p.default is None:
            assert p.optional, f"{where}: the default is None but the type does not allow None"
            continue
        check_range(p, p.default)  # a ConfigError says which bound or choice the default breaks
        text = _as_cli_text(p, p.default)
        if text is not None:
            assert parse_value(p, text) == p.default, f"{where}: --{p.name} {text} does not give the default back"


def _as_cli_text(p: Any, value: Any) -> str | None:
    if p.kind == "bool":
        return "true" if value else "false"
    if p.kind == "size":
        return f"{value[0]}x{value[1]}"
    if p.kind == "paths":
        return ",".join(value) if value else None
    if p.kind == "float" and isinstance(value, float) and not math.isfinite(value):
        return None
    return str(value)


def check_config_round_trip(spec: Any, case: AnalysisCase) -> None:
    """The config from options and back through a plain dict; every field has a variation (or a reason it does
    not change the result); an unknown option is refused."""
    from ..core.base.errors import ConfigError
    from ..core.registry import config_params, make_config

    config = make_config(spec, case.options)
    assert make_config(spec, dataclasses.asdict(config)) == config
    names = {p.name for p in config_params(spec.config)}
    missing = names - set(case.variations) - set(case.invariant)
    assert not missing, f"{spec.name}: give a variation (or an invariant reason) for {sorted(missing)}"
    try:
        make_config(spec, {"no_such_option": 1})
    except ConfigError as exc:
        assert "no option" in exc.message
    else:
        raise AssertionError(f"{spec.name}: an unknown option was accepted")


def check_result_round_trip_and_store(spec: Any, case: AnalysisCase) -> Any:
    """A run's result is the entry's result type, of its kind and name, with a key; it round-trips through a plain
    dict; a re-run has the same key and is answered from the store (no model call). Returns the result."""
    result = run_case(spec, case)
    assert result.kind == spec.kind and result.analysis == spec.name, \
        f"{spec.name}: the result says kind {result.kind!r}, analysis {result.analysis!r}"
    assert result.key, f"{spec.name}: the result has no store key"
    if spec.result is not None:
        assert isinstance(result, spec.result), f"{spec.name}: the result is not a {spec.result.__name__}"
    d = result.to_dict()
    assert type(result).from_dict(d).to_dict() == d, f"{spec.name}: to_dict/from_dict do not round-trip"
    calls = case.model_calls()
    again = run_case(spec, case)
    assert again.key == result.key, f"{spec.name}: the same inputs gave another key"
    assert case.model_calls() == calls, f"{spec.name}: a re-run must be answered from the store"
    return result


def check_key_changes_with_every_field(spec: Any, case: AnalysisCase) -> None:
    """Every variation changes the config and the key: everything that determines the result is in its key."""
    from ..core.registry import make_config

    base = run_case(spec, case).key
    for name, value in case.variations.items():
        options = {**case.options, name: value}
        assert make_config(spec, options) != make_config(spec, case.options), \
            f"{spec.name}: the variation of {name} equals its base value"
        assert run_case(spec, case, options).key != base, f"{spec.name}: changing {name} did not change the key"


def check_cancel_stops_within_one_unit(spec: Any, case: AnalysisCase) -> None:
    """Cancel after the first unit of progress: the run raises JobCancelled within one more model call."""
    from ..core.base.errors import JobCancelled
    from ..core.base.job_context import CancelToken

    token = CancelToken()
    seen: list[int] = []

    def on_progress(p: Any) -> None:
        if not token.cancelled and p.done >= 1:
            token.cancel()
            seen.append(case.model_calls())

    try:
        run_case(spec, case, ctx=JobContext(on_progress=on_progress, cancel=token))
    except JobCancelled:
        pass
    else:
        raise AssertionError(f"{spec.name}: a cancelled run finished")
    assert seen, f"{spec.name}: the analysis never reported progress"
    assert case.model_calls() - seen[0] <= 1, f"{spec.name}: more than one model call after cancel"


def surfaces(name: str) -> dict[str, bool]:
    """Where the entry `name` appears: the registry, `nemo run --help`, its own `nemo run NAME --help` (with an
    option per setting), the completion scripts, the MCP server's tools, the Python API and the app's Analyses
    list (its Qt-free model; explanation methods are on the workbench instead). Qt is not imported."""
    import contextlib
    import io
    import json
    import re

    from ..cli.commands.completion import script
    from ..cli.main import main
    from ..core.registry import config_params, get_analysis, list_analyses

    spec = get_analysis(name)
    out: dict[str, bool] = {"registry": name in list_analyses()}

    def help_of(*argv: str) -> str:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.suppress(SystemExit):
            main(list(argv))
        return buf.getvalue()

    out["nemo run --help"] = re.search(rf"^\s+{re.escape(name)}(\s|$)", help_of("run", "--help"), re.M) is not None
    own = help_of("run", name, "--help")
    out["nemo run NAME --help"] = f"nemo run {name}" in own and all(
        p.cli_flag in own for p in config_params(spec.config) if p.kind is not None)
    bash, zsh, fish = (script(shell) for shell in ("bash", "zsh", "fish"))
    out["completion"] = (f"_shtab_nemo_run_{name.replace('-', '_')}_option_strings=" in bash
                         and f"run {name}" in fish and name in zsh)
    from ..mcp_server.tools import all_tools

    tools = all_tools()
    from ..core.registry.methods import list_methods

    if name in list_methods():  # an explanation method is a choice of the `explain` tool
        out["mcp"] = any(t.name == "explain" and name in json.dumps(t.schema) + t.description for t in tools)
    else:
        out["mcp"] = any(t.name == "analysis_" + name.replace("-", "_") for t in tools)
    from .. import api

    out["api"] = name in [a["name"] for a in api.analyses()]
    from ..core.app.jobs.analyses import list_page_analyses, on_page

    if on_page(spec):
        out["app"] = name in [s.name for s in list_page_analyses()]
    return out


def check_surfaces(name: str) -> None:
    missing = [where for where, found in surfaces(name).items() if not found]
    assert not missing, f"{name} is missing from: {', '.join(missing)}"

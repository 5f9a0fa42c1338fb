"""Contract tests for an analysis' registry entry, shipped as a pytest plugin: a plugin author runs the checks NEMO
Desktop's own analyses pass on their entry.

    # conftest.py
    pytest_plugins = ["nemo_desktop.testing"]          # or: pytest -p nemo_desktop.testing

    # test_my_analysis.py
    from nemo_desktop.core.registry import Components
    from nemo_desktop.testing import AnalysisCase, AnalysisContract

    class TestMyAnalysis(AnalysisContract):
        name = "my-analysis"                           # the entry your entry point names

        def case(self, nemo_store, tmp_path):          # any fixtures; return how to run it small and fast
            clf = MyTinyClassifier()
            return AnalysisCase(Components(classifier=clf, store=nemo_store), args=(tmp_path / "data",),
                                options={"k": 1}, variations={"k": 2, "seed": 1}, calls=lambda: clf.calls)

Each test of `AnalysisContract` checks one promise: the entry and its config's field info (label, a default within
its range and choices that survives the command line), the config's round trip, the result's type, key and
round trip, a re-run answered from the store, the key changing with every setting, cancel within one unit of work,
and the entry appearing in every surface (`nemo run`, completion, MCP, the Python API, the app's Analyses list).
The plugin adds the fixtures `nemo_home` (a throw-away data root) and `nemo_store` (a results store in it). It is
not registered as an automatic pytest11 plugin: loading it into every pytest session of every environment that has
nemo-desktop installed is not wanted; one line opts in.
"""
from __future__ import annotations

import inspect
from typing import Any

import pytest

from .checks import (AnalysisCase, check_cancel_stops_within_one_unit, check_config_fields,
                     check_config_round_trip, check_entry, check_key_changes_with_every_field,
                     check_result_round_trip_and_store, check_surfaces, run_case, surfaces)


@pytest.fixture
def nemo_home(tmp_path, monkeypatch):
    """A throw-away NEMO_HOME for the test: settings, store and logs go there, never to the user's."""
    home = tmp_path / "nemo-home"
    home.mkdir()
    monkeypatch.setenv("NEMO_HOME", str(home))
    monkeypatch.delenv("NEMO_PORTABLE", raising=False)
    return home


@pytest.fixture
def nemo_store(nemo_home):
    """A results store in `nemo_home`, closed after the test."""
    from ..core.store import ResultsStore

    store = ResultsStore.open(db_path=nemo_home / "store" / "results.sqlite", artifacts_dir=nemo_home / "store" / "a")
    yield store
    store.close()


class AnalysisContract:
    """Subclass with `name` (the entry) and `case(...)` (an AnalysisCase; its parameters are fixtures). Set
    `cancellable = False` for an analysis too small to report progress before it ends."""

    name: str = ""
    cancellable: bool = True

    def case(self, *args: Any, **kwargs: Any) -> AnalysisCase:  # pragma: no cover - the subclass says
        raise NotImplementedError("return an AnalysisCase: how to run the entry small and fast")

    @pytest.fixture
    def nemo_case(self, request) -> AnalysisCase:
        names = [p for p in inspect.signature(self.case).parameters]
        return self.case(**{n: request.getfixturevalue(n) for n in names})

    @pytest.fixture
    def nemo_spec(self) -> Any:
        from ..core.registry import get_analysis

        assert self.name, f"{type(self).__name__}: set `name` to the analysis' registry name"
        return get_analysis(self.name)

    def test_entry_and_field_info(self, nemo_spec):
        check_entry(nemo_spec)

    def test_config_round_trips(self, nemo_spec, nemo_case):
        check_config_round_trip(nemo_spec, nemo_case)

    def test_result_round_trips_and_a_rerun_is_served_from_the_store(self, nemo_spec, nemo_case):
        check_result_round_trip_and_store(nemo_spec, nemo_case)

    def test_the_key_changes_with_every_setting(self, nemo_spec, nemo_case):
        check_key_changes_with_every_field(nemo_spec, nemo_case)

    def test_cancel_stops_within_one_unit(self, nemo_spec, nemo_case):
        if not self.cancellable:
            pytest.skip("declared not cancellable (too small to report progress)")
        check_cancel_stops_within_one_unit(nemo_spec, nemo_case)

    def test_appears_in_every_surface(self, nemo_spec, nemo_home):
        check_surfaces(nemo_spec.name)


__all__ = ["AnalysisCase", "AnalysisContract", "check_cancel_stops_within_one_unit", "check_config_fields",
           "check_config_round_trip", "check_entry", "check_key_changes_with_every_field",
           "check_result_round_trip_and_store", "check_surfaces", "nemo_home", "nemo_store", "run_case", "surfaces"]

"""The registry of analyses: one shape for every per-sample method, dataset, model and fit analysis.

    spec = get_analysis("scitx")                       # an AnalysisSpec: kind, version, config, inputs, ...
    analysis = build_analysis(spec, Components(classifier=clf, mllm=mllm, editor=ed, store=store),
                              {"k": 3})                # checks the declared inputs, rejects unknown options
    result = analysis(image, "tabby cat", ctx)

An analysis is ONE entry (`SPEC = AnalysisSpec(...)`, or the `@method_entry` decorator for per-sample methods) in
its own module, named by an entry point of the group `nemo_desktop.analyses`, built-in or a plugin's (registry.py).
The CLI (`nemo run NAME` and its options), the GUI settings form, the MCP tools, the Python API, the report section
and the contract tests (`nemo_desktop.testing`) all derive from the spec.
"""
from .build import build_analysis, make_config
from .components import Components
from .params import ParamInfo, config_params
from .registry import get_analysis, list_analyses, register_analysis
from .results import AnalysisResult
from .spec import AnalysisSpec, Inputs

__all__ = ["AnalysisResult", "AnalysisSpec", "Components", "Inputs", "ParamInfo", "build_analysis",
           "config_params", "get_analysis", "list_analyses", "make_config", "register_analysis"]

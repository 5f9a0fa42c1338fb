"""The registry of analyses: one shape for every per-sample method, dataset, model and fit analysis.

    spec = get_analysis("scitx")                       # an AnalysisSpec: kind, version, config, inputs, ...
    analysis = build_analysis(spec, Components(classifier=clf, mllm=mllm, editor=ed, store=store),
                              {"k": 3})                # checks the declared inputs, rejects unknown options
    result = analysis(image, "tabby cat", ctx)

An analysis registers with ONE line (`register_analysis(AnalysisSpec(...))`, or the `@register_method` decorator
for per-sample methods) in its own module, and that module is named in `registry.BUILTIN_MODULES`. The CLI
options, the GUI settings form, the report section and the contract test all derive from the spec.
"""
from .build import build_analysis, make_config
from .components import Components
from .params import ParamInfo, config_params
from .registry import get_analysis, list_analyses, register_analysis
from .results import AnalysisResult
from .spec import AnalysisSpec, Inputs

__all__ = ["AnalysisResult", "AnalysisSpec", "Components", "Inputs", "ParamInfo", "build_analysis",
           "config_params", "get_analysis", "list_analyses", "make_config", "register_analysis"]

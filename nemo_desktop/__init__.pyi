# Type stub of the package: the names `nemo_desktop.__getattr__` imports lazily from `nemo_desktop.api`.
from .api import (ConfigError as ConfigError, Explanation as Explanation, InputImageError as InputImageError, JobCancelled as JobCancelled,
                  NemoError as NemoError, Predictions as Predictions, Progress as Progress, Result as Result,
                  analyses as analyses, clear_models as clear_models, explain as explain,
                  export_report as export_report, get_result as get_result, index_dataset as index_dataset,
                  list_families as list_families, list_indexes as list_indexes,
                  list_models as list_models, list_plugins as list_plugins, load_model as load_model,
                  methods as methods, predict as predict, run_analysis as run_analysis)

__version__: str
__all__: list[str]

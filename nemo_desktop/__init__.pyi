# Type stub of the package: the names `nemo_desktop.__getattr__` imports lazily from `nemo_desktop.api`. A stub's
# star import re-exports exactly the names of `nemo_desktop.api.__all__`, the one list of the API's public names.
from .api import *  # noqa: F403

__version__: str
__all__: list[str]

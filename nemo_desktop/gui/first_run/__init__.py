"""First run: the guides in the empty panes, 'Try the demo', recent datasets and the last models restored at start."""
from .controller import FirstRun

__all__ = ["FirstRun"]

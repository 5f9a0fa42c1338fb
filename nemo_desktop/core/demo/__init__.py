"""The first-run demo (a digits dataset and a small classifier trained on first use); Qt-free, used by the
GUI's 'Try the demo' and by `nemo demo`."""
from .digits import CLASSIFIER_ID, DemoSetup, prepare_demo

__all__ = ["CLASSIFIER_ID", "DemoSetup", "prepare_demo"]

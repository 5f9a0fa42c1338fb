"""Dataset-, model- and fit-level analyses (Qt-free)."""

"""Qt-free core of NEMO Desktop: usable from the CLI, from tests and from Python without a display.

Nothing under this package may import a Qt binding; tests/test_qt_boundary.py enforces it.
"""

"""Qt-free core of NEMO Desktop: usable from the CLI, from tests and from Python without a display.

Its packages are layers, bottom to top (each imports only from those below; pyproject.toml's import-linter
contracts, run by tests/test_qt_boundary.py, enforce it): `base` (errors, the job contract, result records,
images, extras, secrets), `store`, `models`, `data` and `metrics`, `registry` (the analyses by name),
`methods` (the per-sample explainers), `analyses` (dataset, model and fit analyses), then `reports`, `export`,
`benchmark` and `demo`, and `app` on top (the model session behind the window and the model worker process).
Nothing under this package may import a Qt binding.
"""

"""The Qt desktop application: the only package of NEMO Desktop that imports PySide6.

`app.main` is the `nemo-desktop` entry point; `main_window.MainWindow` hosts the panes
(`panes/<name>/plugin.py`); `jobs.JobRunner` runs the core's job functions on worker threads.
Importing this package stays light: no torch, transformers, diffusers, timm or open_clip.
"""

"""Reusable widgets shared by the panes (error dialog, job status area)."""

"""Tiny offline model builders shared by tests (each helper owns its own builder file)."""

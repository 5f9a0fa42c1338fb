"""NEMO Desktop: explain and test why a vision classifier got an image wrong."""

__version__ = "0.1.0"

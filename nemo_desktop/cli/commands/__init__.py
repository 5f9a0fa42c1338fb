"""CLI sub-commands: every module here exposes `register(subparsers)`; main.py discovers them."""

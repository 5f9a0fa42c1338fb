#!/usr/bin/env bash
# Start NEMO Desktop, installing what it needs into .venv on the first run.
source "$(dirname "$0")/_env.sh"
exec .venv/bin/nemo-desktop "$@"

#!/usr/bin/env bash
# Run the test suite (offline, no GPU needed), installing what it needs into .venv on the first run.
source "$(dirname "$0")/_env.sh"
export QT_QPA_PLATFORM=${QT_QPA_PLATFORM:-offscreen}
exec .venv/bin/python -m pytest "$@"

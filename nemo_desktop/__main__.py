"""`python -m nemo_desktop` starts the desktop application (same as `nemo-desktop`); the command line is
`python -m nemo_desktop.cli` (same as `nemo`)."""
import sys

from .gui.app import main

sys.exit(main())

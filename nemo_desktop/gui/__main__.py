"""`python -m nemo_desktop.gui` starts the application (same as `nemo-desktop`)."""
import sys

from .app import main

sys.exit(main())

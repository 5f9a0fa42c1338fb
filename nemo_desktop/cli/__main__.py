"""`python -m nemo_desktop.cli` runs the command line (same as `nemo`)."""
import sys

from .main import main

sys.exit(main())

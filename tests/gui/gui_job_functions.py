"""Job functions used by the GUI tests (test doubles: they live here, never in the package)."""
from __future__ import annotations

import threading
import time

from nemo_desktop.core.base.errors import ModelError


def count_to_three(ctx):
    seen = []
    for i in ctx.track(range(3), stage="Counting"):
        seen.append(threading.get_ident())
        ctx.partial(i)
    return {"answer": 42, "threads": seen}


def loop_until_cancelled(ctx, steps: int = 2000, pause: float = 0.01):
    done = 0
    for _ in ctx.track(range(steps), stage="Looping"):
        time.sleep(pause)
        done += 1
    return done


def fail_to_load(ctx):
    ctx.progress("Loading the classifier", 0, 1)
    raise ModelError("The classifier could not be loaded.", hint="Check that the checkpoint file is complete.",
                     detail="weights.safetensors: header too short (12 bytes)")

"""Model jobs of the benchmarks, as `JobSpec` targets: they run where the app's settings say (the app's process
or the model worker process, which imports this module by name: the benchmarks folder is on its sys.path)."""
from __future__ import annotations


def edit_once(session, image_path: str, instruction: str, steps: int, ctx) -> tuple[int, int]:
    """One edit with the session's editor, with progress per step; the edited image's size."""
    from PIL import Image

    editor = session.ensure("editor", ctx)
    out = editor.edit(Image.open(image_path).convert("RGB"), instruction, steps=steps,
                      on_step=lambda i, n: ctx.progress("Editing", i, n) or not ctx.cancelled)
    return out.size

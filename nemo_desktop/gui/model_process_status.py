"""The status bar's words for the model worker's state (`WorkerSupervisor.state()`), Qt-free to test."""
from __future__ import annotations

from nemo_desktop.core.app.session import KIND_TEXT


def describe_state(state: dict) -> tuple[str, str, bool]:
    """(label text, tooltip, dead): empty text when there is nothing to say (running, all models back)."""
    status = state.get("status")
    if status == "dead":
        cause = state.get("cause") or "it kept stopping at start"
        return ("Model process stopped (it kept failing to start)",
                f"{cause}\n\n{state.get('hint') or ''}".strip(), True)
    wanted = state.get("wanted") or {}
    if status == "restoring" and wanted:
        names = ", ".join(f"{KIND_TEXT.get(k, k)} {ref}" for k, ref in wanted.items())
        return (f"Model process restarted: loading {names} again…",
                f"The last model process ended: {state.get('cause') or 'unknown cause'}", False)
    failed = [u for u in state.get("unrestored") or [] if u[0] in wanted and wanted[u[0]] == u[1]]
    if failed:
        names = ", ".join(f"{KIND_TEXT.get(k, k)} {ref}" for k, ref, _ in failed)
        return (f"Not loaded again after a restart: {names}",
                "\n".join(f"{KIND_TEXT.get(k, k)} {ref}: {why}" for k, ref, why in failed)
                + "\n\nLoad it again in the Model manager, or choose another model there.", False)
    return "", "", False

"""`nemo desktop-entry [--install] [--json]`: the Linux menu entry of this installation, with its icon.

The entry and the icon ship inside the package (`nemo_desktop/resources/desktop/` and `icons/`, from the checkout's
`packaging/desktop/` and `packaging/icons/`), so an installed copy
(pipx, uv tool, a wheel) can put itself in the desktop menu without a checkout. `Exec=` names this installation's
own `nemo-desktop` launcher by its full path: a menu started by the desktop session does not see a PATH that a
shell profile extends (pipx's ~/.local/bin often is not on it).

    nemo desktop-entry              # print the entry (for packagers)
    nemo desktop-entry --install    # write it and the icon under $XDG_DATA_HOME (~/.local/share)
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import sysconfig
from pathlib import Path

APP = "nemo-desktop"
ICONS = (("256x256", "png"), ("scalable", "svg"))  # hicolor theme sizes of the shipped icon files


def launcher() -> str:
    """The full path of this installation's GUI launcher, else the bare name (found on PATH at start-up)."""
    script = Path(sysconfig.get_path("scripts")) / APP
    if script.is_file():
        return str(script)
    return shutil.which(APP) or APP


def entry_text(exec_path: str) -> str:
    """The shipped entry with Exec/TryExec naming `exec_path` (quoted in Exec where the spec requires)."""
    from ...core.base.resources import resource_path

    exec_arg = f'"{exec_path}"' if any(c in exec_path for c in ' \t"\'\\><~|&;$*?#()`') else exec_path
    lines = []
    for line in resource_path("desktop", f"{APP}.desktop").read_text(encoding="utf-8").splitlines():
        if line.startswith("Exec="):
            line = f"Exec={exec_arg}"
        elif line.startswith("TryExec="):
            line = f"TryExec={exec_path}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def data_home() -> Path:
    xdg = os.environ.get("XDG_DATA_HOME")
    return Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".local" / "share"


def install(exec_path: str) -> dict:
    """Write the entry and the icons under the user's data folder; returns what was written."""
    from ...core.base.errors import StoreError
    from ...core.base.resources import resource_path
    from ...core.store import atomic_write_text

    root = data_home()
    entry = root / "applications" / f"{APP}.desktop"
    icons = [root / "icons" / "hicolor" / size / "apps" / f"{APP}.{ext}" for size, ext in ICONS]
    try:
        for (_, ext), target in zip(ICONS, icons):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(resource_path("icons", f"{APP}.{ext}"), target)
        entry.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(entry, entry_text(exec_path))
    except OSError as exc:
        raise StoreError(f"Cannot write the desktop entry under {root}: {exc.strerror or exc}.",
                         hint="Check the folder's permissions, or set XDG_DATA_HOME to a folder you can write.") \
            from exc
    return {"entry": str(entry), "icons": [str(p) for p in icons], "exec": exec_path}


def run(args) -> int:
    exec_path = launcher()
    if args.install:
        written = install(exec_path)
        if args.json:
            print(json.dumps(written, indent=2))
        else:
            print(f"wrote {written['entry']} (Exec={exec_path}) and the icon to {', '.join(written['icons'])}")
            if not Path(exec_path).is_absolute():
                print(f"note: no {APP} launcher found next to this Python; the menu finds it only if it is on the "
                      "desktop session's PATH", file=sys.stderr)
        return 0
    text = entry_text(exec_path)
    if args.json:
        print(json.dumps({"entry_text": text, "exec": exec_path}, indent=2))
    else:
        sys.stdout.write(text)
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("desktop-entry", help="print or install the Linux menu entry and icon",
                              description=__doc__.split("\n\n")[0] + " " + __doc__.split("\n\n")[1])
    p.add_argument("--install", action="store_true",
                   help="write the entry and the icon under $XDG_DATA_HOME (default ~/.local/share)")
    p.add_argument("--json", action="store_true", help="print what was (or would be) written as JSON")
    p.set_defaults(func=run)

"""`nemo-desktop`: start the application.

Start-up stays light: nothing here (or in the window and panes) imports torch, transformers, diffusers,
timm or open_clip; models load later, in jobs. `benchmarks/startup.py` measures it and the GUI tests
check it. `--home` / `--portable` set NEMO_HOME / NEMO_PORTABLE before anything resolves a path.
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path

log = logging.getLogger("nemo_desktop.gui")

# Close the window at most this long after the event loop ended while worker threads finish.
SHUTDOWN_WAIT_MS = 5000
# Python hands the GIL to a waiting thread after this long (default 5 ms). Jobs run Python on worker threads,
# and the GUI thread waits up to this long each time Qt calls into Python (a slot, a delegate's paint, a
# model's rowCount: ~130 calls to repaint a screen of thumbnails). Measured with a busy worker, repainting
# the grid took 19 ms (median; 69 ms worst) at 1 ms and 6 ms (20 ms) at 0.2 ms; the worker lost no
# measurable throughput (benchmarks/gui_event_loop.py has the whole-window figures).
GIL_SWITCH_INTERVAL_S = 0.0002


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    from nemo_desktop import __version__

    parser = argparse.ArgumentParser(
        prog="nemo-desktop", description="NEMO Desktop: explain why a vision classifier got an image wrong.",
        epilog="Other options (for example -platform offscreen) are passed on to Qt.")
    parser.add_argument("--home", metavar="DIR",
                        help="keep settings, results, thumbnails and logs under DIR (sets NEMO_HOME)")
    parser.add_argument("--portable", action="store_true",
                        help="keep everything, weights included, in the checkout's models_cache/ folder "
                             "(sets NEMO_PORTABLE=1; --home takes precedence)")
    parser.add_argument("--portable-dir", metavar="DIR",
                        help="portable mode in DIR (an installed copy has no checkout; sets NEMO_PORTABLE=DIR)")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                        help="level of the log file (default INFO)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser.parse_known_args(argv)


def apply_path_options(args: argparse.Namespace) -> None:
    """Must run before the first get_paths() call: everything below reads the environment."""
    if args.home:
        os.environ["NEMO_HOME"] = str(Path(args.home).expanduser().resolve())
    if args.portable_dir:
        os.environ["NEMO_PORTABLE"] = str(Path(args.portable_dir).expanduser().resolve())
    elif args.portable:
        os.environ["NEMO_PORTABLE"] = "1"


def create_application(qt_args: list[str]):
    from PySide6.QtWidgets import QApplication

    from nemo_desktop import __version__

    app = QApplication.instance() or QApplication([sys.argv[0] if sys.argv else "nemo-desktop", *qt_args])
    app.setApplicationName("NEMO Desktop")
    app.setApplicationDisplayName("NEMO Desktop")
    app.setOrganizationName("NEMO")
    app.setApplicationVersion(__version__)
    app.setDesktopFileName("nemo-desktop")  # packaging/desktop/nemo-desktop.desktop; its Icon= names the same icon
    app.setWindowIcon(application_icon())  # every window, the main one included, inherits it
    use_one_palette_when_inactive(app)
    return app


def use_one_palette_when_inactive(app) -> None:
    """Draw inactive windows with the active colours.

    Qt repaints a whole window when it is activated or deactivated unless `QPalette.isEqual(Active,
    Inactive)`, and opening any dialog deactivates the main window. That repaint asks the browser's tables
    and thumbnail grid for every visible cell, each answer a call into Python that waits for the GIL while
    a job runs. (The check said "different" even where the colours matched; its effect on the benchmark was
    not measured apart from the other changes.) The only visible cost: a selection keeps its colour while
    another window has the focus.
    """
    from PySide6.QtGui import QPalette

    palette = app.palette()
    roles = [QPalette.ColorRole(v) for v in range(QPalette.ColorRole.NColorRoles.value)]  # not the alias itself
    for role in roles:
        if role != QPalette.ColorRole.NoRole:
            palette.setBrush(QPalette.ColorGroup.Inactive, role, palette.brush(QPalette.ColorGroup.Active, role))
    app.setPalette(palette)


def application_icon():
    """The application icon shipped as package data (PNG: needs no SVG image plugin)."""
    from PySide6.QtGui import QIcon

    from nemo_desktop.core.base.resources import resource_path

    return QIcon(str(resource_path("icons", "nemo-desktop.png")))


def _install_qt_message_handler() -> None:
    """Qt's own warnings go to our log file instead of vanishing on a GUI launch without a terminal."""
    from PySide6.QtCore import QtMsgType, qInstallMessageHandler

    qt_log = logging.getLogger("qt")
    levels = {QtMsgType.QtDebugMsg: logging.DEBUG, QtMsgType.QtInfoMsg: logging.INFO,
              QtMsgType.QtWarningMsg: logging.WARNING, QtMsgType.QtCriticalMsg: logging.ERROR,
              QtMsgType.QtFatalMsg: logging.CRITICAL}

    def handler(mode, _context, message):
        qt_log.log(levels.get(mode, logging.WARNING), "%s", message)

    qInstallMessageHandler(handler)


def _install_excepthook(window) -> None:
    """An exception escaping a slot is logged and shown in the error dialog: never a silent failure."""
    previous = sys.excepthook

    def hook(exc_type, exc, tb):
        if issubclass(exc_type, KeyboardInterrupt):
            previous(exc_type, exc, tb)
            return
        log.error("unhandled exception in the GUI", exc_info=(exc_type, exc, tb))
        try:
            from .widgets.error_dialog import show_error

            show_error(exc.with_traceback(tb), window)
        except Exception:  # noqa: BLE001 - the hook itself must never raise
            previous(exc_type, exc, tb)

    sys.excepthook = hook


def _close_on_sigint(window) -> None:
    """Ctrl+C in the terminal closes the window politely (asking first if jobs run)."""
    from PySide6.QtCore import QTimer

    signal.signal(signal.SIGINT, lambda *_: window.close())
    # Python only runs signal handlers between bytecodes; a slow idle timer lets it in while Qt waits.
    timer = QTimer(window, interval=250)
    timer.timeout.connect(lambda: None)
    timer.start()


def build(argv: list[str] | None = None):
    """Parse options, create the QApplication, resolve paths, start logging, build the window (not shown)."""
    args, qt_args = parse_args(argv)  # --help and --version answer without Qt
    require_qt()
    apply_path_options(args)
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    app = create_application(qt_args)
    from .binding_check import check_qt_binding

    check_qt_binding()  # ConfigError: shown by main() like any start-up failure

    from nemo_desktop.core.app.logging_setup import setup_logging
    from nemo_desktop.core.store.paths import get_paths, use_portable_caches

    paths = get_paths().ensure()  # StoreError with a clear message when the root is unusable
    use_portable_caches(paths)  # portable mode: the torch hub cache in the portable folder too
    log_file = setup_logging(paths, args.log_level)
    _install_qt_message_handler()
    from nemo_desktop import __version__

    log.info("NEMO Desktop %s starting (Python %s, log %s, portable=%s)", __version__,
             sys.version.split()[0], log_file, paths.portable)

    from .main_window import MainWindow

    return app, MainWindow(paths, welcome=None)  # a first launch opens on the welcome page


def _show_startup_error(exc: BaseException) -> None:
    from .widgets.error_dialog import ErrorDialog, error_dict

    err = error_dict(exc)
    print(f"nemo-desktop: {err.get('message')}", file=sys.stderr)
    if err.get("hint"):
        print(err["hint"], file=sys.stderr)
    ErrorDialog(err, None, "NEMO Desktop cannot start").exec()


GUI_EXTRA_MISSING = ("nemo-desktop: the desktop app needs the GUI extra (PySide6), which is not installed: "
                     "pip install 'nemo-desktop[gui]' (the command line, `nemo`, works without it).")


class QtMissing(Exception):
    """PySide6 cannot be imported: the package was installed without its `gui` extra."""


def require_qt() -> None:
    """QtMissing when PySide6 itself is absent (a broken PySide6 raises its own error, with its own words)."""
    try:
        import PySide6  # noqa: F401
    except ModuleNotFoundError as exc:
        if (exc.name or "PySide6").split(".")[0] != "PySide6":
            raise
        raise QtMissing(GUI_EXTRA_MISSING) from None


def main(argv: list[str] | None = None) -> int:
    from nemo_desktop.core.base.errors import NemoError

    try:
        app, window = build(argv)
    except QtMissing as exc:  # one line and exit 2 (a usage error: install the extra), not a traceback
        print(exc, file=sys.stderr)
        return 2
    except NemoError as exc:
        _show_startup_error(exc)
        return 2
    _install_excepthook(window)
    _close_on_sigint(window)
    window.show()
    code = app.exec()
    if not window.jobs.shutdown(SHUTDOWN_WAIT_MS):
        # A job stuck in native code (a CUDA kernel, a blocking read) cannot be interrupted; Qt would wait
        # for its thread forever at exit, so leave without waiting once the log is flushed.
        log.warning("jobs still running %d ms after the window closed: exiting without waiting",
                    SHUTDOWN_WAIT_MS)
        logging.shutdown()
        os._exit(code)
    log.info("NEMO Desktop closed (exit code %d)", code)
    return code


if __name__ == "__main__":
    sys.exit(main())

""""Open in FiftyOne" on the dataset browser (the open, indexed dataset) and on its failure-mode bar (that mode's saved
view): the findings are exported to a FiftyOne dataset in a background job (core/export/fiftyone_export.py, updated
in place on every opening) and FiftyOne's app is started there; the window opens its address in the browser. Greyed
out with the reason when the `fiftyone` extra is missing or the dataset is not indexed yet."""
from __future__ import annotations

from PySide6.QtCore import QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QPushButton

from nemo_desktop.core.base.job_context import JobContext

from ...jobs import IO, JobHandle

NEEDS_EXTRA = ("Needs the 'fiftyone' extra: pip install 'nemo-desktop[fiftyone]', then restart NEMO Desktop.")
WHAT = ("Export this dataset's findings to FiftyOne (labels, every per-image fact as a field, failure modes as tags "
        "and saved views, the embeddings as a visualization) and open FiftyOne's app")


def unavailable_reason() -> str | None:
    from nemo_desktop.core.base.extras import available

    return None if available("fiftyone") else NEEDS_EXTRA


def open_job(store, index_id: str, dataset_root: str | None, mode, ctx: JobContext) -> dict:
    from nemo_desktop.core.export.facts import mode_id
    from nemo_desktop.core.export.fiftyone_export import open_in_app

    mid = mode_id(mode.result_key, mode.group_name, mode.number) if mode is not None else None
    return open_in_app(store, index_id, dataset_root, mode_id=mid,
                       failure_modes_key=getattr(mode, "result_key", None), ctx=ctx)


def fiftyone_button(pane, name: str = "openInFiftyOneButton") -> QPushButton:
    button = QPushButton("Open in FiftyOne")
    button.setObjectName(name)
    button.setEnabled(False)
    button.setToolTip(unavailable_reason() or WHAT)
    return button


def update_button(button: QPushButton, indexed: bool) -> None:
    why = unavailable_reason()
    button.setEnabled(why is None and indexed)
    button.setToolTip(why or (WHAT if indexed else "Index the dataset first: FiftyOne gets the classifier's "
                                                   "predictions and embeddings from its reference index."))


def open_in_fiftyone(pane, mode=None) -> JobHandle | None:
    """Export and open (the failure mode's view when `mode` is a ModeRef)."""
    data = pane.data
    if unavailable_reason() or data is None or not data.index_id:
        return None
    session, index_id, root = pane.host.session, data.index_id, data.root
    handle = pane.host.jobs.submit(lambda ctx: open_job(session.store(), index_id, root, mode, ctx),
                                   title="Opening in FiftyOne", lane=IO)

    def done(out: dict) -> None:
        pane.fiftyone_session = out.pop("session", None)  # the app lives as long as its session object
        if out.get("url"):
            QDesktopServices.openUrl(QUrl(out["url"]))
        pane.host.show_status(f"FiftyOne dataset '{out['dataset']}': {out['samples']:,} samples"
                              + (f", view '{out['view']}'" if out.get("view") else "")
                              + (f" at {out['url']}" if out.get("url") else ""))

    handle.sig_done.connect(done)
    handle.sig_failed.connect(lambda e: pane.host.show_message("Open in FiftyOne", e.get("message") or str(e)))
    return handle

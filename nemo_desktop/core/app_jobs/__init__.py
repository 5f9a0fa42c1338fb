"""The GUI's model jobs that are not the diagnosis (Qt-free): the analyses page (`analyses`), failure-mode
actions (`failure_modes`), the dataset browser's competency column (`competency_column`). They live in the
core so that the model worker process (core/worker) can import and run them; the GUI's modules re-export."""

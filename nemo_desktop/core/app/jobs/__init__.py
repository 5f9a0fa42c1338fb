"""The app's model jobs (Qt-free), run in the app's process or in the model worker process (core/app/worker),
which never imports the GUI: `models` (load, unload, predict, explain and diagnose samples: the workbench and the
model manager), `analyses` (the Analyses page), `failure_modes` (its failure-mode actions), `competency_column`
(the dataset browser's column) and `demo_extras`. The GUI names them in a JobSpec ("module:function")."""

"""The application layer (Qt-free): the model session behind the window, the jobs it runs in-process or in
the model worker process (`worker`), and what the dataset browser shows. Only the GUI, the CLI, the MCP
server and the Python API import it."""

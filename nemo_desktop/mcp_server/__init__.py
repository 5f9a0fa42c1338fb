"""`nemo mcp`: NEMO Desktop's engine as Model Context Protocol tools for agents (the official `mcp` SDK, the
`[mcp]` extra). The tools and their JSON schemas are derived from the model catalog and the analysis registry
(core/registry), plugins' included; they run through `nemo_desktop.api`, the same functions notebooks use."""

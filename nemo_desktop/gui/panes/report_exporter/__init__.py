"""Report exporter pane: pick stored results and export them as HTML or PDF."""

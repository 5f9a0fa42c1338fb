"""The workbench's Past results table filled with a store's full listing (500 results): the longest event-loop
turn of the chunked fill (`PastResultsTable`) against filling every row in one turn with columns sized to their
contents (the table before), measured in the same run.

    .venv/bin/python benchmarks/gui_past_results.py [--rows 500]
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=500, help="stored results listed (the listing's limit is 500)")
    args = parser.parse_args(argv)
    from PySide6.QtWidgets import QApplication, QHeaderView

    from nemo_desktop.gui.panes.workbench.run_job import StoredSummary
    from nemo_desktop.gui.panes.workbench.widgets.past_results import ROWS_PER_TURN, PastResultsTable

    app = QApplication.instance() or QApplication([])
    models = {"classifier": "timm/resnet50", "mllm": "Qwen/Qwen2.5-VL-7B-Instruct",
              "editor": "timbrooks/instruct-pix2pix"}
    rows = [StoredSummary(f"key{i}", time.time(), "scitx", f"image_{i:05d}.png", "", "golden retriever",
                          "labrador retriever", 12.5, "The model relies on the snowy background.", models)
            for i in range(args.rows)]

    def shown_table() -> PastResultsTable:
        table = PastResultsTable()
        table.resize(900, 400)
        table.show()
        for _ in range(5):
            app.processEvents()
        return table

    table = shown_table()
    start = time.perf_counter()
    table.show_rows(rows)
    longest, turns = time.perf_counter() - start, 1
    while not table.filled:
        t = time.perf_counter()
        app.processEvents()
        longest, turns = max(longest, time.perf_counter() - t), turns + 1
        time.sleep(0.001)
    chunked_total = time.perf_counter() - start

    before = shown_table()  # every row in one turn, columns sized to their contents
    before.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    start = time.perf_counter()
    before.setRowCount(len(rows))
    for i, r in enumerate(rows):
        before._set_row(i, r)
    app.processEvents()
    one_turn = time.perf_counter() - start
    print(f"{args.rows} results, {ROWS_PER_TURN} rows a turn: longest turn {1000 * longest:.1f} ms over {turns} turns "
          f"({1000 * chunked_total:.0f} ms in all); in one turn, sized to contents: {1000 * one_turn:.1f} ms "
          f"= {one_turn / longest:.1f} x the chunked fill's longest turn")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`nemo demo [--json]`: prepares the demo and prints where it is, following the CLI's output conventions."""
from __future__ import annotations

import json

from nemo_desktop.cli.main import main
from nemo_desktop.core.store.paths import get_paths

from demo_cache import install_built_demo


def test_demo_json_prints_paths_and_registers_the_classifier(capsys):
    from nemo_desktop.core.models.catalog import get_entry

    install_built_demo(get_paths())
    assert main(["demo", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["classifier_id"] == "demo-digits-classifier"
    assert out["reused_dataset"] and out["reused_classifier"]
    assert out["images"] == 360 and len(out["classes"]) == 10
    assert out["dataset_dir"].startswith(str(get_paths().store_dir.parent))
    assert any("multimodal LLM" in n for n in out["notes"])
    assert get_entry("demo-digits-classifier").repo == out["classifier_dir"]


def test_demo_summary_names_the_next_step(capsys):
    install_built_demo(get_paths())
    assert main(["demo"]) == 0
    text = capsys.readouterr().out
    assert "dataset:" in text and "classifier: demo-digits-classifier" in text
    assert "nemo index" in text and "held-out" in text

"""The report model built from hand-made ExplanationResults in a real ResultsStore."""
from __future__ import annotations

import io
import math

import pytest
from PIL import Image

from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.reports import build_report, build_run_report, build_single_report, resolve_target
from nemo_desktop.core.reports.model import Figures, Histogram, Index, KeyValues, Paragraph, Table, llm_match_of
from nemo_desktop.core.reports.runs import cei_histogram as _histogram

from report_fixtures import SCRIPT, make_result, make_run, store_result


def _sections(doc):
    return {s.title: s for _, s in doc.iter_sections()}


def test_single_report_has_every_part_of_the_diagnosis(store):
    r, arts = make_result(1, "scitx")
    key = store_result(store, r, arts, llm_match={"score": 0.5, "judges": {"a": 0.5}})
    doc = build_single_report(key, store)
    secs = _sections(doc)
    assert doc.kind == "single" and "tabby cat" in doc.title and "tiger" in doc.title
    # input + Grad-CAM, original + counterfactual per candidate, one thumbnail per observation
    images = list(doc.iter_images())
    assert len(images) == 2 + 2 * len(r.candidates) + len(r.observations)
    for im in images:
        assert Image.open(io.BytesIO(im.data)).size == (im.width, im.height) and im.mime == "image/png"
    assert any(im.caption == "Grad-CAM overlay" for im in images)
    kv = dict(next(b for b in secs["Image and prediction"].blocks if isinstance(b, KeyValues)).rows)
    assert kv["True label"] == "tabby cat (class 3), P = 11.0 %"
    assert kv["Predicted label"] == "tiger (class 7), P = 70.0 %"
    expl = secs["Explanation"].blocks
    assert expl[0] == Paragraph(r.explanation, "callout")
    ekv = dict(next(b for b in expl if isinstance(b, KeyValues)).rows)
    assert expl[1].text.startswith("CEI (counterfactual explanation impact) = 100")
    assert ekv["CEI of the explanation"] == f"{r.cei:+.2f} pp" and ekv["LLM Match"] == "0.50"
    assert ekv["Selected candidate"] == f"{r.selected_index + 1} of 3"
    selected = [t for t in secs if t.startswith(f"Candidate {r.selected_index + 1} (selected)")]
    assert len(selected) == 1
    cand = secs[selected[0]]
    ckv = dict(cand.blocks[0].rows)
    assert ckv["Image edit instruction"] == r.candidates[r.selected_index].intervention
    assert ckv["P(true) before"] == "11.0 %"
    figs = next(b for b in cand.blocks if isinstance(b, Figures))
    assert [im.caption.split(",")[0] for im in figs.images] == ["Original", "Counterfactual"]
    for set_name in "ABC":
        assert any(t.startswith(f"Set {set_name}:") for t in secs)
    obs_a = next(s for t, s in secs.items() if t.startswith("Set A:"))
    assert [row[3] for row in obs_a.blocks[0].rows] == ["A photo of thing 0.", "A photo of thing 1."]
    man = dict(secs["Reproducibility manifest"].blocks[0].rows)
    assert man["models.mllm.revision"] == "abc123" and man["prompt_versions.hypothesis"] == "scitx-hypothesis/1"
    assert man["seed"] == "1235" and man["date"].startswith("2026-11-21") and man["Result key"] == key
    timings = secs["Reproducibility manifest"].blocks[1]
    assert timings.rows[-1] == ["Total", "4.750"]


def test_no_positive_cei_distances_flags_order_and_total_once(store):
    r, arts = make_result(4, "scitx")
    for j, c in enumerate(r.candidates):
        c.cei = [-20.0, -5.0, 30.0][j]
        c.edit_distance, c.edit_distance_metric = [0.1, 0.2, 0.95][j], "1-ssim"
    r.candidates[2].edit_flagged = True
    r.selected_index, r.cei, r.explanation = 1, -5.0, r.candidates[1].hypothesis
    r.timings = {"classify": 1.0, "edit": 2.0, "total": 3.5}
    key = store_result(store, r, arts)
    doc = build_single_report(key, store)
    secs = _sections(doc)
    first = secs["Explanation"].blocks[0]
    assert first.style != "callout"  # not presented as a finding
    assert first.text.startswith("No hypothesis whose edit kept the image raised P(true) (best CEI -5.0)")
    cand_titles = [t for t in secs if t.startswith("Candidate ")]
    assert [t.split(":")[0] for t in cand_titles] == ["Candidate 2 (selected)", "Candidate 3 (flagged)",
                                                      "Candidate 1"]
    flagged = secs[cand_titles[1]]
    assert dict(flagged.blocks[0].rows)["Distance from the original"] == \
        "1-ssim 0.95, whole image changed (flagged)"
    assert any(isinstance(b, Paragraph) and b.style == "warning" and "whole image" in b.text for b in flagged.blocks)
    timings = secs["Reproducibility manifest"].blocks[1]
    assert timings.rows[-1] == ["Total (wall clock)", "3.500"] and len(timings.rows) == 3


def test_report_sha256_is_the_files_and_the_pixel_hash_says_what_it_is(store, tmp_path):
    import hashlib

    from nemo_desktop.core.methods.intervention import load_input

    r, arts = make_result(5, "scitx")
    path = tmp_path / "query.png"
    Image.new("RGB", (8, 8), (10, 20, 30)).save(path)
    _, _, file_sha = load_input(path)  # what the pipelines record in the manifest
    r.manifest["input_file_sha256"] = file_sha
    key = store_result(store, r, arts)
    rows = dict(next(b for b in _sections(build_single_report(key, store))["Image and prediction"].blocks
                     if isinstance(b, KeyValues)).rows)
    assert rows["File SHA-256"] == hashlib.sha256(path.read_bytes()).hexdigest()  # = sha256sum of the file
    assert rows["Pixel hash (SHA-256 of mode, size and pixels)"] == r.sample.image_sha256
    assert "SHA-256" not in rows


def test_prompt_intervention_and_failed_candidate_are_reported(store):
    r, arts = make_result(2, "scitx")
    r.candidates[0].intervention_kind, r.candidates[0].edited_artifact = "prompt", None
    r.candidates[0].intervention = "a sketch of a tabby cat"
    r.candidates[1].error = "The editor ran out of memory."
    key = store_result(store, r, arts)
    secs = _sections(build_single_report(key, store))
    c1 = next(s for t, s in secs.items() if t.startswith("Candidate 1"))
    assert dict(c1.blocks[0].rows)["Rewritten zero-shot prompt"] == "a sketch of a tabby cat"
    assert not any(isinstance(b, Figures) for b in c1.blocks)
    c2 = next(s for t, s in secs.items() if t.startswith("Candidate 2"))
    assert Paragraph("This candidate failed: The editor ran out of memory.", "warning") in c2.blocks


def test_missing_or_corrupt_artifacts_become_visible_warnings(store):
    r, arts = make_result(3, "scitx")
    r.candidates[0].edited_artifact = "not-stored"
    key = store_result(store, r, arts)
    stored = store.get(key)
    stored.artifacts["gradcam"].write_bytes(b"\x89PNG\r\n\x1a\n truncated")  # corrupt the file on disk
    doc = build_single_report(key, store)
    warnings = [b.text for _, s in doc.iter_sections() for b in s.blocks
                if isinstance(b, Paragraph) and b.style == "warning"]
    assert any(w.startswith("Grad-CAM overlay: image not available") for w in warnings)
    assert any(w.startswith("Counterfactual image: image not available") for w in warnings)


def test_result_object_without_store_entry_still_reports_its_text(store):
    r, _ = make_result(4, "scitx")
    doc = build_single_report(r, store)
    assert list(doc.iter_images()) == []
    assert any("Input image: image not available" in t for t in doc.iter_text())


def test_run_report_summary_chart_global_index_and_failures(store):
    run_id = make_run(store, n_samples=5, methods=("scitx", "cam-mllm"))
    doc = build_run_report(run_id, store)
    secs = _sections(doc)
    summary = next(b for b in secs["Summary"].blocks if isinstance(b, Table))
    assert summary.header[:3] == ["Dataset", "Classifier", "Method"]
    rows = {row[2]: row for row in summary.rows}
    assert set(rows) == {"scitx", "cam-mllm"}
    ceis = {"scitx": [], "cam-mllm": []}
    for it in store.run_items(run_id):
        if it["result_key"]:
            p = store.get(it["result_key"]).payload
            ceis[p["method"]].append(p["cei"])
    for m, vs in ceis.items():
        assert rows[m][:4] == ["imagenet-r", "vit_b16", m, "5"]
        assert rows[m][4] == f"{sum(vs) / len(vs):+.2f} pp"
    assert rows["scitx"][7:] == ["0.600", "5 of 5"]  # llm_match 1, .5, 0, 1, .5
    assert rows["cam-mllm"][7:] == ["\u2014", "0 of 5"]

    hist = secs["CEI distribution"].blocks[0]
    assert isinstance(hist, Histogram) and [s.label for s in hist.series] == ["scitx", "cam-mllm"]
    assert [sum(s.counts) for s in hist.series] == [5, 5]
    assert secs["Global explanation"].blocks[0].text.startswith("Renditions")
    assert dict(secs["Global explanation"].blocks[1].rows) == {"CEI as the explanation of every sample": "+12.50 pp"}

    index = secs["Index of samples"].blocks[0]
    assert isinstance(index, Index) and len(index.rows) == 5
    anchors = {s.anchor for _, s in doc.iter_sections()}
    assert all(r.anchor in anchors for r in index.rows)
    samples = [s for s in doc.sections if s.title.startswith("Sample ")]
    assert len(samples) == 5 and all(s.new_page for s in samples)
    assert [c.title for c in samples[0].children] == ["Method: scitx", "Method: cam-mllm"]
    failures = secs["Failed or missing items"].blocks[0]
    assert failures.rows == [["scitx/failed0", "error", "The MLLM crashed."]]


def test_run_report_groups_by_dataset_and_classifier_from_payloads(store):
    run_id = store.create_run("bench", {})
    for i, ds in enumerate(["imagenet-r", "objectnet", "objectnet"]):
        r, arts = make_result(i, "scitx")
        key = store_result(store, r, arts, dataset=ds, classifier={"id": "clip-b32"})
        store.add_run_item(run_id, str(i), key, "done")
    store.add_run_item(run_id, "gone", "0" * 64, "done")  # key that is not in the store
    doc = build_run_report(run_id, store)
    summary = next(b for b in _sections(doc)["Summary"].blocks if isinstance(b, Table))
    assert sorted((r[0], r[1], r[3]) for r in summary.rows) == [("imagenet-r", "clip-b32", "1"),
                                                                ("objectnet", "clip-b32", "2")]
    assert _sections(doc)["Failed or missing items"].blocks[0].rows[0][2] == "the result is missing from the store"
    assert "Global explanation" not in _sections(doc)


def test_global_explanation_and_its_score_as_nemo_global_stores_them(store):
    from nemo_desktop.core.analyses.global_explanation import GLOBAL_KIND, SCORE_KIND, GlobalExplanation

    run_id = make_run(store, n_samples=1, methods=("scitx",), config={}, failed_items=0)
    assert "Global explanation" not in _sections(build_run_report(run_id, store))
    g = GlobalExplanation("Mostly sketches.", count=1, run_id=run_id, method="scitx")
    store.put("g" * 64, GLOBAL_KIND, g.to_dict())
    store.put("s" * 64, SCORE_KIND, {"global_key": "g" * 64, "samples": [], "mean_local": 10.0,
                                     "mean_global": 12.5, "paired": 1})
    blocks = _sections(build_run_report(run_id, store))["Global explanation"].blocks
    assert blocks[0].text == "Mostly sketches."
    assert dict(blocks[1].rows) == {"Aggregated from": "1 explanation of scitx",
                                    "Mean CEI, global explanation": "+12.50 pp",
                                    "Mean CEI, per-sample explanations": "+10.00 pp", "Samples compared": "1"}


def test_histogram_bins_cover_every_value():
    h = _histogram({"a": [-12.5, 0.0, 3.0, 40.0], "b": [40.0]})
    assert h.edges[0] <= -12.5 and h.edges[-1] > 40.0 and len(h.edges) - 1 <= 21
    assert [sum(s.counts) for s in h.series] == [4, 1]
    assert h.series[1].counts[-1] == 1 and math.isclose(h.series[0].mean, 7.625)
    single = _histogram({"a": [5.0]})
    assert sum(single.series[0].counts) == 1 and single.edges[0] <= 5.0 < single.edges[-1]


@pytest.mark.parametrize("value,expected", [(0.5, 0.5), (1, 1.0), ({"score": 0.25}, 0.25), ({"mean": 0.75}, 0.75),
                                            (None, None), ("high", None), (True, None), (float("nan"), None)])
def test_llm_match_field(value, expected):
    assert llm_match_of({"llm_match": value}) == expected


def test_resolve_target_exact_prefix_ambiguous_and_unknown(store):
    r, arts = make_result(1, "scitx")
    key = store_result(store, r, arts)
    run_id = store.create_run("bench", {}, run_id="run-alpha")
    assert resolve_target(store, run_id) == ("run", run_id)
    assert resolve_target(store, key) == ("result", key)
    assert resolve_target(store, key[:8]) == ("result", key)
    assert resolve_target(store, "run-al") == ("run", run_id)
    store.put(key[:6] + "f" * 58, "caption", {"text": "x"})
    with pytest.raises(ConfigError, match="ambiguous"):
        resolve_target(store, key[:6])
    with pytest.raises(ConfigError, match="No run or stored result matches"):
        resolve_target(store, "zzzzzz")
    with pytest.raises(ConfigError, match="not an explanation"):
        build_report(key[:6] + "f" * 58, store)


def test_hostile_strings_are_kept_verbatim_in_the_model(store):
    r, arts = make_result(1, "scitx", hostile=True)
    doc = build_single_report(store_result(store, r, arts), store)
    texts = list(doc.iter_text())
    assert any(SCRIPT in t for t in texts)
    assert max(len(t) for t in doc.iter_text()) > 5000
    assert len(doc.title) < 250  # titles are clipped; the full labels are in the body


def test_array_evidence_is_shown_as_an_image(store):
    import numpy as np

    r, arts = make_result(5, "cam-mllm")
    arts["gradcam"] = np.outer(np.linspace(0, 1, 32), np.linspace(1, 0, 48)).astype(np.float32)  # stored as .npy
    key = store_result(store, r, arts)
    assert store.get(key).artifacts["gradcam"].suffix == ".npy"
    doc = build_single_report(key, store)
    cam = next(im for im in doc.iter_images() if im.caption.startswith("Grad-CAM overlay"))
    im = Image.open(io.BytesIO(cam.data))
    # 48 px wide is small: enlarged x2 with nearest neighbour, and the caption says its real size.
    assert cam.caption == "Grad-CAM overlay (48\u00d732 px, shown \u00d72)" and cam.source_size == (48, 32)
    assert im.size == (96, 64) and im.getextrema() == (0, 255)


def test_benchmark_sample_records_are_read(store):
    """The benchmark stores {"result": ExplanationResult, "llm_match": {...}, cell labels} per item."""
    run_id = store.create_run("benchmark", {})
    for i, clf in enumerate(["vit", "clip"]):
        r, arts = make_result(i, "cam-mllm")
        payload = {"result": r.to_dict(), "dataset": "objectnet", "classifier": clf, "method": "cam-mllm+val",
                   "llm_match": {"score": 0.5 * i, "judges": {"gpt": {"score": 0.5 * i}}}, "cei": r.cei}
        store.put(f"b{i}" * 32, "bench-sample", payload, arts)
        store.add_run_item(run_id, f"objectnet|{clf}|-|-|cam-mllm+val/{i}", f"b{i}" * 32, "done")
    doc = build_run_report(run_id, store)
    summary = next(b for b in _sections(doc)["Summary"].blocks if isinstance(b, Table))
    assert sorted((row[1], row[2], row[7]) for row in summary.rows) == [("clip", "cam-mllm+val", "0.500"),
                                                                         ("vit", "cam-mllm+val", "0.000")]
    assert len(list(doc.iter_images())) == 2 * (1 + 1 + 3 + 5)  # the artifacts travel with the record
    titles = [c.title for s in doc.sections if s.new_page for c in s.children]
    assert titles == ["Method: cam-mllm+val (vit)", "Method: cam-mllm+val (clip)"]

"""SciTX end to end on tiny random models loaded through the real loaders (timm classifier, Qwen2-VL MLLM,
InstructPix2Pix editor), and `nemo explain` on the same models.

Tiny random models write garbage: these tests check that the pipeline completes, records per-candidate
errors with the raw replies, stores and reuses its units, and that the real editor and classifier run in the
experiment stage (with a JSON-writing MLLM double), not that the explanations make sense.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

pytestmark = pytest.mark.slow

from nemo_desktop.core.data.reference_index import build_index  # noqa: E402
from nemo_desktop.core.methods.scitx import SciTXConfig, SciTXPipeline  # noqa: E402
from nemo_desktop.core.models.protocols import ModelInfo  # noqa: E402
from nemo_desktop.core.models.families import LoadOptions, ModelSpec, load_model  # noqa: E402

CPU = LoadOptions(device="cpu")
SMALL = dict(k=1, m=2, caption_max_new_tokens=8, hypothesis_max_new_tokens=12, intervention_max_new_tokens=12,
             edit_steps=2)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from fixtures_tiny.classifiers import TINY_CLASSES, build_tiny_timm
    from fixtures_tiny.editors import build_tiny_instruct_pix2pix
    from fixtures_tiny.images import write_random_reference
    from fixtures_tiny.mllm import build_tiny_qwen_vl

    root = tmp_path_factory.mktemp("tiny-scitx")
    paths = {"classifier": build_tiny_timm(root / "timm", label_names=TINY_CLASSES, input_size=32),
             "mllm": build_tiny_qwen_vl(root, "qwen2_vl"), "editor": build_tiny_instruct_pix2pix(root)}
    ref, query = write_random_reference(root, TINY_CLASSES)
    specs = {"classifier": f"timm:local-dir:{paths['classifier']}", "mllm": f"transformers-mllm:{paths['mllm']}",
             "editor": f"diffusers-instruct-pix2pix:{paths['editor']}"}
    return {"paths": paths, "reference": ref, "query": query, "specs": specs}


@pytest.fixture(scope="module")
def models(tiny):
    return {"classifier": load_model(ModelSpec("classifier", "timm", f"local-dir:{tiny['paths']['classifier']}"), CPU),
            "mllm": load_model(ModelSpec("mllm", "transformers-mllm", str(tiny["paths"]["mllm"])), CPU),
            "editor": load_model(ModelSpec("editor", "diffusers-instruct-pix2pix", str(tiny["paths"]["editor"])),
                                 CPU)}


def wrong_label(classifier, path) -> int:
    pred = int(classifier.predict_proba([Image.open(path).convert("RGB")])[0].argmax())
    return (pred + 1) % len(classifier.class_names)


def test_tiny_models_complete_and_record_garbage_per_candidate(tiny, models, store):
    clf, mllm, editor = models["classifier"], models["mllm"], models["editor"]
    index = build_index(tiny["reference"], clf, store)
    y = wrong_label(clf, tiny["query"])
    pipe = SciTXPipeline(clf, mllm, editor, store=store, reference=index, config=SciTXConfig(**SMALL))
    result = pipe(tiny["query"], y)

    assert result.sample.true_index == y and result.sample.pred_index != y
    assert len(result.candidates) == 2
    for c in result.candidates:  # random weights rarely write the JSON asked for: each is scored or explained
        assert (c.error is None) == (c.cei is not None)
        if c.error is not None:
            assert c.raw_reply is not None and ("Unreadable" in c.error or "Duplicate" in c.error
                                                or "Intervention" in c.error or c.error.startswith("Reply cut off"))
    if result.selected_index is None:
        assert any("No hypothesis could be tested" in n for n in result.notes)
    assert result.result_key and result.manifest["complete"] is True
    assert result.manifest["models"]["mllm"]["family"] == "transformers-mllm"
    assert all(o.caption for o in result.observations)
    # Stored and reused: the second call is answered from the store.
    again = SciTXPipeline(clf, mllm, editor, store=store, reference=index, config=SciTXConfig(**SMALL))
    assert again(tiny["query"], y).to_dict() == result.to_dict()


class JsonWritingMLLM:
    """An MLLM double that always writes valid JSON (a hypothesis, then an edit instruction), so that the
    real tiny editor and classifier run the experiment stage."""

    info = ModelInfo("test-double:json-writer", "test-double", "1")

    def chat(self, messages, *, max_new_tokens=512, temperature=0.0, seed=None, **sampling):
        text = "\n".join(p for m in messages for p in m.content if isinstance(p, str))
        if "cause_of_error" in text:
            return json.dumps({"cause_of_error": f"The background texture misleads the model (draw {seed})."})
        if "editing prompt" in text:
            return json.dumps({"reasoning": "-", "solution": "change the color of the background to red"})
        return "a small noisy picture"

    def chat_batch(self, conversations, **kw):
        return [self.chat(c, **kw) for c in conversations]


def test_tiny_editor_and_classifier_score_candidates(tiny, models, store):
    clf, editor = models["classifier"], models["editor"]
    y = wrong_label(clf, tiny["query"])
    steps = []
    from nemo_desktop.core.base.job_context import JobContext

    ctx = JobContext(on_progress=lambda p: steps.append((p.stage, p.done, p.total)))
    # the paper's plain argmax: a tiny random editor returns noise, which the default rule never selects
    result = SciTXPipeline(clf, JsonWritingMLLM(), editor, store=store, reference=None,
                           config=SciTXConfig(**SMALL, selection="cei"))(tiny["query"], y, ctx)
    assert all(c.error is None and c.cei is not None for c in result.candidates)
    assert all(c.edit_verdict == "destroyed" and c.edit_flagged for c in result.candidates)
    assert result.selected_index is not None and result.cei == max(c.cei for c in result.candidates)
    edited = store.get(result.result_key).load_image("edited_0")
    assert edited.size == Image.open(tiny["query"]).size
    assert ("Editing image 1/2", 2, 2) in steps  # the diffusion step callback reached the context


def test_cli_explain_on_tiny_models(tiny, tmp_path, capsys):
    from nemo_desktop.cli.main import main

    clf = load_model(ModelSpec("classifier", "timm", f"local-dir:{tiny['paths']['classifier']}"), CPU)
    y = wrong_label(clf, tiny["query"])
    out = tmp_path / "result.json"
    argv = ["explain", str(tiny["query"]), "--true-label", clf.class_names[y], "--classifier",
            tiny["specs"]["classifier"], "--mllm", tiny["specs"]["mllm"], "--editor", tiny["specs"]["editor"],
            "--reference", str(tiny["reference"]), "--k", "1", "--m", "2", "--edit-steps", "2", "--device", "cpu",
            "--max-new-tokens", "12",
            "-o", str(out)]
    rc = main(argv)
    text = capsys.readouterr().out
    assert "Candidates (CEI" in text and f"true class '{clf.class_names[y]}'" in text
    # Tiny random models write garbage, so no hypothesis can be tested: no explanation is a failed run (exit 3).
    no_explanation = "Nothing could be tested: " in text or "Tested, no cause found: " in text
    assert no_explanation == (rc == 3) and rc in (0, 1, 3)
    data = json.loads(out.read_text())
    assert data["outcome"]["status"] in ("explained", "no cause found", "nothing could be tested")
    assert data["method"] == "scitx" and len(data["candidates"]) == 2 and data["sample"]["true_index"] == y

    # An unknown label fails with close matches, before the MLLM and editor are loaded.
    assert main(argv[:3] + ["cta"] + argv[4:]) == 2
    err = capsys.readouterr().err
    assert "Unknown label 'cta'" in err and "'cat'" in err


def test_cli_explain_exits_non_zero_when_every_endpoint_request_fails(tiny, capsys):
    """The MLLM is an OpenAI-compatible loopback server that refuses every chat request: nothing is explained,
    so `nemo explain` exits 3 (runtime error), not 0."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from nemo_desktop.cli.exit_codes import RUNTIME
    from nemo_desktop.cli.main import main

    class Refusing(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _reply(self, status, payload):
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):  # the model list works: the endpoint is reachable and configured
            self._reply(200, {"data": [{"id": "tiny-vl"}]})

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self._reply(400, {"error": {"message": "this model is misconfigured"}})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        clf = load_model(ModelSpec("classifier", "timm", f"local-dir:{tiny['paths']['classifier']}"), CPU)
        y = wrong_label(clf, tiny["query"])
        argv = ["explain", str(tiny["query"]), "--true-label", clf.class_names[y], "--classifier",
                tiny["specs"]["classifier"], "--mllm", f"openai-compatible:http://127.0.0.1:{server.server_port}/v1",
                "--editor", tiny["specs"]["editor"], "--reference", "none", "--m", "2", "--edit-steps", "2",
                "--device", "cpu"]
        rc = main(argv)
    finally:
        server.shutdown()
    captured = capsys.readouterr()
    assert rc == RUNTIME, captured.out + captured.err

"""The contract every registered analysis keeps (core/registry), parametrised over the registry itself, so a new
analysis gets these tests by registering and must add its case below (test_every_analysis_has_a_case fails
until it does):

- it can be built through the one construction path from dummy components;
- its config and its result round-trip through plain dicts;
- its key is stable, changes with every config field, and a re-run is answered from the store (no model call);
- cancel stops it within one unit of work;
- its CLI options and its offscreen settings form are derived from its config;
- it appears in every surface (`nemo run`, completion, MCP, the Python API, the app's Analyses list).

The checks are those of the pytest plugin `nemo_desktop.testing` (nemo_desktop/testing/checks.py), which a plugin
author runs on their own entry; here they run on every built-in one.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
from typing import Callable

import numpy as np
import pytest

from baseline_doubles import GlobalDigitsMLLM
from digits_world import DigitsEditor
from nemo_desktop.core.models.protocols import ModelInfo
from nemo_desktop.core.registry import Components, config_params, get_analysis, list_analyses
from nemo_desktop.core.registry.build import make_config
from nemo_desktop.testing import (AnalysisCase, check_cancel_stops_within_one_unit, check_config_round_trip,
                                  check_entry, check_key_changes_with_every_field, check_result_round_trip_and_store,
                                  check_surfaces)


class HashSpace:
    """Joint image-text embedder double: a fixed pseudo-random unit vector per text and per image content (no
    meaning at all: it only lets ErrorRetrieval rank its corpus deterministically)."""

    info = ModelInfo("test-double:hash-space", "test-double", "1")

    @staticmethod
    def _vec(data: bytes) -> np.ndarray:
        rng = np.random.default_rng(int.from_bytes(hashlib.sha256(data).digest()[:8], "little"))
        v = rng.normal(size=16)
        return (v / np.linalg.norm(v)).astype(np.float32)

    def embed(self, images):
        return np.stack([self._vec(im.convert("RGB").tobytes()) for im in images])

    def embed_texts(self, texts):
        return np.stack([self._vec(t.encode()) for t in texts])


class ContractMLLM(GlobalDigitsMLLM):
    """GlobalDigitsMLLM that also answers the edit prompt for hypotheses outside its script (ErrorRetrieval's
    corpus sentences) with an edit the digits editor performs: a test double, it does not read the image."""

    def chat(self, messages, **kw):
        try:
            return super().chat(messages, **kw)
        except (StopIteration, AttributeError):
            import json

            return json.dumps({"reasoning": "A fixed edit for an unscripted hypothesis.",
                               "solution": "Rotate the digit slightly"})


Case = AnalysisCase  # the cases below are the pytest plugin's (nemo_desktop.testing), which a plugin author uses too


SAMPLE_VARIATIONS = {
    "k": 2, "m": 2, "seed": 1, "class_relevance": False, "edit_steps": 3, "edit_guidance": 2.5,
    "edit_size": (32, 32), "caption_max_new_tokens": 100, "hypothesis_max_new_tokens": 300,
    "intervention_max_new_tokens": 200, "sampling_temperature": 0.5, "max_extra_draws": 1, "thumbnail_side": 24,
    "validate": True, "score": False, "gradcam_layer": "features.0", "overlay_alpha": 0.3, "overlay_min_side": 64,
    "show_original": True, "reference_max_side": 64, "contrast": "pdiff", "filter_k": 5,
    "k_random": 0, "k_scope": "pooled", "edit_resolution": "native", "sampling_top_p": 0.8, "sampling_top_k": 5,
    "sampling_min_p": 0.1, "corpus": "class-captions",
    "reference_caption": "a drawing of a {class}.", "corpus_files": (), "retrieval_model": None, "show_top": 3,
    "edit_flag_threshold": 0.3, "selection": "cei", "cei_noise_floor": 2.0,
    "caption_batch_size": 2, "edit_batch_size": 2, "batch_requests": False, "edit_control_references": 0,
    "edit_control_rule": "points", "edit_semantic_check": True,
}


def _sample_case(name: str, world) -> Case:
    spec = get_analysis(name)
    comps = Components(classifier=world["classifier"], mllm=ContractMLLM(), store=world["store"])
    if spec.inputs.editor != "none":
        comps.editor = DigitsEditor()
    if spec.inputs.reference != "none":
        comps.reference = world["index"]
    if spec.inputs.embedder != "none":
        comps.embedder = HashSpace()
    invariant = {}
    if name.startswith("error-retrieval"):
        # Extra corpus files and the model to load are choices of inputs: the corpus hash and the injected
        # embedder's identity are in the key instead.
        invariant = {"corpus_files": "the corpus's content hash is in the key",
                     "retrieval_model": "names the embedder to load; the injected embedder is in the key"}
    if name.endswith("-validated"):
        invariant["validate"] = "the -validated variant always validates (with_validation)"
    options = {"thumbnail_side": 16} if name == "scitx" else {}
    if name == "scitx":
        options.update(k=1, m=2)
    variations = {p.name: SAMPLE_VARIATIONS[p.name] for p in config_params(spec.config)
                  if p.name in SAMPLE_VARIATIONS and p.name not in invariant}
    variations["m"] = 1 if options.get("m") == 2 else 2
    if name.startswith("cam-mllm"):
        variations["gradcam_layer"] = "features.0"  # the first conv layer of the digits CNN (auto: the last)
    return Case(comps, (world["blue_three"], "three"), options, variations, invariant)


def _global_case(world) -> Case:
    comps = Components(classifier=world["classifier"], mllm=GlobalDigitsMLLM(), editor=DigitsEditor(),
                       store=world["store"])
    return Case(comps, (world["run_id"],), {"score": True},
                {"chunk_size": 3, "max_new_tokens": 256, "score": False, "seed": 5, "edit_steps": 3},
                {"method": "selects which explanations of the run to aggregate; their text is in the key"})


def _competency_fit_case(world) -> Case:
    from fixtures_tiny.competency_world import contract_world, write_class_folders

    cw = contract_world()
    clf = cw["classifier"]
    folder = write_class_folders(world["tmp"] / "competency-fit", cw["world"].fit_images, cw["world"].fit_labels, 8)
    calibration = write_class_folders(world["tmp"] / "competency-cal", cw["world"].test_images,
                                      cw["world"].test_labels, 3)
    options = {"image_size": 16, "channels": (8,), "latent_dim": 8, "epochs": 1, "batch_size": 32}
    variations = {"image_size": 8, "channels": (4,), "latent_dim": 4, "epochs": 2, "batch_size": 16,
                  "learning_rate": 1e-2, "calibration_fraction": 0.3, "calibration_set": str(calibration),
                  "mean_shift": 1.0, "z_max": 3.0, "z_step": 0.1, "seed": 1}
    return Case(Components(classifier=clf, store=world["store"]), (folder,), options, variations,
                calls=lambda: len(clf.calls))


def _competency_cf_case(world) -> Case:
    from fixtures_tiny.competency_world import RecordingMLLM, contract_world

    cw = contract_world()
    comps = Components(classifier=cw["classifier"], mllm=RecordingMLLM(), fitted=cw["estimator"],
                       store=world["store"])
    options = {"max_iter": 2, "igd_distance": "l2", "min_side": 32, "max_new_tokens": 20}
    variations = {"methods": ("reco", "lgd", "lnn"), "threshold": 0.8, "max_iter": 3, "gamma": 0.2,
                  "learning_rate": 1e-2, "igd_distance": "l1", "fgd_distance": "l2", "lgd_distance": "l2",
                  "lnn_distance": "l2", "lpips_size": 32, "compatibility": True, "batch_size": 10, "seed": 1,
                  "explain": False, "explain_methods": ("reco",), "dataset_description": "Handwritten digits.",
                  "dataset_subject": "handwritten digits",
                  "composite": False, "min_side": 48, "max_new_tokens": 30}
    return Case(comps, (cw["world"].nines[0],), options, variations)


def _competency_bench_case(world) -> Case:
    from fixtures_tiny.competency_world import contract_world, write_class_folders

    cw = contract_world()
    clf = cw["classifier"]
    w = cw["world"]
    # 6 in-distribution digits (mostly competent: the FD/KD reference) and 4 held-out nines (low competency)
    folder = write_class_folders(world["tmp"] / "competency-bench", w.test_images[:6], w.test_labels[:6], 6)
    for i, im in enumerate(w.nines[:4]):
        im.save(folder / f"nine{i}.png")
    images = sorted(folder.rglob("*.png"))
    options = {"max_iter": 2, "igd_distance": "l2", "max_images": 3}
    variations = {"methods": ("reco", "lnn"), "threshold": 0.8, "max_iter": 3, "gamma": 0.2, "learning_rate": 1e-2,
                  "igd_distance": "l1", "fgd_distance": "l2", "lgd_distance": "l2", "lnn_distance": "l2",
                  "lpips_size": 32, "compatibility": True, "batch_size": 2, "seed": 1, "max_images": 2,
                  "feature_space": "latent"}
    return Case(Components(classifier=clf, fitted=cw["estimator"], store=world["store"]), (images,), options,
                variations, calls=lambda: len(clf.calls))
class CountingHashSpace(HashSpace):
    """HashSpace that counts its calls (the failure-modes joint space)."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def embed(self, images):
        self.calls.append(len(images))
        return super().embed(images)

    def embed_texts(self, texts):
        self.calls.append(len(texts))
        return super().embed_texts(texts)


class HashYesNoMLLM:
    """VQA double for failure-modes relevance: a fixed pseudo-random yes/no per (image, question); it does not
    look at what the image shows, it only lets the evaluation run deterministically."""

    info = ModelInfo("test-double:hash-yes-no", "test-double", "1")

    def __init__(self) -> None:
        self.calls: list[int] = []

    def chat(self, messages, **kw):
        """As the question writer of per-sentence VQA: the sentence as a question."""
        self.calls.append(1)
        sentence = messages[0].content[0].split('Sentence: "', 1)[1].split('"', 1)[0]
        return json.dumps({"question": f"Does this hold: {sentence}?"})

    def chat_batch(self, conversations, **kw):
        out = []
        for conv in conversations:
            image, question = conv[0].content
            self.calls.append(1)
            h = hashlib.sha256(image.convert("RGB").tobytes() + question.encode()).digest()[0]
            out.append("yes" if h % 3 == 0 else "no")
        return out


def _failure_modes_case(world) -> Case:
    embedder, mllm = CountingHashSpace(), HashYesNoMLLM()
    comps = Components(classifier=world["classifier"], embedder=embedder, mllm=mllm, store=world["store"])
    return Case(comps, (world["index"],), {"sentence_sets": ("classes",), "embed_batch_size": 32},
                {"split": "correctness", "per_class": True, "classes": ("three",), "a": 0.5, "linkage": "average",
                 "clusters": 3, "k": 2, "tau": None, "methods": ("tops", "pdiff"), "beta_factor": 0.5,
                 "relevance": "vqa", "vqa_question": "template", "p_at_k": 5, "sentence_sets": ("general",),
                 "max_ward_points": 10, "nearest_members": 3, "seed": 1},
                {"embed_batch_size": "batches the embedding work; the embeddings are the same",
                 "attributes_manifest": "selects the relevance input; its path, size and mtime are in the key "
                                        "through the relevance identity"},
                calls=lambda: len(embedder.calls) + len(mllm.calls))


def _model_diff_case(world) -> Case:
    from fixtures_tiny.digits_classifier import DigitsMLPClassifier, load_digits_arrays
    from fixtures_tiny.model_diff_llms import DiffLLM
    from nemo_desktop.core.analyses.model_diff import SyntheticDigits

    X, y = load_digits_arrays()
    a, b = DigitsMLPClassifier.train(X, y, hidden=16, seed=0), DigitsMLPClassifier.train(X[::2], y[::2], hidden=8,
                                                                                        seed=1)
    b.info = ModelInfo("test-double:digits-mlp-b", "test-double", b.info.revision)
    comps = Components(classifier=a, classifier_b=b, mllm=DiffLLM(), generator=SyntheticDigits(size=16),
                       store=world["store"])
    options = {"samples_per_condition": 2, "initial_conditions": 2, "iterations": 1, "explore_size": 2,
               "beam_size": 1, "test_conditions": 6, "evaluator_batch": 8}
    variations = {"methods": ("summarization",), "samples_per_condition": 3, "initial_conditions": 3,
                  "iterations": 0, "explore_size": 3, "beam_size": 2, "test_conditions": 5,
                  "objective": "completeness", "concise_prompt": False, "drop_ratio": 0.5, "density_repeats": 2,
                  "generation_temperature": 0.5, "max_new_tokens": 256, "evaluator_max_new_tokens": 8,
                  "evaluator_batch": 4, "attribution_words": 5, "attribution_conditions": 3, "seed": 1}
    return Case(comps, (), options, variations)


def _competency_score_case(world) -> Case:
    from fixtures_tiny.competency_world import contract_world, write_class_folders

    cw = contract_world()
    clf, w = cw["classifier"], cw["world"]
    # 100 labelled digits: two batches, so cancel after the first is observable
    folder = write_class_folders(world["tmp"] / "competency-score", w.test_images, w.test_labels, 12)
    return Case(Components(classifier=clf, fitted=cw["estimator"], store=world["store"]), (folder,), {},
                {"threshold": 0.8}, calls=lambda: len(clf.calls))


def _fix_case(world) -> Case:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analyses" / "fix"))
    from fix_tiny_world import fix_world_module, tiny_world

    fw = tiny_world(train_size=300, epochs=4, test_size=40)
    FW = fix_world_module()
    editor = FW.FixWorldEditor(fw)
    other = FW.W.CAUSES["background-texture"]
    options = {**fw.finding(), "per_class": 2, "epochs": 1, "bootstrap": 100, "save": False}
    variations = {"data": "augment", "instruction": other.edit, "cue_instruction": FW.ADD_EDITS[other.name],
                  "affected_classes": "one", "predicted_classes": "seven,one", "augmentation": "grayscale",
                  "per_class": 3, "mode": "head", "lora_rank": 2, "lr": 1e-2, "epochs": 2, "patience": 0,
                  "batch_size": 16, "val_fraction": 0.3, "margin": 2.0, "bootstrap": 200, "seed": 1, "save": True,
                  "name": "my-fix", "preserve": 0.5, "interpolation": "held-out", "sentence": "a {class} on blue",
                  "average_epochs": 0.0, "min_gain": 5.0}
    invariant = {name: "names a stored failure mode whose images join the training data; their content is in the "
                       "key through the data's fingerprint (tests/core/analyses/failure_modes/test_fm_fix.py)"
                 for name in ("failure_modes", "failure_mode")}
    invariant.update({name: "settings of mode prompt alone (a zero-shot classifier), keyed in that mode "
                            "(tests/core/analyses/fix/test_fix_prompt_mode.py)" for name in ("prompts", "prompt_set")})
    generator = None
    if importlib.util.find_spec("diffusers") is not None:  # the sentence is rendered by a tiny text-to-image model
        from fixtures_tiny.t2i import build_tiny_flux_schnell
        from nemo_desktop.core.models.families import LoadOptions, ModelSpec, load_model

        generator = load_model(ModelSpec("generator", "diffusers-t2i", str(build_tiny_flux_schnell(world["tmp"])),
                                         options={"steps": 1, "guidance": 0.0, "max_sequence_length": 32,
                                                  "width": 32, "height": 32}), LoadOptions(device="cpu"))
    else:
        variations.pop("sentence")
        invariant["sentence"] = "diffusers is not installed"
    return Case(Components(classifier=fw.classifier, editor=editor, generator=generator, store=world["store"]),
                (fw.data(),), options, variations, invariant, calls=lambda: len(editor.calls))


CASES: dict[str, Callable[[dict], Case]] = {
    **{n: (lambda world, n=n: _sample_case(n, world)) for n in (
        "scitx", "error-retrieval", "error-retrieval-validated", "cam-mllm", "cam-mllm-validated", "change-mllm",
        "change-mllm-validated")},
    "global-explanation": _global_case,
    "competency-estimator": _competency_fit_case,
    "competency-cf": _competency_cf_case,
    "competency-bench": _competency_bench_case,
    "failure-modes": _failure_modes_case,
    "model-diff": _model_diff_case,
    "competency-score": _competency_score_case,
    "fix": _fix_case,
}


@pytest.fixture
def world(digits_classifier, blue_three, reference_folder, store, tmp_path):
    from nemo_desktop.core.data.reference_index import build_index
    from nemo_desktop.core.registry.methods import get_method

    w = {"classifier": digits_classifier, "blue_three": blue_three, "store": store, "tmp": tmp_path,
         "index": build_index(reference_folder, digits_classifier, store)}
    # A run of two explained images for the dataset-level analyses.
    # (seed 7: not the settings the contract cases run with, which must not be answered from this run's results)
    spec = get_method("cam-mllm-validated")
    pipe = spec.factory(digits_classifier, GlobalDigitsMLLM(), editor=DigitsEditor(), store=store,
                        config=spec.config(seed=7))
    run_id = store.create_run("explain-batch", {"method": "cam-mllm-validated"})
    for i in range(2):
        r = pipe(blue_three, "three")
        store.add_run_item(run_id, f"s{i}", r.result_key, "done")
    w["run_id"] = run_id
    return w


def test_every_analysis_has_a_case():
    assert set(list_analyses()) == set(CASES), "add a Case for every registered analysis to CASES above"


@pytest.mark.parametrize("name", sorted(CASES))
def test_entry_and_its_field_info(name):
    check_entry(get_analysis(name))


@pytest.mark.parametrize("name", sorted(CASES))
def test_config_round_trips_and_every_field_has_a_variation(name, world):
    check_config_round_trip(get_analysis(name), CASES[name](world))


@pytest.mark.parametrize("name", sorted(CASES))
def test_result_round_trips_its_key_is_stable_and_a_rerun_is_served_from_the_store(name, world):
    check_result_round_trip_and_store(get_analysis(name), CASES[name](world))


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_key_changes_with_every_config_field(name, world):
    check_key_changes_with_every_field(get_analysis(name), CASES[name](world))


@pytest.mark.parametrize("name", sorted(CASES))
def test_cancel_stops_within_one_unit(name, world):
    check_cancel_stops_within_one_unit(get_analysis(name), CASES[name](world))


@pytest.mark.parametrize("name", sorted(CASES))
def test_appears_in_every_surface(name, tmp_path, monkeypatch):
    monkeypatch.setenv("NEMO_HOME", str(tmp_path / "home"))
    check_surfaces(name)


COMMANDS = {"sample": ["explain"], "global-explanation": ["global"], "competency-estimator": ["competency", "fit"],
            "competency-cf": ["competency", "explain"], "competency-bench": ["competency", "bench"],
            "failure-modes": ["failure-modes"], "model-diff": ["compare", "run"],
            "competency-score": ["competency", "score"], "fix": ["fix"]}


@pytest.mark.parametrize("name", sorted(CASES))
def test_cli_help_offers_every_setting(name, capsys):
    from nemo_desktop.cli.main import main

    spec = get_analysis(name)
    command = COMMANDS.get(name) or COMMANDS[spec.kind]
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    out = capsys.readouterr().out
    aliases = {"class_relevance": "--no-class-relevance", "corpus_files": "--corpus-file", "validate": "--validate",
               "score": "--score", "prompts": "--prompt CLASS=TEXT"}
    for p in config_params(spec.config):
        if p.kind is None:
            continue
        assert (aliases.get(p.name) or p.cli_flag) in out, f"{name}: no option for {p.name}"


@pytest.mark.gui
@pytest.mark.parametrize("name", sorted(CASES))
def test_settings_form_builds_offscreen(name, qtbot):
    from nemo_desktop.gui.panes.workbench.widgets.method_form import MethodForm

    spec = get_analysis(name)
    form = MethodForm()
    qtbot.addWidget(form)
    form.set_config(spec.config)
    # Lists of names from fixed choices (competency's generators) are check boxes; free lists of paths are not.
    editable = {p.name for p in config_params(spec.config)
                if p.form_kind and (not p.form_kind.startswith("paths") or p.choices)}
    assert set(form.editors) == editable
    values = form.values()
    assert make_config(spec, {k: v for k, v in values.items()}) is not None

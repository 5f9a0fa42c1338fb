"""PaRCE agreement with the reference implementation (sarapohland/competency-counterfactuals), without weights in the
repository.

The tiny models and images are rebuilt bit-for-bit from a seed (tests/fixtures_tiny/competency_reference_models.py).
The reference's numbers on them (class loss statistics, calibration accuracy, z*, competency of 30 test images,
and for the low-competency ones the Reco, FGD, LGD and LNN counterfactuals' competency and pixel sums, against
NEMO's reference-compatibility mode) were produced once at development time by running the reference's own code on the rebuilt models
(`--reference PATH --write`), and only those numbers are committed (tests/core/analyses/competency/
reference_agreement.json). The reference repository has no licence: it is imported from the developer's own
checkout at run time, never copied here.

    python benchmarks/competency_reference_agreement.py                  # NEMO vs the committed numbers
    python benchmarks/competency_reference_agreement.py --reference ~/src/competency-counterfactuals --write

The reference imports plotting and segmentation packages it does not use on this path (seaborn, matplotlib,
scikit-image, its dataset loaders); when they are not installed they are replaced by empty modules.
"""
from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
NUMBERS = ROOT / "tests" / "core" / "analyses" / "competency" / "reference_agreement.json"
REFERENCE_REPO = "sarapohland/competency-counterfactuals"
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


GENERATORS = ("reco", "fgd", "lgd", "lnn")  # IGD needs LPIPS' pretrained AlexNet, which is not here (see report)
THRESHOLD = 0.9


def _generator_numbers(images, competency) -> dict:
    """Per image: the counterfactual's competency and the sum of its pixel values (a checksum of the image)."""
    return {"competency": [float(r) for r in competency],
            "pixel_sum": [float(v) for v in images.detach().double().flatten(1).sum(dim=1)]}


def our_estimator(world):
    """NEMO's fitted estimator on the rebuilt models: its fit's calibration step on the calibration images."""
    import torch

    from fixtures_tiny.competency_reference_models import AE, ReferenceWorldClassifier
    from nemo_desktop.core.analyses.competency import CompetencyEstimatorFit, EstimatorConfig
    from nemo_desktop.core.analyses.competency.autoencoder import ConvAutoencoder
    from nemo_desktop.core.base.job_context import null_context

    clf = ReferenceWorldClassifier(world)
    ae = ConvAutoencoder(**AE)
    ae.load_state_dict(world.ae_state)
    ae.eval()
    fit = CompetencyEstimatorFit(clf, EstimatorConfig(**AE))  # mean_shift 2, z grid 0..4.95 step 0.05: the reference's
    with torch.no_grad():
        probs = torch.softmax(clf.logits_from_unit(world.x_cal), dim=1).double().numpy()
    est, _ = fit._calibrate(ae, world.x_cal, world.y_cal, probs, (16, 16), null_context())
    return est


def ours(world, generators: bool = True) -> dict:
    """NEMO's PaRCE on the rebuilt models, and its generators in reference-compatibility mode on the test images
    below the threshold."""
    import torch

    from nemo_desktop.core.analyses.competency import CounterfactualConfig
    from nemo_desktop.core.analyses.competency.generators import generate
    from nemo_desktop.core.base.job_context import null_context

    est = our_estimator(world)
    with torch.no_grad():
        rho = est.competency(world.x_test)["competency"].double().numpy()
    out = {"class_means": list(est.statistics.mean), "class_stds": list(est.statistics.std),
           "accuracy": est.calibration.accuracy, "zscore": est.calibration.z, "test_competency": rho.tolist()}
    if generators:
        low = world.x_test[torch.from_numpy(rho < THRESHOLD)]
        cfg = CounterfactualConfig(compatibility=True, threshold=THRESHOLD)  # the reference's defaults otherwise
        out["generators"] = {}
        for method in GENERATORS:
            images = generate(method, est, low, cfg, null_context()).images
            with torch.no_grad():
                out["generators"][method] = _generator_numbers(images, est.competency(images)["competency"])
    return out


def _stub_missing(names: list[str]) -> None:
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            sys.modules[name] = types.ModuleType(name)
    if not hasattr(sys.modules.get("matplotlib"), "pyplot"):
        sys.modules["matplotlib"].pyplot = sys.modules.setdefault("matplotlib.pyplot",
                                                                  types.ModuleType("matplotlib.pyplot"))


def reference(world, checkout: Path) -> dict:
    """The reference's own PARCE methods on the same models and images (its loaders and plots left out)."""
    import torch

    from fixtures_tiny.competency_reference_models import AE_LAYERS, CLASSIFIER_LAYERS, reference_state_dicts

    _stub_missing(["seaborn", "matplotlib", "matplotlib.pyplot"])
    # Modules the PARCE module imports by name but whose functions this path never calls (dataset loading,
    # regional segmentation): empty stand-ins, so their own heavy dependencies are not needed.
    for name in ("src.datasets.setup_dataloader", "src.utils.segment"):
        stub = types.ModuleType(name)
        stub.setup_loader = stub.segment = stub.segment_pixels = None
        sys.modules[name] = stub
    sys.path.insert(0, str(checkout))
    from src.competency.parce import PARCE  # the developer's checkout
    from src.networks.model import NeuralNet

    clf_state, ae_state = reference_state_dicts(world)
    model, decoder = NeuralNet(CLASSIFIER_LAYERS), NeuralNet(AE_LAYERS)
    model.load_state_dict(clf_state)
    decoder.load_state_dict(ae_state)
    parce = object.__new__(PARCE)  # its __init__ reads model folders and a dataset from disk
    parce.method, parce.model, parce.decoder = "overall", model.eval(), decoder.eval()
    parce.device = torch.device("cpu")
    y = torch.from_numpy(world.y_cal)
    loader = [(world.x_cal[s:s + 50], y[s:s + 50]) for s in range(0, len(y), 50)]
    losses, labels = parce._get_losses(loader)
    parce.C = len(np.unique(labels))
    parce._get_distributions(losses, labels, None)
    labels, outputs = parce._process_data(loader)
    accuracy = parce._get_prediction_accuracy(labels, outputs)
    parce._select_zscore(losses, outputs, accuracy, None)
    with torch.no_grad():
        test_probs = model(world.x_test).numpy()
    rho = parce.comp_scores(world.x_test, test_probs)
    out = {"class_means": [float(m) for m in parce.class_means], "class_stds": [float(s) for s in parce.class_stds],
           "accuracy": float(accuracy), "zscore": float(parce.zscore),
           "test_competency": [float(r) for r in rho], "generators": {}}
    _stub_missing(["lpips"])
    from src.counterfactual import methods

    parce.dataloader = loader  # LNN's bank: the calibration images
    low = world.x_test[torch.from_numpy(rho < THRESHOLD)]
    makers = {"reco": lambda x: decoder(x), "fgd": methods.FeatureGradientDescent(parce).get_counterfactual,
              "lgd": methods.LatentGradientDescent(parce).get_counterfactual,
              "lnn": methods.LatentNearestNeighbors(parce).get_counterfactual}
    for method in GENERATORS:
        images = makers[method](low).detach()
        with torch.no_grad():
            comp = parce.comp_scores(images, model(images).numpy())
        out["generators"][method] = _generator_numbers(images, comp)
    return out


def differences(a: dict, b: dict) -> dict:
    """Largest absolute difference per number (nested per generator)."""
    out = {}
    for k, v in b.items():
        if isinstance(v, dict):
            out.update({f"{k}.{kk}": vv for kk, vv in differences(a[k], v).items()})
        else:
            out[k] = float(np.max(np.abs(np.asarray(a[k], np.float64) - np.asarray(v, np.float64))))
    return out


def main(argv: list[str] | None = None) -> int:
    import torch

    from fixtures_tiny.competency_reference_models import SEED, build_reference_world

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reference", type=Path, help="a checkout of " + REFERENCE_REPO)
    ap.add_argument("--write", action="store_true", help="write the reference's numbers to " + str(NUMBERS))
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    world = build_reference_world(SEED)
    mine = ours(world)
    if args.reference is not None:
        numbers = reference(world, args.reference.expanduser())
        commit = subprocess.run(["git", "-C", str(args.reference), "rev-parse", "HEAD"], capture_output=True,
                                text=True, check=False).stdout.strip() or None
        record = {"reference": {"repository": REFERENCE_REPO, "commit": commit,
                                "note": "numbers produced by running the reference's PARCE methods on the rebuilt "
                                        "models; no code or weights of it are in this repository"},
                  "seed": SEED, "torch": torch.__version__, "checksums": world.checksums(), "numbers": numbers}
        if args.write:
            NUMBERS.write_text(json.dumps(record, indent=1) + "\n")
            print(f"wrote {NUMBERS}")
    else:
        record = json.loads(NUMBERS.read_text())
    diff = differences(mine, record["numbers"])
    checks = differences(world.checksums(), record["checksums"])
    print(json.dumps({"reference_commit": record["reference"]["commit"], "max_abs_difference": diff,
                      "rebuild_checksum_difference": checks,
                      "test_competency_range": [min(mine["test_competency"]), max(mine["test_competency"])]},
                     indent=1))
    # Competencies and statistics within 1e-5; pixel sums are reported (FGD's differ within one Adam step per pixel,
    # see tests/core/analyses/competency/test_reference_agreement.py).
    return 0 if max(v for k, v in diff.items() if not k.endswith("pixel_sum")) <= 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())

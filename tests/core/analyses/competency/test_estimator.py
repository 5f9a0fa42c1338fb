"""The fitted estimator on the digits world: oracle agreement, orderings, calibration, persistence, resume,
cancel, the results store."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from scipy.stats import norm
from sklearn.metrics import roc_auc_score

from fixtures_tiny.competency_world import TINY, to_unit

from nemo_desktop.core.analyses.competency import (CompetencyEstimatorFit, EstimatorConfig, EstimatorFitResult,
                                                   FittedEstimator)
from nemo_desktop.core.analyses.competency.causes import modify
from nemo_desktop.core.base.errors import ConfigError, JobCancelled, NemoError
from nemo_desktop.core.base.job_context import JobContext


def test_scores_equal_an_independent_oracle(world, fitted):
    _, est = fitted
    images = world.test_images[:30] + world.nines[:30]
    scores = est.score(images)
    x = to_unit(images)
    with torch.no_grad():
        probs = torch.softmax(world.classifier.model(x), 1).double().numpy()
        losses = ((est.autoencoder(x) - x) ** 2).mean(dim=(1, 2, 3)).double().numpy()
    mu, sd = np.array(est.statistics.mean), np.array(est.statistics.std)
    z, s = est.calibration.z, est.mean_shift
    for i, sc in enumerate(scores):
        pid = sum(probs[i, c] * norm.sf((losses[i] - s * mu[c]) / sd[c] - z) for c in range(9))
        assert sc.competency == pytest.approx(probs[i].max() * pid, abs=1e-6)
        assert sc.confidence == pytest.approx(probs[i].max(), abs=1e-6)
        assert sc.id_probability == pytest.approx(pid, abs=1e-6)
        c = int(probs[i].argmax())
        assert sc.pred_index == c and sc.loss_z_score == pytest.approx((losses[i] - mu[c]) / sd[c], rel=1e-4)


def test_competency_orders_the_world(world, fitted):
    _, est = fitted
    scores = est.score(world.test_images)
    rho = np.array([s.competency for s in scores])
    right = np.array([s.pred_index for s in scores]) == world.test_labels
    rho9 = np.array([s.competency for s in est.score(world.nines)])
    assert rho[right].mean() > rho[~right].mean() + 0.1
    assert rho[right].mean() > rho9.mean() + 0.1
    assert (rho9 < 0.9).mean() >= 0.4  # the held-out class is often unfamiliar
    noisy = [modify(im, "noise", 150, seed=i) for i, im in enumerate(world.test_images[:100])]
    rho_noisy = np.array([s.competency for s in est.score(noisy)])
    auroc = roc_auc_score(np.r_[np.ones(100), np.zeros(100)], np.r_[rho[:100], rho_noisy])
    assert auroc >= 0.9


def test_fit_result_records_calibration_and_its_bound(fitted):
    result, est = fitted
    cal = result.calibration
    assert cal["accuracy"] > 0.9
    i = cal["grid"].index(cal["z"])
    gaps = np.abs(np.array(cal["curve"]) - cal["accuracy"])
    assert gaps[i] == gaps.min()
    assert cal["at_bound"] == (cal["z"] == cal["grid"][-1])
    assert any("search range" in w for w in result.warnings) == cal["at_bound"]
    m = result.manifest
    assert m["classifier"]["revision"] == est.classifier.info.revision
    assert m["dataset"]["n_calibration"] + m["dataset"]["n_train"] == m["dataset"]["n_images"] == 1300
    assert len(m["dataset"]["fingerprint"]) == 64 and m["mean_shift"] == 2.0
    assert m["architecture"]["latent_dim"] == 32 and m["statistics"]["count"] and m["training"]["epochs"] == 20
    assert EstimatorFitResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result
    assert result.kind == "fit" and result.analysis == "competency-estimator"


def test_save_load_round_trip_and_refusals(world, fitted, tmp_path):
    _, est = fitted
    folder = est.save(tmp_path / "est")
    assert sorted(p.name for p in folder.iterdir()) == ["estimator.json", "estimator.safetensors"]
    back = FittedEstimator.load(folder, world.classifier)
    images = world.nines[:10]
    assert [s.competency for s in back.score(images)] == [s.competency for s in est.score(images)]
    assert torch.equal(back.bank_latents, est.bank_latents)

    other = type(world.classifier)(type(world.classifier.model)())  # same architecture, other weights
    with pytest.raises(NemoError, match="fitted for"):
        FittedEstimator.load(folder, other)
    (folder / "estimator.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(ConfigError, match="cannot be read"):
        FittedEstimator.load(folder, world.classifier)
    with pytest.raises(ConfigError, match="No competency estimator"):
        FittedEstimator.load(tmp_path / "nowhere", world.classifier)


SMALL = dict(TINY, epochs=2)


def _small(world):
    return world.fit_images[:240], world.fit_labels[:240]


def test_cancel_then_resume_gives_the_uninterrupted_weights(world, tmp_path):
    images, labels = _small(world)
    straight = CompetencyEstimatorFit(world.classifier, EstimatorConfig(**SMALL), work_dir=tmp_path / "a")
    straight(images, labels)

    seen = []
    ctx = JobContext(on_progress=seen.append)

    def cancel_in_epoch_two(p):
        seen.append(p)
        if p.stage == "Training autoencoder" and "epoch 2/" in p.message:
            ctx.cancel_token.cancel()

    ctx._on_progress = cancel_in_epoch_two
    work = tmp_path / "b"
    fit = CompetencyEstimatorFit(world.classifier, EstimatorConfig(**SMALL), work_dir=work)
    with pytest.raises(JobCancelled):
        fit(images, labels, ctx)
    state = _checkpoint_state(work)
    assert state["epochs_done"] == 1
    batches = [p for p in seen if p.stage == "Training autoencoder"]
    assert batches[-1].done < batches[-1].total  # stopped within the run, between batches

    resumed = []
    fit(images, labels, JobContext(on_progress=resumed.append))
    trained = [p for p in resumed if p.stage == "Training autoencoder"]
    assert all("epoch 2/" in p.message for p in trained)  # epoch 1 was not run again
    for k, v in straight.estimator.autoencoder.state_dict().items():
        assert torch.equal(v, fit.estimator.autoencoder.state_dict()[k]), k
    assert not work.exists()  # a finished fit leaves no checkpoint behind


def _checkpoint_state(work):
    """The training loop's state in the checkpoint's safetensors metadata (core/training/checkpoint.py)."""
    from safetensors import safe_open

    with safe_open(str(work / "checkpoint.safetensors"), framework="pt") as f:
        return json.loads(f.metadata()["state"])


def test_an_older_versions_checkpoint_is_refused_in_words_and_the_fit_starts_again(world, tmp_path):
    """The weights + JSON pair the fit wrote before issue 41: not resumed, removed, said in the fit's warnings."""
    from safetensors.torch import save_file

    from nemo_desktop.core.analyses.competency.fit import dataset_fingerprint
    from nemo_desktop.core.training import OLDER_VERSION

    images, labels = _small(world)
    fit = CompetencyEstimatorFit(world.classifier, EstimatorConfig(**SMALL), work_dir=tmp_path / "w")
    key = fit.key(dataset_fingerprint(images, np.asarray(labels)))
    work = tmp_path / "w"
    work.mkdir()
    save_file({"ae.enc.0.weight": torch.zeros(1)}, work / "checkpoint.safetensors")
    (work / "checkpoint.json").write_text(json.dumps({"key": key, "epochs_done": 1, "history": [0.1]}))
    result = fit(images, labels)
    assert OLDER_VERSION in result.warnings and len(result.manifest["training"]["loss_per_epoch"]) == SMALL["epochs"]
    straight = CompetencyEstimatorFit(world.classifier, EstimatorConfig(**SMALL), work_dir=tmp_path / "s")
    straight(images, labels)
    for k, v in straight.estimator.autoencoder.state_dict().items():
        assert torch.equal(v, fit.estimator.autoencoder.state_dict()[k]), k


def test_fit_is_stored_and_answered_from_the_store(world, tmp_path):
    from nemo_desktop.core.store import ResultsStore

    images, labels = _small(world)
    with ResultsStore.open(db_path=tmp_path / "s.sqlite", artifacts_dir=tmp_path / "art") as store:
        first = CompetencyEstimatorFit(world.classifier, EstimatorConfig(**SMALL), store=store,
                                       work_dir=tmp_path / "w")
        r1 = first(images, labels)
        seen = []
        again = CompetencyEstimatorFit(world.classifier, EstimatorConfig(**SMALL), store=store)
        r2 = again(images, labels, JobContext(on_progress=seen.append))
        assert [p.stage for p in seen] == ["Loaded from the results store"]
        assert r2.result_key == r1.result_key and r2.manifest == r1.manifest
        assert again.estimator.score(world.nines[:5]) == first.estimator.score(world.nines[:5])
        other = CompetencyEstimatorFit(world.classifier, EstimatorConfig(**dict(SMALL, mean_shift=1.0)))
        assert other.key(r1.manifest["dataset"]["fingerprint"]) != r1.result_key


def test_bad_inputs_are_refused_clearly(world):
    fit = CompetencyEstimatorFit(world.classifier, EstimatorConfig(**SMALL))
    with pytest.raises(ConfigError, match="labels"):
        fit(world.fit_images[:10], world.fit_labels[:9])
    with pytest.raises(ConfigError, match="not a class"):
        fit(world.fit_images[:10], [9] * 10)
    with pytest.raises(ConfigError, match="divisible"):
        EstimatorConfig(image_size=20, channels=(8, 8, 8))
    with pytest.raises(ConfigError, match="between"):
        EstimatorConfig(calibration_fraction=0.0)
    with pytest.raises(ConfigError, match="gradients"):
        CompetencyEstimatorFit(object())


def test_fit_from_a_folder_dataset_and_reload_from_the_store(world, tmp_path):
    from nemo_desktop.core.data.datasets import open_dataset
    from nemo_desktop.core.store import ResultsStore

    from fixtures_tiny.competency_world import CLASS_NAMES

    root = tmp_path / "digits"
    images, labels = _small(world)
    for i, (im, y) in enumerate(zip(images, labels)):
        (root / CLASS_NAMES[int(y)]).mkdir(parents=True, exist_ok=True)
        im.save(root / CLASS_NAMES[int(y)] / f"{i:04d}.png")
    with ResultsStore.open(db_path=tmp_path / "s.sqlite", artifacts_dir=tmp_path / "art") as store:
        fit = CompetencyEstimatorFit(world.classifier, EstimatorConfig(**SMALL), store=store, work_dir=tmp_path / "w")
        result = fit.fit_dataset(open_dataset(root))
        assert result.manifest["dataset"]["n_images"] == 240 and result.manifest["dataset"]["name"] == str(root)
        back = FittedEstimator.from_store(store, result.result_key, world.classifier)
        assert back.score(world.nines[:4]) == fit.estimator.score(world.nines[:4])
        with pytest.raises(ConfigError, match="No competency estimator"):
            FittedEstimator.from_store(store, "0" * 64, world.classifier)


def test_a_separate_calibration_set_calibrates_and_is_recorded(world, tmp_path):
    """With a calibration set every fit image trains the autoencoder, the statistics come from the set's images
    only, and the manifest and the key say which calibration was used."""
    from fixtures_tiny.competency_world import CLASS_NAMES

    images, labels = _small(world)
    cal_images, cal_labels = world.fit_images[240:330], world.fit_labels[240:330]
    split = CompetencyEstimatorFit(world.classifier, EstimatorConfig(**SMALL), work_dir=tmp_path / "a")
    split_result = split(images, labels)
    assert split_result.manifest["dataset"]["calibration"] == {"kind": "split", "fraction": SMALL.get(
        "calibration_fraction", 0.2), "seed": 0}
    given = CompetencyEstimatorFit(world.classifier, EstimatorConfig(**SMALL), work_dir=tmp_path / "b")
    result = given(images, labels, calibration=(cal_images, cal_labels))
    d = result.manifest["dataset"]
    assert d["n_images"] == d["n_train"] == 240 and d["n_calibration"] == 90
    assert d["calibration"]["kind"] == "set" and d["calibration"]["n_images"] == 90
    assert len(d["calibration"]["fingerprint"]) == 64
    counts = np.bincount(np.asarray(cal_labels), minlength=len(CLASS_NAMES))
    assert result.statistics["count"] == counts.tolist()  # statistics from the calibration set's images
    assert result.result_key != split_result.result_key

    # The same set as a class-folder tree named in the settings: the same images calibrate, the path is recorded.
    root = tmp_path / "cal"
    for i, (im, y) in enumerate(zip(cal_images, cal_labels)):
        (root / CLASS_NAMES[int(y)]).mkdir(parents=True, exist_ok=True)
        im.save(root / CLASS_NAMES[int(y)] / f"{i:04d}.png")
    by_path = CompetencyEstimatorFit(world.classifier, EstimatorConfig(**SMALL, calibration_set=str(root)),
                                     work_dir=tmp_path / "c")
    r2 = by_path(images, labels)
    assert r2.manifest["dataset"]["calibration"]["path"] == str(root)
    assert r2.manifest["dataset"]["calibration"]["n_images"] == 90
    assert r2.statistics["count"] == counts.tolist()
    with pytest.raises(ConfigError, match="at least 2"):
        given(images, labels, calibration=(cal_images[:1], cal_labels[:1]))

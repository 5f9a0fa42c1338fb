"""The six causes: each modification does what it says, and the factor search finds low-competency images."""
from __future__ import annotations

import numpy as np
import pytest

from nemo_desktop.core.analyses.competency.causes import find_low_competency, modify


@pytest.mark.parametrize("cause,identity", [("brightness", 1.0), ("contrast", 1.0), ("saturation", 1.0),
                                            ("noise", 0), ("pixelation", 1)])
def test_identity_factors_leave_the_image_unchanged(world, cause, identity):
    im = world.test_images[0]
    assert np.array_equal(np.asarray(modify(im, cause, identity)), np.asarray(im))


def test_pixelation_noise_and_saturation(world):
    im = world.test_images[1]
    a = np.asarray(modify(im, "pixelation", 4)).astype(int)
    blocks = a.reshape(4, 4, 4, 4, 3)  # 16 px in 4x4 blocks of 4x4 pixels
    assert (blocks == blocks[:, :1, :, :1]).all()
    n = np.asarray(modify(im, "noise", 30, seed=3)).astype(int) - np.asarray(im).astype(int)
    assert np.abs(n).max() <= 30 and np.abs(n).max() > 10
    assert np.array_equal(np.asarray(modify(im, "noise", 30, seed=3)), np.asarray(modify(im, "noise", 30, seed=3)))
    g = np.asarray(modify(im, "saturation", 0.0)).astype(int)
    assert (g[..., 0] == g[..., 1]).all() and (g[..., 1] == g[..., 2]).all()
    with pytest.raises(ValueError, match="unknown modification"):
        modify(im, "spatial", 1)


@pytest.mark.parametrize("cause", ["brightness", "contrast", "saturation", "pixelation"])
def test_factor_search_finds_low_competency_versions(world, fitted, cause):
    _, est = fitted
    good = [im for im, s in zip(world.test_images[:120], est.score(world.test_images[:120]))
            if s.competency >= 0.9][:60]
    assert len(good) == 60

    def rho(ims):
        return [s.competency for s in est.score(ims)]

    found = find_low_competency(good, cause, rho)
    assert len(found) >= 20
    for i, f, m in found[:5]:
        assert rho([m])[0] < 0.9 and np.array_equal(np.asarray(m), np.asarray(modify(good[i], cause, f, seed=i)))


def test_cause_sets_are_written_from_competent_images_only(world, fitted, tmp_path):
    import csv

    from nemo_desktop.core.analyses.competency.cause_sets import write_cause_sets
    from nemo_desktop.core.base.errors import ConfigError

    _, est = fitted
    paths = []
    for i, im in enumerate(world.test_images[:12] + world.nines[:3]):
        paths.append(tmp_path / "in" / f"{i:02d}.png")
        paths[-1].parent.mkdir(exist_ok=True)
        im.save(paths[-1])
    before = {str(p): s.competency for p, s in zip(paths, est.score(paths))}
    rows, n = write_cause_sets(est, paths, ("noise", "pixelation"), tmp_path / "out")
    assert n == sum(r >= 0.9 for r in before.values()) > 0
    assert rows and {r.cause for r in rows} <= {"noise", "pixelation"}
    for r in rows:
        assert before[r.source] >= 0.9 > r.competency_after  # competent before, not after
        assert r.competency_before == pytest.approx(before[r.source])
        assert est.score([r.file])[0].competency == pytest.approx(r.competency_after, abs=1e-2)  # PNG round trip
    listed = list(csv.DictReader((tmp_path / "out" / "causes.csv").open()))
    assert [row["file"] for row in listed] == [r.file for r in rows]
    with pytest.raises(ConfigError, match="spatial"):
        write_cause_sets(est, paths, ("spatial",), tmp_path / "x")

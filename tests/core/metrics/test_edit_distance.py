"""The distance of a counterfactual from its original: 1 - SSIM without LPIPS weights, LPIPS (the `lpips`
package's own linear layers on torchvision's AlexNet) when the trunk's checkpoint is in the torch hub cache."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFilter

from nemo_desktop.core.metrics import edit_distance as ed


def scene(seed=0, side=96):
    rng = np.random.default_rng(seed)
    img = Image.new("RGB", (side, side), (120, 160, 90))
    d = ImageDraw.Draw(img)
    for _ in range(8):
        x, y = rng.integers(0, side - 30, 2)
        d.ellipse([x, y, x + rng.integers(10, 30), y + rng.integers(10, 30)],
                  fill=tuple(int(v) for v in rng.integers(0, 255, 3)))
    return img.filter(ImageFilter.GaussianBlur(1))


def noise(side=96):
    return Image.fromarray(np.random.default_rng(1).integers(0, 255, (side, side, 3), dtype=np.uint8))


@pytest.fixture
def empty_hub(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path / "hub"))
    ed.reset_cache()
    yield tmp_path / "hub"
    ed.reset_cache()


def test_ssim_fallback_orders_identical_local_and_noise(empty_hub):
    base = scene()
    local = base.copy()
    ImageDraw.Draw(local).rectangle([30, 30, 55, 55], fill=(200, 30, 30))
    assert ed.resolve_metric("auto") == ed.SSIM
    same, name = ed.edit_distance(base, base.copy())
    assert name == "1-ssim" and same == pytest.approx(0.0, abs=1e-9)
    d_local, _ = ed.edit_distance(base, local)
    d_noise, _ = ed.edit_distance(base, noise())
    assert 0.0 < d_local < 0.3 < 0.9 < d_noise <= 1.0
    # A counterfactual of another size is compared at the original's size.
    assert ed.edit_distance(base, noise().resize((200, 200)))[0] > 0.9


def test_lpips_is_used_when_the_trunk_is_on_disk(empty_hub):
    import torch
    import torchvision

    ckpt = empty_hub / "checkpoints" / ed.ALEXNET_FILE
    ckpt.parent.mkdir(parents=True)
    torch.manual_seed(0)
    torch.save(torchvision.models.alexnet().state_dict(), ckpt)  # the real layout, random weights (offline)
    assert ed.lpips_available() and ed.resolve_metric("auto") == ed.LPIPS
    base = scene()
    same, name = ed.edit_distance(base, base.copy())
    assert name == "lpips-alex" and same == pytest.approx(0.0, abs=1e-6)
    far, _ = ed.edit_distance(base, noise())
    assert far > same and np.isfinite(far)


def test_unknown_metric_is_a_config_error():
    from nemo_desktop.core.base.errors import ConfigError

    with pytest.raises(ConfigError):
        ed.resolve_metric("psnr")

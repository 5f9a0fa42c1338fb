"""The fix trains in the core's one training loop (core/training): a cancelled fix resumes to the weights of an
uninterrupted one (early stopping's best weights and the moving average included), and the torch checkpoint an
older version left next to it is refused in words, never crashes."""
from __future__ import annotations

import pytest
import torch

from nemo_desktop.core.analyses.fix import FixConfig
from nemo_desktop.core.analyses.fix.training import train
from nemo_desktop.core.base.errors import JobCancelled
from nemo_desktop.core.base.job_context import CancelToken, JobContext
from nemo_desktop.core.training import OLDER_VERSION

G = torch.Generator().manual_seed(0)
X, Y = torch.rand(60, 6, generator=G), torch.randint(0, 3, (60,), generator=G)
TEACHER, ORIGINAL = torch.randn(60, 3, generator=G), torch.arange(60) < 40
CONFIG = FixConfig(mode="full", epochs=4, patience=2, batch_size=8, lr=1e-2, preserve=1.0, average_epochs=1.0)


def _run(checkpoint, ctx=None):
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.BatchNorm1d(16), torch.nn.ReLU(),
                                 torch.nn.Dropout(0.2), torch.nn.Linear(16, 3))
    record = train(module, X, Y, CONFIG, checkpoint=checkpoint, key="k1", ctx=ctx or JobContext(), teacher=TEACHER,
                   original=ORIGINAL)
    return module, record


def test_a_cancelled_fix_resumes_to_the_uninterrupted_weights(tmp_path):
    straight, plain = _run(None)
    token = CancelToken()

    def on_progress(p):
        if p.stage == "Training" and p.done == 9:  # in the second epoch (6 steps each)
            token.cancel()

    path = tmp_path / "k1.safetensors"
    with pytest.raises(JobCancelled):
        _run(path, JobContext(on_progress=on_progress, cancel=token))
    assert path.is_file()
    resumed, record = _run(path)
    assert record.resumed_from_epoch == 1 and plain.resumed_from_epoch is None
    assert record.history == plain.history and record.best_epoch == plain.best_epoch
    assert record.steps == plain.steps and record.average_decay == plain.average_decay
    for k, v in straight.state_dict().items():
        assert torch.equal(v, resumed.state_dict()[k]), k


def test_an_older_versions_torch_checkpoint_is_refused_in_words(tmp_path):
    old = tmp_path / "k1.pt"  # what the fix wrote before issue 41
    torch.save({"version": 3, "key": "k1", "state": {}, "record": {"epochs": 2}}, old)
    _, record = _run(tmp_path / "k1.safetensors")
    assert record.notes == [OLDER_VERSION] and record.resumed_from_epoch is None and record.epochs >= 1
    assert not old.exists()

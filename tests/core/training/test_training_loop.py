"""The core's one training loop (core/training): resume after a cancel gives the uninterrupted weights, a cancel
leaves a resumable checkpoint, the moving average keeps `decay` of itself per step, checkpoints of an older version
or of another run are never resumed and never crash."""
from __future__ import annotations

import json

import pytest
import torch

from nemo_desktop.core.base.errors import JobCancelled
from nemo_desktop.core.base.job_context import CancelToken, JobContext
from nemo_desktop.core.training import OLDER_VERSION, Checkpoint, TrainingLoop, WeightAverage


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(),
                               torch.nn.Dropout(0.3), torch.nn.Linear(8, 3))


X = torch.randn(40, 4, generator=torch.Generator().manual_seed(1))
Y = torch.randint(0, 3, (40,), generator=torch.Generator().manual_seed(2))


def _train(path, ctx=None, epochs=4, key="run-1"):
    model = _model()
    loop = TrainingLoop(model, torch.optim.Adam(model.parameters(), lr=1e-2), epochs=epochs, batch_size=8,
                        shuffle_seed=lambda e: 10 + e, stage="Training",
                        checkpoint=None if path is None else Checkpoint(path, key),
                        average=WeightAverage(7.0))
    loop.resume()
    torch.manual_seed(123)  # a resumed process's random state differs from the first one's: the loop restores it
    loop.run(torch.arange(len(Y)), lambda idx: torch.nn.functional.cross_entropy(model(X[idx]), Y[idx]),
             ctx or JobContext(), end_epoch=lambda entry: entry.update(seen=True))
    return model, loop


def test_resume_after_a_cancel_gives_the_uninterrupted_weights(tmp_path):
    straight, plain = _train(None)
    token, steps = CancelToken(), []

    def on_progress(p):
        steps.append(p.done)
        if p.done == 7:  # in the second epoch (5 steps each)
            token.cancel()

    path = tmp_path / "ck.safetensors"
    with pytest.raises(JobCancelled):
        _train(path, JobContext(on_progress=on_progress, cancel=token))
    assert path.is_file()  # the cancel left the first epoch's checkpoint
    model, loop = _train(path)
    assert loop.resumed_from == 1 and loop.steps == plain.steps == 20 and loop.history == plain.history
    for k, v in straight.state_dict().items():
        assert torch.equal(v, model.state_dict()[k]), k
    assert torch.equal(loop.average.values["0.weight"], plain.average.values["0.weight"])


def test_the_average_keeps_decay_of_itself_per_step():
    """decay = 1 - 1/4 = 0.75, not 0.5, where decay and 1 - decay are the same: a swap of the two fails."""
    m = torch.nn.Linear(1, 1, bias=False)
    avg = WeightAverage(4.0)
    assert avg.decay == pytest.approx(0.75)
    with torch.no_grad():
        m.weight.fill_(1.0)
        avg.update(m)  # the first step's values
        m.weight.fill_(5.0)
        avg.update(m)
    assert avg.values["weight"].item() == pytest.approx(0.75 * 1.0 + 0.25 * 5.0)  # 2.0 (swapped: 4.0)
    with avg.applied(m):
        assert m.weight.item() == pytest.approx(2.0)
    assert m.weight.item() == 5.0  # the trained weights back afterwards


def test_a_frozen_weight_is_neither_averaged_nor_checkpointed(tmp_path):
    model = _model()
    model[0].requires_grad_(False)
    loop = TrainingLoop(model, torch.optim.Adam([p for p in model.parameters() if p.requires_grad]), epochs=1,
                        batch_size=8, shuffle_seed=lambda e: e, stage="T", checkpoint=Checkpoint(tmp_path / "c", "k"),
                        average=WeightAverage(3))
    loop.run(torch.arange(40), lambda idx: torch.nn.functional.cross_entropy(model(X[idx]), Y[idx]), JobContext())
    from safetensors import safe_open

    with safe_open(str(tmp_path / "c"), framework="pt") as f:
        names = set(f.keys())
    assert "model.4.weight" in names and "avg.4.weight" in names and "model.1.running_mean" in names
    assert not any(n.endswith("0.weight") for n in names)


def test_an_older_versions_checkpoints_are_refused_in_words_and_training_starts_again(tmp_path):
    # the fix's torch file and the competency fit's weights + JSON pair, as written before issue 41
    path = tmp_path / "key.safetensors"
    torch.save({"version": 3, "key": "run-1", "state": {}}, tmp_path / "key.pt")
    from safetensors.torch import save_file

    save_file({"ae.w": torch.zeros(2)}, path)  # no format in its metadata
    (tmp_path / "checkpoint.json").write_text(json.dumps({"key": "run-1", "epochs_done": 2, "history": [1.0]}))
    model = _model()
    ck = Checkpoint(path, "run-1", older=[tmp_path / "key.pt", tmp_path / "checkpoint.json"])
    loop = TrainingLoop(model, torch.optim.Adam(model.parameters()), epochs=1, batch_size=8,
                        shuffle_seed=lambda e: e, stage="T", checkpoint=ck)
    assert loop.resume() is False
    assert loop.notes == [OLDER_VERSION] and "older version" in OLDER_VERSION and "start" in OLDER_VERSION
    assert not (tmp_path / "key.pt").exists() and not (tmp_path / "checkpoint.json").exists()
    loop.run(torch.arange(40), lambda idx: torch.nn.functional.cross_entropy(model(X[idx]), Y[idx]), JobContext())
    assert loop.epoch == 1 and Checkpoint(path, "run-1").load() is not None  # the new format, resumable


def test_a_damaged_checkpoint_is_not_resumed_and_another_runs_is_left_alone(tmp_path):
    path = tmp_path / "ck.safetensors"
    _train(path, epochs=1, key="other")
    assert Checkpoint(path, "run-1").load() is None and path.is_file()  # another run's: not used, not removed
    path.write_bytes(b"\x00" * 10)
    ck = Checkpoint(path, "run-1")
    assert ck.load() is None and "could not be read" in ck.notes[0] and not path.exists()

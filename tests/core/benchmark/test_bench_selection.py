"""Selection of misclassified samples: seeded, order-independent, recorded; shards partition it."""
from __future__ import annotations

import random

from nemo_desktop.core.benchmark.selection import Outcome, Selection, select_misclassified, shard_of


def outcomes(n: int = 200, wrong_every: int = 3) -> list[Outcome]:
    return [Outcome(f"cls{i % 7}/img{i:04d}.jpg", f"/d/{i}", f"{i:064x}", i % 7,
                    (i % 7) + (1 if i % wrong_every == 0 else 0), 0.1, 0.8) for i in range(n)]


def test_draws_n_misclassified_reproducibly_and_independently_of_order():
    xs = outcomes()
    a = select_misclassified(xs, 20, seed=5, dataset="imagenet-r", classifier="vit")
    shuffled = list(xs)
    random.Random(1).shuffle(shuffled)
    b = select_misclassified(shuffled, 20, seed=5, dataset="imagenet-r", classifier="vit")
    assert [o.sample_id for o in a.selected] == [o.sample_id for o in b.selected]
    assert len(a.selected) == 20 and len({o.sample_id for o in a.selected}) == 20
    assert all(not o.correct for o in a.selected)
    assert a.n_images == 200 and a.n_misclassified == 67 and abs(a.accuracy - (1 - 67 / 200)) < 1e-12
    assert "PCG64" in a.generator and a.seed == 5 and a.fingerprint() == b.fingerprint()
    # Another seed, dataset or classifier draws differently.
    for kw in ({"seed": 6}, {"dataset": "objectnet"}, {"classifier": "clip"}):
        args = {"seed": 5, "dataset": "imagenet-r", "classifier": "vit", **kw}
        assert select_misclassified(xs, 20, **args).fingerprint() != a.fingerprint()


def test_fewer_misclassified_than_asked_takes_all_with_a_note():
    sel = select_misclassified(outcomes(30, wrong_every=10), 400, seed=0)
    assert len(sel.selected) == 3 and sel.notes and "only 3" in sel.notes[0]
    assert select_misclassified(outcomes(5, wrong_every=1000), 10).selected == [outcomes(1)[0]]  # i=0 is wrong


def test_round_trip_and_shards_partition_the_selection():
    sel = select_misclassified(outcomes(), 25, seed=1)
    back = Selection.from_dict(sel.to_dict())
    assert back.fingerprint() == sel.fingerprint() and back.accuracy == sel.accuracy
    for n in (1, 2, 3, 7):
        parts = [[o for pos, o in enumerate(sel.selected) if shard_of(pos, n) == i] for i in range(n)]
        assert sorted(o.sample_id for p in parts for o in p) == sorted(o.sample_id for o in sel.selected)
        assert max(map(len, parts)) - min(map(len, parts)) <= 1

"""The planted-factor world: every 'night' image is misclassified and nothing else; the contrastive methods
must name the condition, TopS must not (it names what the hard cluster shows most: object and place)."""
from __future__ import annotations

import numpy as np
import pytest

import fm_planted_world as pw
from nemo_desktop.core.analyses.failure_modes.config import FailureModesConfig
from nemo_desktop.core.analyses.failure_modes.discover import GroupData, analyse_group
from nemo_desktop.core.analyses.failure_modes.split import correctness_split

NIGHT = "taken at night"


@pytest.fixture(scope="module")
def world():
    return pw.build()


def _run(world, correct, **cfg):
    config = FailureModesConfig(split="correctness", **cfg)
    n = len(correct)
    data = GroupData("all", None, np.arange(n), [f"img{i}" for i in range(n)], world.features, correct,
                     np.zeros(n, int), np.where(correct, 0, 1), correct.astype(float))
    return analyse_group(data, correctness_split(correct, config.a), world.sentence_emb, world.texts, config,
                         ["ok", "wrong"], relevance=world.relevance())


def _count(group, method, text=NIGHT):
    return sum(cl.sentences[method][0]["text"] == text for cl in group.hard_clusters)


def test_world_has_a_modality_gap(world):
    assert float((world.features @ world.sentence_emb.T).mean()) < 0.15


def test_contrastive_methods_name_the_planted_condition_and_tops_does_not(world):
    g = _run(world, ~world.where(condition="night"), clusters=6, k=1, tau=0.15)
    assert len(g.hard_clusters) == 6 and all(cl.accuracy == 0.0 for cl in g.hard_clusters)
    assert sum(cl.size for cl in g.hard_clusters) == int(world.where(condition="night").sum())
    for method in ("pdiff", "setdiff", "fpdiff"):
        assert _count(g, method) == 6, method
    assert _count(g, "tops") == 0
    assert all(" on a " in cl.sentences["tops"][0]["text"] for cl in g.hard_clusters)  # object+place combos
    # each hard cluster is mostly one object and place, and is paired with the easy cluster of that same pair
    easy_rows = {e.id: e.rows for e in g.easy_clusters}

    def majority(rows):
        pairs = [(world.attrs[r]["object"], world.attrs[r]["place"]) for r in rows]
        top = max(set(pairs), key=pairs.count)
        return top, pairs.count(top) / len(pairs)

    for cl in g.hard_clusters:
        top, share = majority(cl.rows)
        assert share > 0.5
        assert majority(easy_rows[cl.nearest_easy])[0] == top
    # evaluation: S* is exactly {night}; every contrastive method finds it, TopS never does
    gt = g.evaluation["ground_truth"]
    assert [world.texts[i] for i in gt["hard_sentences"]] == [NIGHT]
    for method in ("pdiff", "setdiff", "fpdiff"):
        m = g.evaluation["methods"][method]
        assert m["tpr"] == 1.0 and m["ahr"] == 1.0 and m["ji"] == 1.0 and m["acr"] == 1.0
    assert g.evaluation["methods"]["tops"]["tpr"] == 0.0 and g.evaluation["methods"]["tops"]["ahr"] == 0.0
    # P@K of the clusters: the night images are the ground-truth group, and a hard prototype's 10 nearest are night
    assert g.evaluation["p_at_k"] == {"k": 10, "groups": 1, "partitions": 12, "value": 1.0}


def test_documented_sensitivities(world):
    night = ~world.where(condition="night")
    base = _run(world, night, clusters=6, k=1, tau=0.15)
    strict = _run(world, night, clusters=6, k=1, tau=0.20)
    # a higher tau filters FPDiff's candidates by v_h: it loses the condition on some clusters ...
    assert _count(strict, "fpdiff") < _count(base, "fpdiff") == 6
    fell = _run(world, night, clusters=6, k=2, tau=0.9)
    assert any(cl.tau_fallback["fpdiff"] for cl in fell.hard_clusters)
    for cl in fell.hard_clusters:  # every padded pick is TopS's next one, marked, and counted per method
        picks = cl.sentences["fpdiff"]
        assert cl.tau_padded["fpdiff"] == sum(bool(p.get("padded")) for p in picks)
        assert cl.tau_fallback["fpdiff"] == (cl.tau_padded["fpdiff"] > 0)
    assert any(n.startswith("fpdiff: in ") and "TopS" in n for n in fell.notes)
    # ... while PDiff does not use tau at all
    assert _count(strict, "pdiff") == 6
    assert [cl.sentences["pdiff"] for cl in strict.hard_clusters] == [cl.sentences["pdiff"] for cl in base.hard_clusters]


def test_noisy_accuracies_give_the_expected_hard_sentences(world):
    rng = np.random.default_rng(1)
    p = np.full(len(world.attrs), 0.95)
    p[world.where(condition="night")] = 0.3
    p[world.where(object="dog", place="beach") & ~world.where(condition="night")] = 0.35
    g = _run(world, rng.random(len(p)) < p, clusters=5, k=2, tau=0.15)
    star = {world.texts[i] for i in g.evaluation["ground_truth"]["hard_sentences"]}
    assert star == {"a photo of a dog", NIGHT, "a dog on a beach"}
    found = {m: {world.texts[i] for i in g.evaluation["methods"][m]["true_positives"]} for m in g.retrieved}
    assert NIGHT in found["pdiff"] and NIGHT not in found["tops"]

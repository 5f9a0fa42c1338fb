"""Settings (validation, metadata for forms, round-trip), sentence sets, and the store migration that gives
the reference index its entropy column."""
from __future__ import annotations

import dataclasses
import sqlite3

import numpy as np
import pytest

from nemo_desktop.core.analyses.failure_modes import FailureModesConfig, load_sentence_sets
from nemo_desktop.core.analyses.failure_modes.sentences import SentenceSet
from nemo_desktop.core.base.errors import ConfigError
from nemo_desktop.core.store import ResultsStore, migrations


def test_defaults_are_the_papers_and_every_field_is_described():
    c = FailureModesConfig()
    assert (c.split, c.a, c.linkage, c.k, c.tau, c.beta_factor) == ("entropy", 0.2, "ward", 3, 0.25, 0.2)
    assert c.methods == ("tops", "pdiff", "setdiff", "fpdiff")
    assert c.n_clusters == 15 and FailureModesConfig(split="class-probability").n_clusters == 5
    assert FailureModesConfig(split="class-ranking").analyses_per_class
    for f in dataclasses.fields(FailureModesConfig):
        assert f.metadata.get("label") and f.metadata.get("help"), f.name
    assert FailureModesConfig.from_dict(c.to_dict()) == c


@pytest.mark.parametrize("kw,match", [
    ({"split": "loss"}, "Unknown split"), ({"methods": ("tops", "magic")}, "magic"), ({"k": 0}, "out of range"),
    ({"a": -1.0}, "out of range"), ({"split": "class-ranking", "per_class": False}, "per class"),
    ({"sentence_sets": ()}, "No sentence set"), ({"relevance": "human"}, "relevance"),
])
def test_bad_settings_are_refused_clearly(kw, match):
    with pytest.raises(ConfigError, match=match):
        FailureModesConfig(**kw)


def test_shipped_and_user_sentence_sets(tmp_path):
    general = load_sentence_sets(["general"])
    assert len(general) >= 80 and "an image taken at night" in general.texts
    assert len(set(t.lower() for t in general.texts)) == len(general)
    txt = tmp_path / "mine.txt"
    txt.write_text("# my own\nA {class} in the rain\nan image taken at NIGHT\n\n", encoding="utf-8")
    s = load_sentence_sets(["general", "classes", str(txt)], ["cat", "dog"])
    assert "an image of a cat." in s.texts and "A {class} in the rain" in s.texts
    assert s.texts.count("an image taken at night") == 1  # the duplicate (case ignored) is dropped
    filled = s.filled("dog")
    assert "A dog in the rain" in filled.texts and filled.sha256 != s.sha256
    assert "A object in the rain" in s.filled(None).texts  # whole-set analyses fill "object"
    assert SentenceSet(list(s.sentences)).sha256 == s.sha256
    with pytest.raises(ConfigError, match="neither a shipped set nor a file"):
        load_sentence_sets(["no-such-set"])
    bad = tmp_path / "bad.json"
    bad.write_text('{"sentences": [{"text": ""}]}')
    with pytest.raises(ConfigError, match="no text"):
        load_sentence_sets([str(bad)])


def test_a_schema_1_store_gains_the_entropy_column_and_keeps_its_rows(tmp_path):
    db = tmp_path / "results.sqlite"
    con = sqlite3.connect(db, isolation_level=None)
    migrations.migrate(con, db, migrations.MIGRATIONS[:1])  # the layout shipped before this change
    con.execute("INSERT INTO indexes(index_id, class_names, meta) VALUES ('old', '[\"a\", \"b\"]', '{}')")
    con.execute("INSERT INTO index_entries(index_id, path, sha256, label, pred, prob_label, prob_pred, correct, row, "
                "top5) VALUES ('old', '/x.png', 'ab', 0, 0, 0.9, 0.9, 1, 0, '[[0, 0.9], [1, 0.1]]')")
    con.close()
    with ResultsStore.open(db_path=db) as store:
        assert store.schema_version() == migrations.CURRENT_VERSION >= 2
        with store.transaction() as conn:
            assert "entropy" in migrations.table_columns(conn, "index_entries")
            row = conn.execute("SELECT path, prob_label, entropy FROM index_entries").fetchone()
    assert row == ("/x.png", 0.9, None)


def test_new_index_rows_store_the_exact_entropy(tmp_path):
    from fixtures_tiny.digits_classifier import DigitsMLPClassifier, load_digits_arrays, write_digit_folder
    from nemo_desktop.core.data.datasets import FolderDataset
    from nemo_desktop.core.data.reference_index import ReferenceIndex, build_index
    from nemo_desktop.core.base.images import load_image

    X, y = load_digits_arrays()
    clf = DigitsMLPClassifier.train(X[100:600], y[100:600])
    write_digit_folder(tmp_path / "d", X[:40], y[:40])
    with ResultsStore.open(db_path=tmp_path / "s.sqlite") as store:
        index = build_index(FolderDataset(tmp_path / "d"), clf, store)
        p = clf.predict_proba([load_image(q) for q in index.entries.paths]).astype(np.float64)
        exact = -(p * np.log(np.where(p > 0, p, 1))).sum(1)
        assert np.allclose(index.entries.entropy, exact, atol=1e-5)
        # the sidecar fast path and the SQLite path agree
        again = ReferenceIndex.load(store, index.index_id)
        assert np.allclose(again.entries.entropy, exact, atol=1e-5)
        with store.transaction() as conn:
            conn.execute("UPDATE indexes SET meta=json_set(meta, '$.version', 999) WHERE index_id=?", (index.index_id,))
        slow = ReferenceIndex.load(store, index.index_id)
        assert np.allclose(slow.entries.entropy, exact, atol=1e-5)

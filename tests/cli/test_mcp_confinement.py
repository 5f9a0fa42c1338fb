"""`nemo mcp` keeps every file a tool reads or writes inside its roots (issue 42 §2), in-process (no stdio child).

Checked: containment by path components (`/data-evil` is not under `/data`); a dataset member linked from outside
and a CSV row naming a file outside are refused, each with its reason, while the rest is indexed; an estimator
folder's file linked from outside and a report path that is a link leading outside are refused; a NUL byte in a
path is a path error, not an internal one; schema bounds are enforced (`top_k: 0`); progress grows over the whole
call (SciTX's reports know only their own stage's fraction); and list_images pages a root's images.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("mcp")

from fixtures_tiny.classifiers import TINY_CLASSES, build_tiny_timm  # noqa: E402

from nemo_desktop.core.base.confine import OutsideRootsError, confined, is_within  # noqa: E402
from nemo_desktop.mcp_server.replies import ToolError, _error_text  # noqa: E402
from nemo_desktop.mcp_server.roots import Roots  # noqa: E402


def _png(path: Path, seed: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 255, (36, 36, 3), dtype=np.uint8)).save(path)
    return path


@pytest.fixture
def world(tmp_path):
    data, outside = tmp_path / "data", tmp_path / "data-evil"  # a sibling whose name starts like the root
    secret = _png(outside / "cat" / "secret.png", 99)
    for i, cls in enumerate(["cat", "dog"] * 2):
        _png(data / "ds" / cls / f"{i}.png", i)
    (data / "ds" / "cat" / "linked.png").symlink_to(secret)  # a member that leads outside
    manifest = data / "list.csv"
    with open(manifest, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["path", "label"])
        w.writerow(["ds/dog/1.png", "dog"])
        w.writerow([str(secret), "cat"])  # an absolute row outside the root
    return {"data": data, "outside": outside, "secret": secret, "manifest": manifest, "tmp": tmp_path}


@pytest.fixture
def server(world):
    from nemo_desktop.mcp_server.server import NemoMCP

    return NemoMCP([str(world["data"])], device="cpu")


def _error(server, name, args) -> str:
    with pytest.raises(Exception) as err:
        server.call(name, args)
    text = _error_text(err.value)
    assert text.startswith("error: ") and "Internal error" not in text, text
    return text


def test_containment_is_by_path_components_not_by_string_prefix(world):
    roots = Roots.of([world["data"]])
    root = roots.folders[0]
    assert roots.contains(root) and roots.contains(root / "ds" / "cat" / "0.png")
    evil = (world["tmp"] / "data-evil" / "cat" / "secret.png").resolve()
    assert str(evil).startswith(str(root))  # what a string prefix test would accept
    assert not roots.contains(evil) and not roots.contains(root.parent / "data-evil")
    assert not is_within(evil, root) and is_within(root / "x", root)
    with pytest.raises(ToolError, match="outside the folders this server may use"):
        roots.check(world["secret"], "image")
    with confined([world["data"]]):
        with pytest.raises(OutsideRootsError, match="outside the folders this server may use"):
            from nemo_desktop.core.base.confine import check_file

            check_file(evil)


def test_dataset_members_and_csv_rows_outside_the_roots_are_refused_one_by_one(world, server):
    model = build_tiny_timm(world["data"] / "timm", label_names=TINY_CLASSES, input_size=32)
    classifier = f"timm:local-dir:{model}"
    out = server.call("index_dataset", {"dataset": str(world["data"] / "ds"), "classifier": classifier}).data
    linked = str(world["data"] / "ds" / "cat" / "linked.png")
    assert out["entries"] == 4  # the four real members; the link is not read
    assert list(out["unreadable"]) == [linked]
    assert "leads outside the folders this server may use" in out["unreadable"][linked]
    # The CSV manifest: its row outside the root is refused, its row inside is indexed.
    out = server.call("index_dataset", {"dataset": str(world["manifest"]), "classifier": classifier}).data
    assert out["entries"] == 1 and list(out["unreadable"]) == [str(world["secret"])]
    # Nothing of the outside file reached the store's index (paths, and so observations, retrieval, images).
    from nemo_desktop.core.data.reference_index import ReferenceIndex
    from nemo_desktop.core.store import ResultsStore

    with ResultsStore.open(server.paths) as store:
        for row in ReferenceIndex.list(store):
            paths = list(ReferenceIndex.load(store, row["index_id"]).entries.paths)
            assert all("data-evil" not in str(p) and "linked" not in str(p) for p in paths), paths
    # predict: an image outside is refused with its reason, the others are predicted.
    preds = server.call("predict", {"images": [str(world["data"] / "ds" / "dog" / "1.png"), linked],
                                    "classifier": classifier, "top_k": 2}).data
    by_image = {r["image"]: r for r in preds["results"]}
    assert len(by_image[str((world["data"] / "ds" / "dog" / "1.png").resolve())]["top_k"]) == 2
    assert "outside the folders this server may use" in by_image[linked]["error"]["message"]
    # Outside a server, the same link is an ordinary file (nothing is confined).
    from nemo_desktop.core.base.images import load_image

    assert load_image(linked).size == (36, 36)


def test_an_estimator_file_linked_from_outside_is_refused(world):
    from nemo_desktop.core.analyses.competency.estimator import MANIFEST_FILE, WEIGHTS_FILE, FittedEstimator

    folder = world["data"] / "estimator"
    folder.mkdir()
    (world["outside"] / MANIFEST_FILE).write_text("{}")
    (world["outside"] / WEIGHTS_FILE).write_bytes(b"x")
    (folder / MANIFEST_FILE).symlink_to(world["outside"] / MANIFEST_FILE)
    (folder / WEIGHTS_FILE).symlink_to(world["outside"] / WEIGHTS_FILE)
    with confined([world["data"]]):
        with pytest.raises(OutsideRootsError, match="estimator file .* outside the folders"):
            FittedEstimator.load(folder, None)


def test_a_report_path_that_links_outside_is_refused(world, server):
    link = world["data"] / "report.html"
    link.symlink_to(world["outside"] / "written-outside.html")
    text = _error(server, "export_report", {"key": "abcd1234", "path": str(link)})
    assert "outside the folders this server may use" in text
    assert not (world["outside"] / "written-outside.html").exists()


def test_a_nul_byte_in_a_path_is_a_path_error(world, server):
    text = _error(server, "predict", {"images": [str(world["data"] / "a\0b.png")], "classifier": "x"})
    assert "'images[0]' contains a NUL byte" in text
    with pytest.raises(ToolError, match="NUL byte"):
        Roots.of([world["data"]]).check("a\0b.png", "image")


def test_schema_bounds_are_enforced(world, server):
    from nemo_desktop.mcp_server.schemas import _check_args

    image = str(world["data"] / "ds" / "dog" / "1.png")
    predict = server.tool("predict")
    assert predict.schema["properties"]["top_k"]["minimum"] == 1
    with pytest.raises(ToolError, match=r"'top_k' must be at least 1, not 0\."):
        _check_args(predict, {"images": [image], "classifier": "x", "top_k": 0})
    with pytest.raises(ToolError, match=r"'top_k' must be at most 1000"):
        _check_args(predict, {"images": [image], "classifier": "x", "top_k": 5000})
    with pytest.raises(ToolError, match=r"'images' needs at least 1 item"):
        _check_args(predict, {"images": [], "classifier": "x"})
    explain = server.tool("explain")
    k_min = explain.schema["properties"]["settings"]["properties"]["k"]
    k_min = (k_min.get("anyOf") or [k_min])[0]["minimum"]
    with pytest.raises(ToolError, match=rf"'settings.k' must be at least {k_min}"):
        _check_args(explain, {"image": image, "true_label": "cat", "classifier": "x", "settings": {"k": k_min - 1}})
    _check_args(predict, {"images": [image], "classifier": "x", "top_k": 1})  # in bounds: fine
    text = _error(server, "list_images", {"limit": 0})
    assert "'limit' must be at least 1" in text


def test_progress_grows_over_the_whole_call_when_reports_know_only_their_stage():
    import anyio
    import anyio.to_thread

    from nemo_desktop.core.base.job_context import JobContext
    from nemo_desktop.mcp_server.server import _Progress

    sent: list[tuple[float, float]] = []

    class Session:
        async def report_progress(self, value, total, message):
            sent.append((value, total))

    def scitx_like(progress):
        ctx = JobContext(on_progress=progress)
        for stage in range(18):  # each stage counts 0..n of its own (overall None), as SciTX's reports did
            ctx.progress(f"Stage {stage}", 0, 4)
            ctx.progress(f"Stage {stage}", 4, 4)
        staged = JobContext(on_progress=progress).stages("", 0.0, 1.0, {"A": 1, "B": 3})
        for stage in ("A", "B"):
            for i in range(3):
                staged.progress(stage, i, 2)

    async def main():
        progress = _Progress(Session())
        progress.sent_at = -1e9
        await anyio.to_thread.run_sync(scitx_like, lambda p: (setattr(progress, "sent_at", -1e9), progress(p)))

    anyio.run(main)
    values = [v for v, _ in sent]
    assert len(values) >= 36
    assert all(b > a for a, b in zip(values, values[1:])), values
    assert values[-1] < 100 and all(total == 100.0 for _, total in sent)


def test_list_images_pages_a_roots_images_and_leaves_out_links_outside(world, server):
    (world["data"] / "ds" / "notes.txt").write_text("not an image")
    _png(world["data"] / ".hidden" / "h.png", 5)
    first = server.call("list_images", {"limit": 3}).data
    names = sorted(str(p) for p in (world["data"] / "ds").rglob("*.png") if not p.is_symlink())
    assert first["total"] == 4 and first["images"] == names[:3] and first["next_offset"] == 3
    assert first["refused"] == 1
    assert first["refused_examples"] == [{"path": str(world["data"] / "ds" / "cat" / "linked.png"),
                                          "reason": "it leads outside the folders this server may use"}]
    rest = server.call("list_images", {"offset": 3, "limit": 3}).data
    assert rest["images"] == names[3:] and rest["next_offset"] is None
    one = server.call("list_images", {"folder": str(world["data"] / "ds" / "dog"), "recursive": False}).data
    assert one["images"] == [n for n in names if "/dog/" in n]
    assert "outside" in _error(server, "list_images", {"folder": str(world["outside"])})
    assert json.dumps(first)  # plain JSON for the agent
    assert "list_images" in {t.name for t in server.tools()}


def test_an_index_built_elsewhere_gives_no_observation_outside_the_roots(world):
    """An index built by `nemo index` (not confined) holds the linked member; inside the server it is never
    retrieved as an observation."""
    from nemo_desktop import api
    from nemo_desktop.core.data.reference_index import ReferenceIndex
    from nemo_desktop.core.data.retrieval import retrieve_observations
    from nemo_desktop.core.store import ResultsStore

    model = build_tiny_timm(world["data"] / "timm", label_names=["cat", "dog"], num_classes=2, input_size=32)
    summary = api.index_dataset(world["data"] / "ds", f"timm:local-dir:{model}", device="cpu", progress=False)
    assert summary["entries"] == 5 and summary["unreadable"] == {}  # not confined: the link is an ordinary file
    with ResultsStore.open() as store:
        index = ReferenceIndex.load(store, summary["index_id"])
    index.entries.correct[:] = True  # every entry a candidate, whatever the random model predicts
    linked = str(world["data"] / "ds" / "cat" / "linked.png")
    row = list(index.entries.paths).index(linked)
    kw = dict(k=5, class_relevance=False)
    free = retrieve_observations(index, index.features[row], "cat", "dog", **kw)
    assert linked in {o.image_path for o in free.observations}
    with confined([world["data"]]):
        kept = retrieve_observations(index, index.features[row], "cat", "dog", **kw)
    assert linked not in {o.image_path for o in kept.observations} and len(kept.observations) == 4
    assert any("lead outside the folders this server may use" in n for n in kept.notes)

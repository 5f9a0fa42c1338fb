"""How the reference control's defaults were chosen (issue 45): R references and the log-odds allowance, on the
development halves of the known-cause worlds only; the held-out halves report.

    # 1. record: every candidate beyond the noise floor controlled on a pool of 8 references (JSON lines)
    .venv/bin/python benchmarks/control_rule_choice.py record --worlds digits --out digits.jsonl
    .venv/bin/python benchmarks/control_rule_choice.py record --worlds photos --out photos.jsonl
    # 2. choose: the grid of rules on the development halves (pooled over both families and the seeds)
    .venv/bin/python benchmarks/control_rule_choice.py choose digits.jsonl photos.jsonl
    # 3. report one rule on both halves, per family, with the worst seed
    .venv/bin/python benchmarks/control_rule_choice.py report digits.jsonl photos.jsonl --references 6 --allowance 3.5

`record` runs benchmarks/known_causes.py's worlds, samples and adversaries with the app's default settings, but
with the control replaced by a recorder: it edits all `--pool` references for every candidate beyond the floor
(it reports "failed" so that the selection goes on to the next candidate) and keeps each reference's P(true)
before and after, unclamped, beside the query's. `choose` and `report` then replay the evidence rule offline for
any R (the first R of the pool, a random draw like the product's), allowance and probability guard: the largest
CEI beyond the floor whose edit changed something and passes the points rule and "every reference's log-odds
rise <= allowance". Figures: docs/benchmarks/edit_evidence.md ("How the defaults were chosen").
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

FLOOR = 5.0
BAD = ("noise", "paste-true-class", "overlay-true-class", "no-op")


def record(family: str, out: Path, pool: int, seeds: list[int], samples: int | None) -> None:
    import known_causes as K
    from nemo_desktop.core.methods import edit_control as EC
    from nemo_desktop.core.methods.scitx import SciTXConfig, SciTXPipeline

    log: list[dict] = []
    ctx: dict = {}

    def recorder(self, j, cand):
        rows = []
        for img, sha, before in self._references():
            edited = self.tester.edit_one(self.ctx, self.units, img, sha, cand.intervention or "", "control")
            after = float(self.tester.classify(self.units, edited, EC.image_hash(edited), self.clf)[
                self.sample.true_index])
            rows.append({"before": before, "after": after})
        log.append({"j": j, "refs": rows})
        return EC.ControlReading(ran=True, passed=False, query_cei=cand.cei, control_effect=0.0, rule=self.rule)

    def run_sample(world, sample, editor, mllm, selection, **config):
        mllm.set_sample(sample)
        log.clear()
        cfg = SciTXConfig(edit_control_references=pool, edit_control_rule="points")
        r = SciTXPipeline(world.classifier, mllm, editor, reference=getattr(world, "reference", None),
                          config=cfg)(sample.image, sample.label)
        behaviour, target = getattr(editor, "behaviour", None), getattr(editor, "target", None)
        cands = []
        for c in r.candidates:
            bad = behaviour is not None and (target == "all" or c.intervention == target)
            kind = "bad" if bad else ("true" if c.hypothesis == world.cause.hypothesis else "distractor")
            cands.append({"j": len(cands), "kind": kind, "cei": c.cei, "pb": c.prob_true_before,
                          "pa": c.prob_true_after, "verdict": c.edit_verdict})
        with out.open("a", encoding="utf-8") as f:
            f.write(json.dumps({**ctx, "cause": world.cause.name, "behaviour": behaviour,
                                "target": None if behaviour is None else ("all" if target == "all" else "one"),
                                "cands": cands, "controls": list(log)}) + "\n")
        return r

    EC.ReferenceControl.__call__ = recorder
    K.run_sample = run_sample
    default = samples or (30 if family == "digits" else 20)
    for seed in seeds:
        ctx["seed"] = seed
        K.run(default, None, None, 10, [seed], family)


def _halves() -> dict[str, str]:
    import known_cause_worlds as W
    import photo_worlds as P

    return {c: h for halves in (W.HALVES, P.HALVES) for h, cs in halves.items() for c in cs}


def _logit(p: float, guard: float) -> float:
    p = min(max(p, guard), 1 - guard)
    return math.log(p / (1 - p))


def passes(c: dict, refs: list[dict], n: int, allowance: float, guard: float, share: float) -> bool:
    """The points rule and the reference log-odds rule on the first `n` references (edit_control.py)."""
    refs = refs[:n]
    if not refs:
        return True
    effect = max(100 * (r["after"] - r["before"]) for r in refs)
    points = c["cei"] - max(effect, 0) > FLOOR and effect <= max(FLOOR, share * c["cei"])
    rise = max(_logit(r["after"], guard) - _logit(r["before"], guard) for r in refs)
    return points and rise <= allowance


def select(row: dict, n: int, allowance: float, guard: float, share: float) -> dict | None:
    controls = {x["j"]: x["refs"] for x in row["controls"]}
    for c in sorted((c for c in row["cands"] if c["cei"] is not None), key=lambda c: (-c["cei"], c["j"])):
        if c["cei"] <= FLOOR:
            return None
        if c["verdict"] == "no change":
            continue
        refs = controls.get(c["j"])
        if refs is None and c["verdict"] != "destroyed" or refs is not None and passes(c, refs, n, allowance, guard, share):
            return c
    return None


def figures(rows: list[dict], half: str, n: int, allowance: float, guard: float, share: float) -> dict:
    """{(what, which): (share, worst seed, n)}: recovery per cause, bad selected per adversary and placement."""
    half_of = _halves()
    counts: dict = defaultdict(lambda: [0, 0])
    for r in rows:
        if half_of[r["cause"]] != half:
            continue
        sel = select(r, n, allowance, guard, share)
        if r["behaviour"] is None:
            key, hit = ("recovery", r["cause"]), sel is not None and sel["kind"] == "true"
        else:
            key, hit = (r["behaviour"], r["target"]), sel is not None and sel["kind"] == "bad"
        for k in (key, key + (r["seed"],)):
            counts[k][0] += hit
            counts[k][1] += 1
    out = {}
    for k, (hits, total) in counts.items():
        if len(k) == 2:
            per_seed = [h / t for kk, (h, t) in counts.items() if len(kk) == 3 and kk[:2] == k]
            worst = min(per_seed) if k[0] == "recovery" else max(per_seed)
            out[k] = (hits / total, worst, total)
    return out


def choose(rows: list[dict], share: float) -> None:
    print(f"development halves, both families, every seed, points share {share:g}: largest share of bad edits "
          "selected (noise, paste, overlay, no-op), smallest recovery")
    print(f"{'R':>2s} {'allowance':>9s} {'guard':>7s} {'bad':>6s} {'worst seed':>10s} {'recovery':>8s} {'worst seed':>10s}")
    for n, allowance, guard in itertools.product((2, 4, 5, 6, 8), (2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0), (1e-6, 1e-30)):
        f = figures(rows, "development", n, allowance, guard, share)
        bad = max((v for k, v in f.items() if k[0] in BAD), key=lambda v: v[0])
        rec = min((v for k, v in f.items() if k[0] == "recovery"), key=lambda v: v[0])
        print(f"{n:2d} {allowance:9.1f} {guard:7.0e} {bad[0]:6.3f} {bad[1]:10.3f} {rec[0]:8.3f} {rec[1]:10.3f}")


def report(rows_by_family: dict[str, list[dict]], n: int, allowance: float, guard: float, share: float) -> None:
    for family, rows in rows_by_family.items():
        for half in ("development", "held out"):
            print(f"{family}, {half} (R = {n}, allowance {allowance:g} nats, guard {guard:g}):")
            for k, (rate, worst, total) in sorted(figures(rows, half, n, allowance, guard, share).items()):
                print(f"  {' / '.join(map(str, k)):45s} {rate:.3f}  worst seed {worst:.3f}  n = {total}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("--worlds", choices=("digits", "photos"), default="digits")
    rec.add_argument("--out", type=Path, required=True)
    rec.add_argument("--pool", type=int, default=8)
    rec.add_argument("--seeds", default="0,1,2,3,4")
    rec.add_argument("--samples", type=int, default=None)
    for name in ("choose", "report"):
        p = sub.add_parser(name)
        p.add_argument("files", nargs="+", type=Path)
        p.add_argument("--references", type=int, default=6)
        p.add_argument("--allowance", type=float, default=3.5)
        p.add_argument("--guard", type=float, default=1e-30)
        p.add_argument("--share", type=float, default=0.5, help="the points rule's share of the CEI")
    args = ap.parse_args(argv)
    if args.command == "record":
        record(args.worlds, args.out, args.pool, [int(s) for s in args.seeds.split(",")], args.samples)
        return 0
    by_family = {f.stem: [json.loads(line) for line in f.read_text(encoding="utf-8").splitlines()] for f in args.files}
    if args.command == "choose":
        choose([r for rows in by_family.values() for r in rows], args.share)
    else:
        report(by_family, args.references, args.allowance, args.guard, args.share)
    return 0


if __name__ == "__main__":
    sys.exit(main())

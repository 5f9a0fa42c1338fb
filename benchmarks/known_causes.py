"""SciTX against known causes (issue 27): recovery per cause type, and adversarial editors that must never win.

    .venv/bin/python benchmarks/known_causes.py [--samples 30] [--seeds 0,1,2,3,4] [--selection evidence] [--json]

For each of the eight worlds of known_cause_worlds.py (drawn digits), or with `--worlds photos` the six of
photo_worlds.py (patches of real photographs, a development and a held-out half), each with one planted cause and
a real CNN trained here on the CPU, it runs the project's real SciTX pipeline with the app's DEFAULT settings
(only `--selection` changes the rule, for comparison) on up to `--samples` misclassified held-out images, with
a scripted MLLM double (the true cause among two distractors, order varying per sample) and an editor double
that performs each edit. Printed per cause type:

  recovery        share of samples whose selected hypothesis is the planted cause
  cei true/distr  mean CEI of the true cause's candidate and of the best distractor
  flagged sel.    share of selections whose edit carries a flag (e.g. a whole-image change)
  structure       the structure share (metrics/edit_structure.py) of the true-cause edits, min..max

Then per adversarial editor behaviour (noise, paste-true-class, no-op), in two placements: on one distractor
only (the true cause is edited properly: it must still be recovered) and on every candidate (nothing valid
exists: nothing may be explained by the bad edit): the share of samples whose selection is the bad edit, the
recovery rate and the bad edits' mean CEI and structure. `replace-by-true-class` (another exemplar of the true
class in the same place) is reported apart: the known limit of a structure measure.

Targets (issues 27, 42 and 45), default settings, every figure over five world seeds (each seed: its own split,
initial weights and batch order; the worlds pin one torch thread, so a seed gives the same world anywhere):
recovery >= 0.95 on every cause type; noise, paste-true-class and no-op selected <= 0.02 in both placements;
replace-by-true-class <= 0.05; no selection with a CEI within the noise floor (floor-viol 0). Figures:
docs/benchmarks/edit_evidence.md.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import known_cause_worlds as W  # noqa: E402

from nemo_desktop.core.methods.scitx import SciTXConfig, SciTXPipeline  # noqa: E402


def run_sample(world, sample, editor, mllm, selection: str | None, **config):
    """SciTX with default settings (but `selection`, `config`) and the world's reference index when it has one."""
    mllm.set_sample(sample)
    cfg = SciTXConfig(**config) if selection is None else SciTXConfig(selection=selection, **config)
    return SciTXPipeline(world.classifier, mllm, editor, reference=getattr(world, "reference", None),
                         config=cfg)(sample.image, sample.label)


def attach_reference(world, kit, seed: int, folder, per_class: int = W.REFERENCES_PER_CLASS):
    """Build the world's reference index (training-style images of every class) into `folder`."""
    world.reference = W.build_reference(world, kit["reference_scenes"](world, per_class, seed), folder)
    return world


def _is_true(world, c) -> bool:
    return c.hypothesis == world.cause.hypothesis


def _floor_violation(result, floor: float) -> bool:
    """A selection whose CEI lies within the noise floor (inclusive): an explanation without evidence (issue 45)."""
    if result.selected_index is None:
        return False
    return (result.candidates[result.selected_index].cei or 0.0) <= floor


DIGIT_KIT = {"mllm": W.ScriptedWorldMLLM, "editor": W.WorldEditor, "adversary": W.AdversarialEditor,
             "instruction_for": W._instruction_for, "reference_scenes": W.reference_scenes}


def evaluate_world(world, samples, selection=None, kit=None) -> dict:
    kit = kit or DIGIT_KIT
    mllm = kit["mllm"]()
    floor = SciTXConfig().cei_noise_floor
    rows, readings = [], []
    for s in samples:
        r = run_sample(world, s, kit["editor"](world), mllm, selection)
        true = next(c for c in r.candidates if _is_true(world, c))
        others = [c.cei for c in r.candidates if not _is_true(world, c) and c.cei is not None]
        sel = r.candidates[r.selected_index] if r.selected_index is not None else None
        readings.extend(_readings(r, lambda c: "true" if _is_true(world, c) else "distractor"))
        rows.append({"recovered": sel is not None and _is_true(world, sel), "cei_true": true.cei,
                     "cei_distractor": max(others) if others else None,
                     "flagged": sel is not None and sel.edit_flagged, "structure_true": true.edit_structure,
                     "verdict_true": true.edit_verdict, "floor_violation": _floor_violation(r, floor),
                     "control_true": (true.edit_control or {}).get("control_effect"),
                     "overruled": sel is not None and bool((sel.edit_control or {}).get("passed"))
                     and sel.edit_verdict == "destroyed"})
    out = {"cause": world.cause.name, "n": len(rows), "train_accuracy": world.train_accuracy,
           "misclassified_of": f"{len(world.samples) + world.not_causal + world.unstable} of {world.n_test}",
           "left_out_not_causal": world.not_causal, "left_out_round_trip": world.unstable}
    out.update(_summary(rows))
    out["control_readings"] = readings
    return out


def _readings(result, kind_of) -> list[dict]:
    """The reference control's figures of every candidate it ran on (for choosing its rule on the development
    half): kind ("true", "distractor", "bad"), CEI, control effect, structure verdict, passed."""
    out = []
    for c in result.candidates:
        ctl = c.edit_control or {}
        if ctl.get("ran"):
            out.append({"kind": kind_of(c), "cei": c.cei, "control": ctl["control_effect"],
                        "rises": ctl["rises"],
                        "query_logit": ctl.get("query_logit_rise"), "control_logit": ctl.get("control_logit_effect"),
                        "logit_rises": ctl.get("logit_rises"), "verdict": c.edit_verdict, "passed": ctl["passed"],
                        "rule": ctl.get("rule")})
    return out


def _summary(rows) -> dict:
    def mean(key):
        xs = [r[key] for r in rows if r.get(key) is not None]
        return float(np.mean(xs)) if xs else None

    st = [r["structure_true"] for r in rows if r.get("structure_true") is not None]
    return {"recovery": mean("recovered"), "cei_true": mean("cei_true"), "cei_best_distractor": mean("cei_distractor"),
            "flagged_selected": mean("flagged"), "floor_violations": int(sum(r["floor_violation"] for r in rows)),
            "control_true": mean("control_true"), "overruled": mean("overruled"),
            "structure_true": [min(st), max(st)] if st else None,
            "verdicts_true": sorted({r["verdict_true"] for r in rows if r.get("verdict_true")})}


def evaluate_adversary(world, samples, behaviour: str, placement: str, selection=None, kit=None) -> dict:
    kit = kit or DIGIT_KIT
    mllm = kit["mllm"]()
    floor = SciTXConfig().cei_noise_floor
    rows, readings = [], []
    for s in samples:
        distractor = next(h for h in s.pool if h != world.cause.hypothesis)
        target = "all" if placement == "every candidate" else kit["instruction_for"](distractor)
        r = run_sample(world, s, kit["adversary"](world, behaviour, target, true_class=s.label), mllm, selection)
        bad = [j for j, c in enumerate(r.candidates) if target == "all" or c.intervention == target]
        readings.extend(_readings(r, lambda c: "bad" if (target == "all" or c.intervention == target) else
                                  ("true" if _is_true(world, c) else "distractor")))
        sel = r.selected_index
        explained = sel is not None and (r.cei or 0) > floor
        rows.append({"bad_selected": sel in bad and explained, "recovered": sel is not None and
                     _is_true(world, r.candidates[sel]) and sel not in bad,
                     "cei_bad": float(np.mean([r.candidates[j].cei for j in bad if r.candidates[j].cei is not None]))
                     if bad else None,
                     "control_bad": _mean_or_none([(r.candidates[j].edit_control or {}).get("control_effect")
                                                   for j in bad]),
                     "structure_bad": float(np.mean([r.candidates[j].edit_structure for j in bad
                                                     if r.candidates[j].edit_structure is not None])) if bad else None,
                     "floor_violation": _floor_violation(r, floor)})
    n = len(rows)
    return {"cause": world.cause.name, "behaviour": behaviour, "placement": placement, "n": n,
            "bad_selected": sum(r["bad_selected"] for r in rows) / n if n else None,
            "recovery": sum(r["recovered"] for r in rows) / n if n else None,
            "cei_bad": float(np.mean([r["cei_bad"] for r in rows if r["cei_bad"] is not None])) if n else None,
            "structure_bad": float(np.mean([r["structure_bad"] for r in rows if r["structure_bad"] is not None]))
            if n else None,
            "control_bad": _mean_or_none([r["control_bad"] for r in rows]),
            "floor_violations": int(sum(r["floor_violation"] for r in rows)), "control_readings": readings}


def _mean_or_none(xs):
    xs = [x for x in xs if x is not None]
    return float(np.mean(xs)) if xs else None


def run(samples: int, selection: str | None, causes=None, adversary_samples: int | None = None,
        seeds: Sequence[int] = (0,), family: str = "digits", checkpoint: Path | None = None) -> dict:
    """Every world built once per seed (its split, its CNN's initial weights and batch order). `family`:
    "digits" (known_cause_worlds.py) or "photos" (photo_worlds.py)."""
    if family == "photos":
        import photo_worlds as P

        build, names, kit, half = P.build_world, P.CAUSES, P.KIT, {c: h for h, cs in P.HALVES.items() for c in cs}
    else:
        build, names, kit, half = W.build_world, W.CAUSES, DIGIT_KIT, {c: h for h, cs in W.HALVES.items() for c in cs}
    import tempfile

    from nemo_desktop.core.methods import edit_control

    figures = {"settings": "default" if selection is None else f"selection={selection}", "seeds": list(seeds),
               "family": family, "causes": [], "adversaries": [], "seconds": {},
               "control": {"references": SciTXConfig().edit_control_references,
                           "max_share": edit_control.CONTROL_MAX_SHARE, "rule": SciTXConfig().edit_control_rule,
                           "logit_allowance": edit_control.CONTROL_LOGIT_ALLOWANCE,
                           "max_logit_share": edit_control.CONTROL_MAX_LOGIT_SHARE,
                           "reference_logit_allowance": edit_control.REFERENCE_LOGIT_ALLOWANCE,
                           "reference_logit_clamp": edit_control.REFERENCE_LOGIT_CLAMP,
                           "reference_rule_max_share": edit_control.REFERENCE_RULE_MAX_SHARE,
                           "reference_images_per_class": W.REFERENCES_PER_CLASS}}
    with tempfile.TemporaryDirectory(prefix="known-causes-") as tmp:
        _run_seeds(figures, tmp, seeds, causes or names, build, kit, half, samples, adversary_samples, selection,
                   checkpoint)
    return figures


def _run_seeds(figures, tmp, seeds, names, build, kit, half, samples, adversary_samples, selection,
               checkpoint=None) -> None:
    """Seed by seed, every world; with `checkpoint`, the figures so far are written there after each world (a
    long run on a shared machine leaves the seeds it finished)."""
    for seed in seeds:
        for name in names:
            t = time.perf_counter()
            world = build(name, seed=seed, max_samples=samples)
            attach_reference(world, kit, seed, Path(tmp) / f"{name}-{seed}")
            figures["seconds"][f"train {name} seed {seed}"] = time.perf_counter() - t
            t = time.perf_counter()
            figures["causes"].append({"seed": seed, "half": half.get(name),
                                      **evaluate_world(world, world.samples, selection, kit)})
            adv = world.samples[:adversary_samples or samples]
            for behaviour in W.ADVERSARIES:
                for placement in ("one distractor", "every candidate"):
                    figures["adversaries"].append(
                        {"seed": seed, "half": half.get(name),
                         **evaluate_adversary(world, adv, behaviour, placement, selection, kit)})
            figures["seconds"][f"explain {name} seed {seed}"] = time.perf_counter() - t
            world.reference.store_for_benchmark.close()
            if checkpoint is not None:
                checkpoint.write_text(json.dumps({**figures, "seeds_done": sorted({c["seed"] for c in figures["causes"]})},
                                                 indent=1), encoding="utf-8")


def _weighted(rows, key):
    xs = [(r[key], r["n"]) for r in rows if r.get(key) is not None and r["n"]]
    return sum(x * k for x, k in xs) / sum(k for _, k in xs) if xs else None


def _logit_figures(rows, kind: str) -> dict:
    """From the control's readings of `kind` ("true", "bad"): the mean log-odds control (nats) and how many
    edits the points rule alone let through that the log-odds reading failed (edit_control.py)."""
    from nemo_desktop.core.methods.edit_control import control_passes, rule_share

    rs = [r for row in rows for r in row.get("control_readings", []) if r["kind"] == kind
          and r.get("control_logit") is not None]
    floor = SciTXConfig().cei_noise_floor
    caught = [r for r in rs if control_passes(r["cei"], r["control"], floor, rule_share(r.get("rule") or "points"))
              and not r["passed"]]
    return {"logit": _mean_or_none([r["control_logit"] for r in rs]), "caught_by_logit": len(caught),
            "controlled": len(rs)}


def pooled_causes(f: dict) -> list[dict]:
    """Per cause type over the seeds: figures weighted by samples, the worst seed's recovery beside them."""
    out = []
    for name in dict.fromkeys(c["cause"] for c in f["causes"]):
        rows = [c for c in f["causes"] if c["cause"] == name]
        st = [x for c in rows if c["structure_true"] for x in c["structure_true"]]
        out.append({"cause": name, "half": rows[0].get("half"), "n": sum(c["n"] for c in rows), "seeds": len(rows),
                    "recovery": _weighted(rows, "recovery"),
                    "worst_seed_recovery": min((c["recovery"] for c in rows if c["recovery"] is not None),
                                               default=None),
                    "cei_true": _weighted(rows, "cei_true"), "cei_best_distractor": _weighted(rows,
                                                                                              "cei_best_distractor"),
                    "flagged_selected": _weighted(rows, "flagged_selected"),
                    "control_true": _weighted(rows, "control_true"), "overruled": _weighted(rows, "overruled"),
                    "floor_violations": sum(c["floor_violations"] for c in rows),
                    "structure_true": [min(st), max(st)] if st else None,
                    "verdicts_true": sorted({v for c in rows for v in c["verdicts_true"]}),
                    "control_true_logit": _logit_figures(rows, "true")})
    return out


def _fmt(x, spec=".2f"):
    return "—" if x is None else format(x, spec)


def print_table(f: dict) -> None:
    print(f"SciTX on known-cause worlds of {f.get('family', 'digits')} ({f['settings']}; seeds {', '.join(map(str, f['seeds']))}; scripted MLLM, "
          "editor double that performs each edit)")
    print(f"{'cause':20s} {'n':>4s} {'recovery':>8s} {'worst seed':>10s} {'CEI true':>9s} {'CEI distr':>9s} "
          f"{'flagged':>7s} {'structure':>11s} floor-viol  verdicts")
    for c in pooled_causes(f):
        st = c["structure_true"]
        name = c["cause"] + (" (held out)" if c.get("half") == "held out" else "")
        print(f"{name:20s} {c['n']:4d} {_fmt(c['recovery']):>8s} {_fmt(c['worst_seed_recovery']):>10s} "
              f"{_fmt(c['cei_true'], '+.1f'):>9s} {_fmt(c['cei_best_distractor'], '+.1f'):>9s} "
              f"{_fmt(c['flagged_selected']):>7s} {(_fmt(st[0]) + '..' + _fmt(st[1])) if st else '—':>11s} "
              f"{c['floor_violations']:10d}  {','.join(c['verdicts_true'])}")
    print()
    print(f"{'adversary':34s} {'placement':16s} {'n':>4s} {'bad selected':>12s} {'worst seed':>10s} "
          f"{'recovery':>8s} {'CEI bad':>8s} {'structure':>9s} floor-viol")
    for a in adversary_rows(f):
        tag = a["behaviour"] + ("" if a["behaviour"] in W.TARGET_ADVERSARIES else " (limit)") + (
            f" [{a['half']}]" if a["half"] else "")
        print(f"{tag:34s} {a['placement']:16s} {a['n']:4d} {_fmt(a['bad_selected']):>12s} {_fmt(a['worst_seed']):>10s} "
              f"{_fmt(a['recovery']):>8s} {_fmt(a['cei_bad'], '+.1f'):>8s} {_fmt(a['structure_bad']):>9s} "
              f"{a['floor_violations']:10d}")
    print()
    print(f"seconds: train {sum(v for k, v in f['seconds'].items() if k.startswith('train')):.0f}, explain "
          f"{sum(v for k, v in f['seconds'].items() if k.startswith('explain')):.0f}")


def adversary_rows(f: dict) -> list[dict]:
    """Per half (photo worlds), adversary and placement over the worlds and seeds; the worst seed beside."""
    out = []
    halves = list(dict.fromkeys(a.get("half") for a in f["adversaries"]))
    for half, beh, placement in [(h, b, p) for h in halves for b in W.ADVERSARIES
                                 for p in ("one distractor", "every candidate")]:
        rows = [a for a in f["adversaries"] if a["behaviour"] == beh and a["placement"] == placement
                and a.get("half") == half]
        n = sum(a["n"] for a in rows)
        if not n:
            continue
        per_seed: dict = {}
        for a in rows:
            k, bad = per_seed.get(a["seed"], (0, 0.0))
            per_seed[a["seed"]] = (k + a["n"], bad + (a["bad_selected"] or 0.0) * a["n"])
        out.append({"half": half, "behaviour": beh, "placement": placement, "n": n,
                    "bad_selected": _weighted(rows, "bad_selected"),
                    "worst_seed": max(bad / k for k, bad in per_seed.values() if k),
                    "recovery": _weighted(rows, "recovery") if placement == "one distractor" else None,
                    "cei_bad": _weighted(rows, "cei_bad"), "structure_bad": _weighted(rows, "structure_bad"),
                    "control_bad": _weighted(rows, "control_bad"), "control_bad_logit": _logit_figures(rows, "bad"),
                    "floor_violations": sum(a["floor_violations"] for a in rows)})
    return out


def print_markdown(f: dict) -> None:
    """The same figures as markdown tables (docs/benchmarks/edit_evidence.md)."""
    print(f"Worlds: {f.get('family', 'digits')}; {f['settings']} settings; seeds {', '.join(map(str, f['seeds']))}.\n")
    print("| cause type | half | n | recovery | worst seed | CEI true / best distractor | control of the true "
          "edits (points / nats) | structure of the true edits | verdicts | control overruled \"destroyed\" | floor "
          "violations |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for c in pooled_causes(f):
        st = c["structure_true"]
        half = {"held out": "**held out**"}.get(c.get("half"), c.get("half") or "—")
        print(f"| {c['cause']} | {half} | {c['n']} | **{_fmt(c['recovery'])}** | "
              f"{_fmt(c['worst_seed_recovery'])} | {_fmt(c['cei_true'], '+.1f')} / "
              f"{_fmt(c['cei_best_distractor'], '+.1f')} | {_fmt(c.get('control_true'), '+.1f')} / "
              f"{_fmt((c.get('control_true_logit') or {}).get('logit'), '+.2f')} | "
              f"{(_fmt(st[0]) + '-' + _fmt(st[1])) if st else '—'} | "
              f"{', '.join(c['verdicts_true'])} | {_fmt(c.get('overruled'))} | {c['floor_violations']} |")
    print()
    print("| adversarial editor | half | on | n | bad edit selected | worst seed | recovery | its mean CEI | "
          "its control (points / nats) | failed only in log-odds | structure | floor violations |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for a in adversary_rows(f):
        tag = a["behaviour"] + ("" if a["behaviour"] in W.TARGET_ADVERSARIES else " (limit)")
        half = {"held out": "**held out**"}.get(a["half"], a["half"] or "—")
        lo = a.get("control_bad_logit") or {}
        print(f"| {tag} | {half} | {a['placement']} | {a['n']} | **{_fmt(a['bad_selected'])}** | "
              f"{_fmt(a['worst_seed'])} | {_fmt(a['recovery'])} | {_fmt(a['cei_bad'], '+.1f')} | "
              f"{_fmt(a.get('control_bad'), '+.1f')} / {_fmt(lo.get('logit'), '+.2f')} | "
              f"{lo.get('caught_by_logit', '—')} of {lo.get('controlled', '—')} | {_fmt(a['structure_bad'])} | "
              f"{a['floor_violations']} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=30, help="misclassified images per world (default 30)")
    ap.add_argument("--adversary-samples", type=int, default=None, help="per world and behaviour (default: --samples)")
    ap.add_argument("--selection", default=None, help="selection rule to compare (default: the app's default)")
    ap.add_argument("--cause", action="append", help="only these cause types (repeatable)")
    ap.add_argument("--seeds", default="0,1,2,3,4", help="world seeds, comma-separated (default 0,1,2,3,4)")
    ap.add_argument("--worlds", choices=("digits", "photos"), default="digits",
                    help="drawn digits (known_cause_worlds.py) or photograph patches (photo_worlds.py)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--checkpoint", type=Path, help="write the figures so far to this file after every world")
    ap.add_argument("--markdown", action="store_true", help="markdown tables")
    ap.add_argument("--from-json", type=Path, help="print the figures of an earlier --json run (no training)")
    args = ap.parse_args(argv)
    seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
    if args.from_json:
        figures = json.loads(args.from_json.read_text(encoding="utf-8"))
    else:
        figures = run(args.samples, args.selection, args.cause, args.adversary_samples, seeds, args.worlds,
                      args.checkpoint)
    if args.json:
        print(json.dumps(figures, indent=2))
    elif args.markdown:
        print_markdown(figures)
    else:
        print_table(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())

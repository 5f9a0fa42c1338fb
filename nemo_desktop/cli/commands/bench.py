"""`nemo bench`: the NEMO benchmark (paper §4.1): run a configuration, merge shard stores, print the tables.

    nemo bench run CONFIG [--shard i/n] [--store DIR]    resumable: re-run the same command after a crash
    nemo bench run CONFIG --ray [ADDRESS] [--ray-workers N]  the shards on a Ray cluster (extra: ray)
    nemo bench merge STORE... [--into DIR] [--run RUN]   combine the stores of the shards of a run
    nemo bench table RUN [--format md|csv|json | --json] [--table 1 2 ... | timings] [--store DIR] [-o FILE]
    nemo bench configs [--json]                          the shipped configs (paper Tables 1-5) and where they are
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from ..progress import StageBars


def register(subparsers) -> None:
    from ..output import OutputPath, add_output_options

    p = subparsers.add_parser("bench", help="run the NEMO benchmark, merge shards, print the paper's tables",
                              description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="bench_command", metavar="SUBCOMMAND")
    p.set_defaults(func=lambda args: (p.print_help(), 0)[1])

    r = sub.add_parser("run", help="run (or resume) a benchmark configuration",
                       description="Run a benchmark configuration (TOML or JSON; `nemo bench configs` lists the "
                                   "shipped ones, the paper's Tables 1-5, and where they are installed). Every "
                                   "finished sample is stored at once: after a crash or kill, the same command "
                                   "finishes the rest.")
    r.add_argument("config", metavar="CONFIG", help="benchmark configuration (.toml or .json)")
    r.add_argument("--shard", metavar="i/n", help="run only shard i of n (1-based), e.g. one per GPU or machine")
    r.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                   help="run the shards as Ray actors, one GPU each (pip install 'nemo-desktop[ray]'); ADDRESS: a "
                        "cluster (e.g. ray://head:10001 or head:6379); none: RAY_ADDRESS, a local `ray start "
                        "--head`, or a new local cluster")
    r.add_argument("--ray-workers", type=int, metavar="N",
                   help="with --ray: shards of the run (default: one per GPU of the cluster; on a CPU-only cluster "
                        "one per 8 CPUs); a resumed run keeps the count of the launch that started work")
    r.add_argument("--store", metavar="DIR", help="results store folder or .sqlite file (default: the user's store)")
    r.add_argument("--run-id", metavar="ID", help="run id (default: <name>-<hash of the config>)")
    r.add_argument("--retry-failed", action="store_true", help="also retry samples recorded as failed")
    r.add_argument("--device", help="override the config's device (auto, cpu, cuda, cuda:1, ...)")
    add_output_options(r, "the run summary")
    r.set_defaults(func=run_bench)

    m = sub.add_parser("merge", help="merge the stores of a run's shards into one store",
                       description="Copy the benchmark runs (items, results, artifacts, selections) of the given "
                                   "stores into one store. Idempotent.")
    m.add_argument("stores", nargs="+", metavar="STORE", help="shard store folders or .sqlite files")
    m.add_argument("--into", metavar="DIR", help="target store (default: the user's store)")
    m.add_argument("--run", metavar="RUN", help="merge only this run id")
    m.add_argument("--json", action="store_true", help="print the merge report as JSON")
    m.set_defaults(func=merge_bench)

    t = sub.add_parser("table", help="print the paper's tables for a run",
                       description="Table 1 (LLM Match and CEI per dataset x classifier x method) and, where the run "
                                   "has their axis, Tables 2-5 (validation, editors, MLLM backbones, retrieval).")
    t.add_argument("run", metavar="RUN", help="run id (printed by `nemo bench run`)")
    t.add_argument("--format", choices=("md", "csv", "json"), default="md")
    t.add_argument("--json", action="store_true", help="the tables as JSON (same as --format json)")
    t.add_argument("--table", nargs="+", choices=("1", "2", "3", "4", "5", "candidates", "timings"), metavar="T",
                   help="which tables (1 2 3 4 5 candidates timings; default: 1-5 and candidates, those the run has)")
    t.add_argument("--missing", choices=("drop", "zero"),
                   help="a sample a compared method finished without a value: left out for every method (drop, "
                        "the default) or counted as 0 (zero); default: the run config's [tables] missing")
    t.add_argument("--store", metavar="DIR", help="results store folder or .sqlite file (default: the user's store)")
    t.add_argument("-o", "--output", metavar="FILE", type=OutputPath(stdout="text"),
                   help="write to FILE instead of stdout ('-': stdout)")
    t.set_defaults(func=table_bench)

    c = sub.add_parser("configs", help="list the shipped benchmark configs (the paper's Tables 1-5) and where they are",
                       description="The benchmark configs installed with NEMO Desktop: copy one, set its dataset "
                                   "roots to your copies of the datasets, and give it to `nemo bench run`.")
    c.add_argument("--json", action="store_true", help="print the list as JSON")
    c.set_defaults(func=configs_bench)


def open_store(where: str | None):
    """The user's store, or one given as a folder (holding results.sqlite) or a .sqlite file."""
    from ...core.store import ResultsStore
    from ...core.store.paths import get_paths

    if not where:
        return ResultsStore.open(get_paths().ensure())
    p = Path(where).expanduser()
    db = p if p.suffix in (".sqlite", ".db") else p / "results.sqlite"
    return ResultsStore.open(db_path=db, artifacts_dir=db.parent / "artifacts")


class _RunProgress(StageBars):
    """A bar for the whole run on a terminal (items done / total, rate, ETA, current step); in a log (stderr
    not a terminal) one line per finished item and per preparation step instead of a redrawn bar."""

    def __init__(self) -> None:
        from ...core.benchmark.runner import PROGRESS_STAGE

        super().__init__()
        self.run_stage = PROGRESS_STAGE
        self.tty = sys.stderr.isatty()
        self._other: str | None = None
        self._done: int | None = None
        self._step: str | None = None

    def __call__(self, p) -> None:
        from ..progress import progress_disabled

        if progress_disabled():  # TQDM_DISABLE: neither the bar nor the lines
            return
        if p.stage != self.run_stage:
            if p.stage != self._other:
                self._other = p.stage
                print(f"{p.stage}...", file=sys.stderr)
            return
        if not self.tty:
            step = p.message.split(" · ")[-1].split(":")[0] if not p.total else None
            if p.total and p.done != self._done:
                self._done = p.done
                print(f"[{p.message.split(' · ')[0]}] " + " · ".join(p.message.split(" · ")[1:3]), file=sys.stderr)
            elif step and step != self._step:
                self._step = step
                print(step, file=sys.stderr)
            return
        super().__call__(p)  # one bar: the stage never changes
        self._bar.set_postfix_str(p.message.split(" · ", 1)[-1][:140], refresh=False)

    def _open(self, p):
        from tqdm import tqdm

        return tqdm(total=p.total or None, desc="Benchmark", file=sys.stderr, dynamic_ncols=True,
                    bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}]{postfix}")


def run_bench(args) -> int:
    from ...core.benchmark.config import load_config
    from ...core.benchmark.runner import BenchmarkRunner
    from ...core.benchmark.work_units import Shard
    from ...core.base.errors import ConfigError, JobCancelled
    from ..output import cancelled, emit
    from ..progress import cancellable_job

    config = load_config(args.config)
    if args.device:
        config.device = args.device
    shard = Shard.parse(args.shard)
    use_ray = getattr(args, "ray", None) is not None
    if use_ray and args.shard:
        raise ConfigError("--ray and --shard cannot be combined: with --ray the run is cut into shards itself.",
                          hint="Give --ray-workers N for the number of shards.")
    if getattr(args, "ray_workers", None) is not None and not use_ray:
        raise ConfigError("--ray-workers needs --ray.")
    if not use_ray:  # the whole config (datasets, model refs, their extras, methods) before anything runs
        from ...core.benchmark.preflight import check_config

        check_config(config)
    store = open_store(args.store)
    try:
        with cancellable_job(_RunProgress()) as ctx:
            if use_ray:
                from ...core.benchmark.ray_backend import RayBenchmark  # only with --ray: Ray is an optional extra

                runner = RayBenchmark(config, store, address=args.ray or None, workers=args.ray_workers, ctx=ctx,
                                      retry_failed=args.retry_failed, run_id=args.run_id)
            else:
                runner = BenchmarkRunner(config, store, shard=shard, ctx=ctx, retry_failed=args.retry_failed,
                                         run_id=args.run_id)
            summary = runner.run()
    except JobCancelled:
        return cancelled(args, f"Cancelled. Finished samples are stored; run the same command to resume run "
                               f"{runner.run_id}.")
    finally:
        store.close()
    emit(args, summary.to_dict(), lambda: format_summary(summary), default=str)
    return exit_code(summary)


def exit_code(summary) -> int:
    """0 when every item of the shard is done, 1 (partial) when some are, 3 when none is (see exit_codes)."""
    from ...core.benchmark.records import DONE
    from ..exit_codes import for_counts

    done = summary.statuses.get(DONE, 0)
    return for_counts(done, summary.total - done)


def format_summary(s) -> str:
    lines = [f"Run {s.run_id}, shard {s.shard}: {s.total} item(s); {s.finished_before} finished before, "
             f"{s.computed} processed now in {s.seconds:.1f} s (preparing: {s.prepare_s:.1f} s)."]
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(s.statuses.items()))
    lines.append(f"Status: {statuses or 'nothing to do'}" + ("" if s.complete else
                                                            " — re-run the same command to finish the rest."))
    for pair, sel in s.selections.items():
        acc = f"{100 * sel['accuracy']:.1f}%" if sel.get("accuracy") is not None else "-"
        lines.append(f"  {pair}: {sel['selected']} of {sel['misclassified']} misclassified images selected "
                     f"(accuracy {acc} on {sel['images']}; {sel['assigned']} in this shard)")
    if s.computed:
        per = (s.method_s + s.judge_s + s.runner_s) / s.computed
        lines.append(f"Per processed item: {per:.3f} s = method {s.method_s / s.computed:.3f} s + judges "
                     f"{s.judge_s / s.computed:.3f} s + runner {s.runner_s / s.computed:.4f} s")
    if s.load_s >= 0.05:
        lines.append(f"Loading models: {s.load_s:.1f} s")
    stages = {k: v for k, v in s.stage_s.items() if k != "total"}
    if stages:
        total = sum(stages.values()) or 1.0
        lines.append("Method stages (as recorded by the methods): " + ", ".join(
            f"{k} {v:.1f} s ({100 * v / total:.0f}%)" for k, v in sorted(stages.items(), key=lambda kv: -kv[1])))
    for shard, where in s.placements.items():
        gpus = ", ".join(where.get("gpu_ids") or []) or "none (CPU)"
        lines.append(f"Ray shard {shard}: node {where.get('node')}, GPU {gpus}")
    for note in s.notes:
        lines.append(f"Note: {note}")
    lines.append(f"Tables: nemo bench table {s.run_id}")
    return "\n".join(lines)


def merge_bench(args) -> int:
    from ...core.benchmark.merge import merge_stores
    from ...core.base.errors import ConfigError, JobCancelled
    from ..output import cancelled
    from ..progress import cancellable_job

    sources = []
    target = None
    try:
        for where in args.stores:
            db = Path(where).expanduser()
            db = db if db.suffix in (".sqlite", ".db") else db / "results.sqlite"
            if not db.is_file():
                raise ConfigError(f"No results store at {where}.", hint="Give the folder that holds results.sqlite.")
            sources.append(open_store(where))
        target = open_store(args.into)
        # One bar per run (items copied); Ctrl-C stops between items and a re-run finishes (merging is idempotent).
        with cancellable_job(StageBars(terminal_only=True), cancels_after="the current item") as ctx:
            report = merge_stores(target, sources, run_id=args.run, ctx=ctx)
    except JobCancelled:
        return cancelled(args, "Cancelled. The items merged so far are kept; run the same command to finish.")
    finally:
        for s in sources:
            s.close()
        if target is not None:
            target.close()
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
        return 0
    for rid in report.runs:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(report.statuses.get(rid, {}).items()))
        print(f"Merged run {rid}: {counts}")
    print(f"{report.copied_records} record(s) copied.")
    for c in report.conflicts:
        print(f"conflict: {c}", file=sys.stderr)
    if report.missing_records:
        print(f"warning: {len(report.missing_records)} referenced record(s) were missing from their store",
              file=sys.stderr)
    return 0


def table_bench(args) -> int:
    from ...core.benchmark.tables import build_tables, collect, render
    from ...core.base.errors import JobCancelled
    from ..output import cancelled, write_file
    from ..progress import cancellable_job

    store = open_store(args.store)
    try:
        # A large run (tens of thousands of items) takes seconds to read: a bar on terminals, and Ctrl-C.
        with cancellable_job(StageBars(terminal_only=True)) as ctx:
            data = collect(store, args.run, missing=args.missing, ctx=ctx)
        text = render(data, build_tables(data, args.table), "json" if args.json else args.format)
    except JobCancelled:
        return cancelled(args, "Cancelled; no table was written.")
    finally:
        store.close()
    if args.output:
        write_file(args.output, text if text.endswith("\n") else text + "\n")
        print(f"wrote {args.output}", file=sys.stderr if args.json else sys.stdout)  # stdout: machine output only
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def shipped_configs() -> list[dict]:
    """The configs shipped in resources/benchmarks/configs/: name, path and the first sentence of the header."""
    from ...core.base.resources import resource_path

    rows = []
    for path in sorted(resource_path("benchmarks", "configs").glob("*.toml")):
        header = []
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.startswith("#"):
                break
            header.append(line.lstrip("#").strip())
        text = " ".join(header)
        first = text.split(". ", 1)[0].rstrip(".")
        rows.append({"name": path.stem, "path": str(path), "description": first + "." if first else ""})
    return rows


def configs_bench(args) -> int:
    from ...core.base.resources import resource_path

    rows = shipped_configs()
    folder = resource_path("benchmarks", "configs")
    if args.json:
        print(json.dumps({"folder": str(folder), "configs": rows}, indent=2))
        return 0
    print(f"Shipped benchmark configs, in {folder}:")
    width = max((len(r["name"]) for r in rows), default=0)
    for r in rows:
        print(f"  {r['name']:<{width}}  {r['description']}")
    print("Copy one (e.g. `cp " + str(folder / "table1.toml") + " .`), set its dataset roots, then "
          "`nemo bench run table1.toml`.")
    return 0

"""`nemo failure-sentences OUT.json --mllm ID`: write a sentence set for `nemo failure-modes` with an LLM (the seed's
App. C.1 "LLM-generated" sets): one call per topic with our versioned prompt (failure_modes_sentences.v1, the paper
prints none), replies cleaned and de-duplicated, each topic's reply kept in the store so a re-run calls no model.
Use the file with `nemo failure-modes ... --sentence-sets general,OUT.json`.
"""
from __future__ import annotations

import sys

from ..loading import add_device_options
from ..output import OutputPath, add_json_option, json_text


def register(subparsers) -> None:
    p = subparsers.add_parser("failure-sentences", help="write a sentence set for failure-modes with an LLM",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("output", metavar="OUT.json", type=OutputPath(), help="sentence-set file to write")
    p.add_argument("--mllm", "-l", metavar="ID", required=True, help="the LLM/MLLM that writes the sentences")
    p.add_argument("--topic", action="append", metavar="TEXT",
                   help="a topic (repeatable; default: five general ones: lighting, weather and season, places, kinds "
                        "of image, image quality)")
    p.add_argument("--per-topic", type=int, default=20, metavar="N", help="sentences asked per topic (20)")
    p.add_argument("--context", default="", metavar="TEXT",
                   help="what the images are, e.g. 'street scenes from a car' (default: anything)")
    p.add_argument("--name", metavar="NAME", help="the set's name (default: the file name)")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="generation seed (0)")
    add_device_options(p)
    add_json_option(p, "what was written")
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    from ...core.analyses.failure_modes.generation import DEFAULT_TOPICS, generate_sentences
    from ...core.base.errors import ConfigError, JobCancelled
    from ...core.store import ResultsStore
    from ...core.store.paths import get_paths
    from ..exit_codes import for_counts
    from ..loading import load
    from ..output import cancelled
    from ..progress import StageBars, cancellable_job

    out = Path(args.output).expanduser()
    if out.suffix.lower() != ".json":
        raise ConfigError(f"{args.output}: name the file *.json (the sentence-set format).")
    if not out.parent.is_dir():
        raise ConfigError(f"The folder {out.parent} does not exist.", hint="Create it first, or choose another path.")
    topics = args.topic or list(DEFAULT_TOPICS)
    store = ResultsStore.open(get_paths().ensure())
    try:
        with cancellable_job(StageBars()) as ctx:
            mllm = load(args.mllm, "mllm", args)
            gen = generate_sentences(mllm, topics, per_topic=args.per_topic, context=args.context, store=store,
                                     seed=args.seed, ctx=ctx)
    except JobCancelled as exc:
        return cancelled(args, f"{exc.message} Finished topics are kept in the results store; run the same "
                               "command to resume.")
    finally:
        store.close()
    for topic, why in gen.errors.items():
        print(f"topic '{topic}' gave no sentences: {why}", file=sys.stderr)
    if not gen.sentences:
        print("No sentence was written.", file=sys.stderr)
        return for_counts(0, len(topics))
    gen.write(out, args.name)
    if args.json:
        print(json_text({"output": str(out), "sentences": len(gen.sentences), "topics": len(topics),
                         "failed_topics": dict(gen.errors), "dropped": gen.dropped}, default=str))
        return for_counts(len(topics) - len(gen.errors), len(gen.errors))
    print(f"wrote {len(gen.sentences)} sentences on {len(topics) - len(gen.errors)} topic(s) to {out} "
          f"({gen.dropped} duplicates or unusable entries dropped; prompt {gen.prompt_version})")
    return for_counts(len(topics) - len(gen.errors), len(gen.errors))

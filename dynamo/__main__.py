"""``python -m dynamo``: run any script under capture, or explain what capture does to it.

    python -m dynamo run [--backend B] [--fullgraph] [--dynamic auto|true|false]
                         [--summary] [--report FILE] [--dump DIR] script.py [args...]
    python -m dynamo explain [--backend B] [--dynamic ...] script.py [args...]
    python -m dynamo minify repro_dir

``run`` executes the script as ``__main__`` (its own ``sys.argv``, ``sys.path[0]`` its folder)
with every frame captured, as if its whole body were inside ``with dynamo.optimize(B):``;
``--summary`` prints, on stderr at the end, how many graphs, graph breaks and recompiles it
caused. ``explain`` is ``run --summary`` with the full list of break and recompile reasons and
the frames that ran in plain Python, each at the user's file:line. The script's exit status is
kept (``SystemExit``); an exception it raises is printed as Python would and exits with 1.
``minify`` shrinks a repro directory written by ``dynamo.config.check_accuracy`` (see
`dynamo.repro`) and prints where the minified repro went.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
import traceback

import dynamo
from dynamo.repro import minify
from dynamo.tools import recording

_DYNAMIC = {"auto": None, "true": True, "false": False}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m dynamo",
        description="Run a Python script with every frame captured by npdynamo.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{run,explain,minify}")
    for name, text in (("run", "run a script under capture"),
                       ("explain", "run a script under capture and list graphs, graph breaks, "
                                   "recompiles and frames run in plain Python")):
        p = sub.add_parser(name, help=text, description=text)
        p.add_argument("--backend", default="eager",
                       help='a registered backend: "eager" (default), "c", or your own')
        p.add_argument("--fullgraph", action="store_true",
                       help="raise instead of breaking a graph (as dynamo.compile(fullgraph=True))")
        p.add_argument("--dynamic", choices=sorted(_DYNAMIC), default="auto",
                       help="dynamic shapes: auto (default: symbolic once a size changed), "
                            "true or false")
        if name == "run":
            p.add_argument("--summary", action="store_true",
                           help="print the number of graphs, breaks and recompiles at the end")
        p.add_argument("--report", metavar="FILE",
                       help="write an HTML report of every frame, graph, guard and break")
        p.add_argument("--dump", metavar="DIR",
                       help="write a folder per compiled frame (dynamo.config.dump_dir)")
        p.add_argument("script", help="the Python script to run")
        p.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")
    text = "shrink a repro directory written by dynamo.config.check_accuracy"
    p = sub.add_parser("minify", help=text, description=text)
    p.add_argument("repro", help="the repro directory (or its repro.py)")
    return parser


def _minify(path: str) -> int:
    if not os.path.exists(os.path.join(path if os.path.isdir(path) else os.path.dirname(path),
                                       "graph.pkl")):
        print(f"python -m dynamo minify: {path} is not a repro directory (no graph.pkl)",
              file=sys.stderr)
        return 2
    found = minify(path)
    if found is None:
        print("the repro shows no difference any more: nothing to minify")
        return 0
    print(f"minified repro: {found}")
    print(open(os.path.join(found, "repro.py")).read().split('"""')[1].strip())
    return 0


def main(argv: list[str] | None = None) -> int:
    opts = _parser().parse_args(argv)
    if opts.command == "minify":
        return _minify(opts.repro)
    script = os.path.abspath(opts.script)
    if not os.path.isfile(script):
        print(f"python -m dynamo: no such script: {opts.script}", file=sys.stderr)
        return 2

    try:
        dynamo.lookup_backend(opts.backend)
    except Exception as exc:  # noqa: BLE001 - an unknown name: say which exist
        print(f"python -m dynamo: {exc}", file=sys.stderr)
        return 2
    if opts.dump:
        dynamo.config.dump_dir = opts.dump
    scope = dynamo.optimize(opts.backend, fullgraph=opts.fullgraph,
                            dynamic=_DYNAMIC[opts.dynamic])
    sys.argv = [script, *opts.args]
    sys.path.insert(0, os.path.dirname(script))
    status = 0
    with recording() as rec:
        try:
            with scope:
                runpy.run_path(script, run_name="__main__")
        except SystemExit as exc:
            code = exc.code
            status = code if isinstance(code, int) else (0 if code is None else 1)
            if code is not None and not isinstance(code, int):
                print(code, file=sys.stderr)
        except BaseException as exc:  # noqa: BLE001 - reported as Python would, then the summary
            tb = exc.__traceback__
            while tb is not None and tb.tb_frame.f_code.co_filename != script:
                tb = tb.tb_next  # (from the script's own frames on, as `python script.py`)
            traceback.print_exception(type(exc), exc, tb or exc.__traceback__)
            status = 1
    if opts.report:
        print(f"npdynamo report: {dynamo.report(opts.report, rec)}", file=sys.stderr)
    if opts.command == "explain" or opts.summary:
        sys.stdout.flush()
        print(f"\nnpdynamo ({opts.backend} backend) on {opts.script}:\n{rec.stats()}",
              file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())

"""`chunkwise compare`: a table and a bar chart of several eval runs."""

from __future__ import annotations

import argparse

HELP = "compare eval runs: markdown table (tasks x runs, averages) and a grouped bar chart"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("runs", nargs="+", metavar="RUN", help="run folders (with results.json)")
    p.add_argument(
        "--plot", metavar="OUT.png", help="write a grouped bar chart here (.png/.pdf/.svg)"
    )
    p.add_argument("--json", metavar="OUT.json", help="write the table as JSON here")
    p.add_argument("--title", help="chart title")


def run(args: argparse.Namespace) -> int:
    from chunkwise.eval.compare import PLOT_SUFFIXES, check_output_file, compare, plot, to_markdown
    from chunkwise.io import atomic_write_json

    if args.json:
        check_output_file(args.json, "--json")
    if args.plot:
        check_output_file(args.plot, "--plot", PLOT_SUFFIXES)
    table = compare(args.runs)
    print(to_markdown(table))
    if args.json:
        atomic_write_json(args.json, table)
    if args.plot:
        plot(table, args.plot, title=args.title)
    return 0

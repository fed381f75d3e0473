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
    p.add_argument(
        "--funnel-plot",
        metavar="OUT.png",
        help="write the evidence audit's funnels (runs evaluated with --audit) as stacked bars",
    )


def run(args: argparse.Namespace) -> int:
    from chunkwise.eval.compare import PLOT_SUFFIXES, check_output_file, compare, plot, to_markdown
    from chunkwise.io import atomic_write_json

    if args.json:
        check_output_file(args.json, "--json")
    if args.plot:
        check_output_file(args.plot, "--plot", PLOT_SUFFIXES)
    if args.funnel_plot:
        check_output_file(args.funnel_plot, "--funnel-plot", PLOT_SUFFIXES)
    table = compare(args.runs)
    print(to_markdown(table))
    funnels = _funnels(table, args)
    if funnels is not None:
        table["funnels"] = funnels
    if args.json:
        atomic_write_json(args.json, table)
    if args.plot:
        plot(table, args.plot, title=args.title)
    return 0


def _funnels(table: dict, args: argparse.Namespace) -> dict | None:
    """The evidence audit's funnels of the runs that have one, printed under the table
    (:mod:`chunkwise.eval.funnels`); None when no run has one and no funnel plot is asked."""
    from chunkwise.eval import funnels

    runs = table["runs"]
    found = funnels.load_funnels([r["path"] for r in runs], [r["label"] for r in runs])
    if not found["tasks"] and not args.funnel_plot:
        return None
    print("\n" + funnels.to_markdown(found))
    if args.funnel_plot:
        funnels.plot(found, args.funnel_plot, title=args.title)
    return found

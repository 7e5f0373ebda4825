"""The git-tune command line: parse, call a library function, render.

Exit codes: the table in errors.py (also in README.md), mapped in TuneGroup.
"""
import shutil
import signal
import sys
from types import FrameType
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Tuple, TypeVar

import click

from . import __version__
from .advisor.measure import search
from .errors import GitTuneError, Interrupted, UsageError, WouldChange
from .output import emit, say

if TYPE_CHECKING:   # imported where a command runs: the CLI starts fast
    from .advisor.auto import Question
    from .advisor.measure.record import Calibration, Options
    from .probes.report import ProbeReport

EXIT_INTERRUPTED = Interrupted.exit_code
# A command function, as click's decorators take and return it.
F = TypeVar("F", bound=Callable[..., Any])


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True,
                        help="Print the full result as JSON (stable, versioned schema).")(f)


def repo_option(f: F) -> F:
    return click.option("--repo", "repo", type=click.Path(file_okay=False),
                        help="The repository (default: the one containing the current directory).")(f)


def scope_option(default: str = "global") -> Callable[[F], F]:
    return click.option("--scope", default=default, show_default=True,
                        help="Where to write: global, system, local or file:PATH.")


def _verifiable() -> Tuple[str, ...]:
    """The workloads verify can time. Where a key catalogue (GIT_TUNE_KEYS) cannot be
    read, the built-in ones: the command then says why, with its exit code, as every
    command does, not a traceback at start."""
    from .models import workloads
    try:
        return workloads.verified()
    except UsageError:
        return workloads.built_in_verified()


def workload_option(f: F) -> F:
    from .models import workloads
    return click.option("--workload", type=click.Choice(sorted(workloads.profiles())),
                        default="mixed", show_default=True,
                        help="Whose day to optimise for (models/workloads.toml).")(f)


def override_option(f: F) -> F:
    return click.option("--override", is_flag=True,
                        help="Write keys the user already set elsewhere too.")(f)


def dry_run_option(f: F) -> F:
    return click.option("--dry-run", is_flag=True,
                        help="Show what would change; write nothing at all.")(f)


def _version_text() -> str:
    from .engine import _lib
    try:
        path = _lib.loaded_path()
        abi = _lib.lib().gt_abi_version()
        engine = f"engine ABI {abi} ({path})"
    except GitTuneError as e:
        engine = f"engine unavailable: {e}"
    return f"git-tune {__version__}, {engine}"


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        say(_version_text())
        ctx.exit(0)


class TuneGroup(click.Group):
    """Maps typed errors to exit codes in one place, for every subcommand."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (KeyboardInterrupt, Interrupted):
            from .advisor.write.configwrite import written_this_run
            if written_this_run:
                scopes = ", ".join(dict.fromkeys(written_this_run))
                say(f"git-tune: interrupted after writing to scope {scopes}; scratch "
                           "files were removed; see: git-tune show; undo: git-tune revert "
                           f"--scope {written_this_run[-1]}", err=True)
            else:
                say("git-tune: interrupted; scratch files were removed, nothing was "
                           "changed", err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except GitTuneError as e:
            say(f"git-tune: {e}", err=True)
            ctx.exit(e.exit_code)


def _use_git(ctx: click.Context, _param: click.Parameter, value: Optional[str]) -> Optional[str]:
    """--git PATH / GIT_TUNE_GIT: every git that git-tune starts is this one (its directory
    goes first on PATH, so git's own children resolve the same way)."""
    if value and not ctx.resilient_parsing:
        import os
        path = os.path.abspath(value)
        if os.path.basename(path) != "git" or not os.access(path, os.X_OK):
            raise click.BadParameter(f"'{value}' is not an executable named git", param=_param)
        os.environ["PATH"] = os.path.dirname(path) + os.pathsep + os.environ.get("PATH", "")
    return value


@click.group(cls=TuneGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=_print_version, help="Show the version, engine ABI and library path.")
@click.option("--git", "git_path", envvar="GIT_TUNE_GIT", expose_value=False, is_eager=True,
              callback=_use_git, type=click.Path(exists=True, dir_okay=False),
              help="The git to tune and time (default: git on PATH).")
def cli() -> None:
    """Measure this host's storage and CPUs, then tune Git's performance settings for it.

    \b
    Examples:
      git-tune auto --demo             try it on a generated repository
      git-tune auto --repo ~/src/big   tune for a repository (shows, asks)
      git-tune show                    what was written; is it current?
      git-tune revert --scope global   put the config back as it was
    """
    if click.get_current_context().invoked_subcommand != "agent":
        _revive_collector()


def _revive_collector() -> None:
    """Where the agent is enabled and its collector is not running (a logout, a reboot,
    a kill), any git-tune command starts it again and says so once, on stderr."""
    from .advisor.agent import revive
    note = revive.revive()
    if note:
        say(f"git-tune: {note}", err=True)


@cli.command()
@repo_option
@click.option("--thorough", is_flag=True,
              help="Measure more samples and run git's untracked-cache test (seconds).")
@json_option
def probe(repo: Optional[str], thorough: bool, as_json: bool) -> None:
    """Report the host, its storage, the cache state, git and the repository."""
    from .views import probe_view
    from .probes.report import probe as run_probe
    from .advisor.measure import peaks_seen
    report = run_probe(repo, thorough=thorough)
    seen = peaks_seen.largest(report)
    emit({**report.to_dict(), "measured_peak": seen.to_dict() if seen else None}, as_json,
         probe_view, "probe")


class Finite(click.ParamType):  # type: ignore[type-arg]
    """A finite number within [low, high] (float() alone takes nan and inf)."""

    name = "number"

    def __init__(self, low: float, high: float, unit: str = "seconds") -> None:
        self.low, self.high, self.unit = low, high, unit

    def convert(self, value: Any, param: Optional[click.Parameter],
                ctx: Optional[click.Context]) -> float:
        import math
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of {self.unit}", param, ctx)
        if not math.isfinite(seconds) or not self.low <= seconds <= self.high:
            self.fail(f"{value!r} is not between {self.low:g} and {self.high:g} {self.unit}",
                      param, ctx)
        return seconds


BUDGET = Finite(1.0, 86400.0)


def budget_option(f: F) -> F:
    return click.option("--budget", type=BUDGET, default=20.0, show_default=True,
                        help="Seconds the calibration may take.")(f)


def strategy_option(f: F) -> F:
    # The default is whichever strategy won bench/search_strategies.py.
    return click.option("--strategy", type=click.Choice(sorted(search.STRATEGIES)),
                        default=search.DEFAULT_STRATEGY, show_default=True,
                        help="How sweep points are chosen.")(f)


# Every real-git comparison (calibrate, auto, verify): 5 runs a side is the least that can
# show a change (stats.MIN_RUNS); past 100 a comparison outlasts any budget a person waits.
runs_option = click.option("--runs", type=click.IntRange(5, 100), default=5, show_default=True,
                           help="Runs of each side in every real-git comparison, interleaved "
                                "(more: narrower intervals; 5 is the least that can show a "
                                "change).")


def calibration_options(f: F) -> F:
    f = budget_option(f)
    f = strategy_option(f)
    f = click.option("--seed", type=int, default=0, show_default=True,
                     help="Seed of the search's order and of the intervals' resampling.")(f)
    f = click.option("--cold", is_flag=True,
                     help="Measure lstat with a cold cache (drops caches as root).")(f)
    return runs_option(f)


def plot_option(f: F) -> F:
    return click.option("--plot", "plot_file", type=click.Path(dir_okay=False),
                        help="Write the sweep curves as a PNG.")(f)


# What each phase of a calibration is, in the words of the one waiting for it.
PHASES = {"settle": "waiting for the disk", "preload": "timing git status",
          "checkout": "timing checkouts", "index": "timing index reads",
          "untracked": "timing the untracked cache", "fsmonitor": "timing fsmonitor",
          "pack": "timing clone's indexing", "packmem": "measuring repack memory",
          "validate": "checking with real git",
          "done": "done"}


def _progress_bar() -> Tuple[Optional[Callable[[str, float], None]], Callable[[], None]]:
    """A progress bar on a terminal's stderr; returns (callback, close). The bar starts
    with the first progress a calibration reports: a reused calibration shows none, and
    what was said before it is on lines of its own."""
    if not sys.stderr.isatty():
        return None, lambda: None
    # "<label>  [<bar>]  100%  00:00:07": the line never reaches the last column, or the
    # terminal wraps it and every redraw stacks a new line.
    columns = shutil.get_terminal_size((80, 24)).columns
    bar_width = max(8, min(24, columns // 4))
    label_width = max(10, columns - bar_width - 25)
    bar: Optional[Any] = None           # click's ProgressBar, once progress is reported
    done = 0                            # of 1000

    def update(phase: str, fraction: float) -> None:
        nonlocal bar, done
        if bar is None:
            bar = click.progressbar(length=1000, label="calibrating", file=sys.stderr,
                                    width=bar_width)
            bar.__enter__()
        label = f"calibrating: {PHASES.get(phase, phase)}"
        bar.label = (label[:label_width - 1] + "…" if len(label) > label_width
                     else label.ljust(label_width))
        # A calibration done under its budget is done: the bar is full.
        step = max(0, (1000 if phase == "done" else int(fraction * 1000)) - done)
        # A redraw per report, so the label moves on: click redraws on a step only.
        if step:
            bar.update(step)
        else:
            bar.render_progress()
        done += step

    def close() -> None:
        """End the bar's line (once): what is said next starts on a line of its own."""
        nonlocal bar, done
        if bar is not None:
            bar.__exit__(None, None, None)
            bar, done = None, 1000
    return update, close


def _options(budget: float, strategy: str, seed: int, cold: bool, runs: int,
             workload: str = "mixed") -> "Options":
    from .advisor.measure.record import Options
    return Options(budget=budget, strategy=strategy, seed=seed, cold=cold, runs=runs,
                   workload=workload)


def _run_calibration(report: "ProbeReport", options: "Options") -> "Calibration":
    from .advisor.measure.calibrate import calibrate as run
    update, close = _progress_bar()
    try:
        return run(report, options, update)
    finally:
        close()


@cli.command()
@repo_option
@workload_option
@calibration_options
@plot_option
@json_option
def calibrate(repo: Optional[str], workload: str, budget: float, strategy: str, seed: int,
              cold: bool, runs: int, plot_file: Optional[str], as_json: bool) -> None:
    """Run the engine sweeps and real-git A/B runs; store the raw results."""
    from .advisor.measure.calibrate import probe_repository
    from .views import calibration_view
    record = _run_calibration(probe_repository(repo, budget),
                              _options(budget, strategy, seed, cold, runs, workload)).to_json()
    if plot_file:
        from . import plot
        plot.sweeps(record, plot_file)
    emit(record, as_json, calibration_view, "calibration")


@cli.command()
@click.option("--repo", "repos", multiple=True, type=click.Path(file_okay=False),
              help="A repository; repeat for several (default: the current one).")
@click.option("--scan", "scan_dir", type=click.Path(file_okay=False),
              help="Recommend for every repository found below this directory.")
@workload_option
@click.option("--recalibrate", is_flag=True, help="Ignore a stored calibration.")
@click.option("--write", is_flag=True,
              help="With several repositories: write shared values and includeIf blocks.")
@scope_option()
@calibration_options
@plot_option
@json_option
def recommend(repos: Tuple[str, ...], scan_dir: Optional[str], workload: str, recalibrate: bool,
              write: bool, scope: str, budget: float, strategy: str, seed: int, cold: bool,
              runs: int, plot_file: Optional[str], as_json: bool) -> None:
    """Recommend settings, each with its measured gain and reason (reuses a fresh calibration)."""
    from .advisor.measure.calibrate import load_fresh, probe_repository
    from .advisor.decide.recommend import recommend as advise
    from .views import recommend_view
    if scan_dir or len(repos) > 1 or write:
        from .advisor.fleet import multirepo
        targets = list(repos) + (multirepo.scan(scan_dir) if scan_dir else [])
        if not targets:
            raise click.UsageError("no repositories given or found")
        update, close = _progress_bar()
        try:
            many = multirepo.recommend_many(targets, workload,
                                            _options(budget, strategy, seed, cold, runs, workload),
                                            update)
        finally:
            close()
        data = many.to_dict()
        if write:
            data["written"] = multirepo.write_many(many, scope)
        from .views import multi_view
        emit(data, as_json, multi_view, "calibrations")
        return
    report = probe_repository(repos[0] if repos else None, budget)
    record = None if recalibrate else load_fresh(report, workload, budget)
    if record is None:
        record = _run_calibration(report, _options(budget, strategy, seed, cold, runs, workload))
    advice = advise(record, workload).to_dict()
    if plot_file:
        from . import plot
        plot.recommendation(record.to_json(), advice, plot_file)
    emit(advice, as_json, recommend_view, "recommendation")


class _Confirmer:
    """--yes answers yes; a terminal is asked, after the recommendation and the diff
    are shown (`shown` then says the final output need not repeat them); without a
    terminal nobody can be asked, and nothing is written."""

    def __init__(self, yes: bool, as_json: bool,
                 before_asking: Callable[[], None] = lambda: None,
                 explain: bool = False) -> None:
        self.yes, self.as_json, self.shown, self.explain = yes, as_json, False, explain
        self.before_asking = before_asking      # the progress bar's line ended first

    def __call__(self, question: "Question") -> Optional[bool]:
        if self.yes and not question.own_yes:
            return True
        if not (sys.stdin.isatty() and sys.stderr.isatty()):
            return None
        self.before_asking()
        if question.preview is not None and not self.as_json and not self.shown:
            from .output import fit, width
            from .views import auto_preview
            say(fit(auto_preview(question.preview, self.explain), width()))
            self.shown = True
        return click.confirm(question.text, default=question.default, err=True)


@cli.command()
@repo_option
@click.option("--demo", is_flag=True, help="Tune a generated 10,000-file demo repository.")
@scope_option()
@workload_option
@budget_option
@strategy_option
@runs_option
@dry_run_option
@click.option("--yes", "-y", is_flag=True, help="Do not ask before writing.")
@override_option
@click.option("--recalibrate", is_flag=True, help="Ignore a stored calibration.")
@click.option("--no-verify", is_flag=True, help="Skip the real-git check after writing.")
@click.option("--explain", "-v", is_flag=True,
              help="Show the whole recommendation (every key and why), the findings and "
                   "the diff, not only the summary.")
@click.option("--even-if-busy", is_flag=True, envvar="GIT_TUNE_WRITE_WHEN_BUSY",
              help="Write even where other processes kept the host busy while measuring "
                   "(a CI runner never idle); the values may flip between runs.")
@click.option("--format-changes", is_flag=True,
              help="Also write, at global or system scope, values that change the index's "
                   "format (other tools may not read it); --yes alone never does.")
@json_option
def auto(repo: Optional[str], demo: bool, scope: str, workload: str, budget: float, strategy: str,
         runs: int, dry_run: bool, yes: bool, override: bool, recalibrate: bool, no_verify: bool,
         explain: bool, even_if_busy: bool, format_changes: bool, as_json: bool) -> None:
    """Probe, calibrate, recommend, write the config safely and verify the gain.

    It shows the recommendation and the diff, then asks (global and system scopes
    default to No); without a terminal it writes only with --yes.

    \b
    Examples:
      git-tune auto --repo ~/src/big --dry-run   look, write nothing
      git-tune auto --repo . --scope local       this repository only
      git-tune auto --repo . --budget 60 --yes   longer; no question
    """
    from .advisor.auto import AutoOptions, auto as run_auto, demo_repo
    from .views import auto_view, next_steps
    from .output import chatter
    if demo:
        if repo:
            raise click.UsageError("--demo and --repo exclude each other")
        repo = demo_repo(say=lambda m: chatter(f"git-tune: {m}"))
        if scope == "global":
            scope = "local"  # the demo never touches the user's own config
    update, close = _progress_bar()
    try:
        options = AutoOptions(scope=scope, workload=workload, budget=budget, strategy=strategy,
                              runs=runs, dry_run=dry_run, override=override,
                              recalibrate=recalibrate, verify=not no_verify,
                              format_changes=format_changes, even_if_busy=even_if_busy)
        confirm = _Confirmer(yes, as_json, before_asking=close, explain=explain)

        def say(message: str) -> None:
            close()         # the bar's line ends first: "verifying" starts a line of its own
            chatter(f"git-tune: {message}")
        result = run_auto(repo, options, confirm, update, say=say)
    finally:
        close()
    emit(result, as_json, lambda r: "\n".join(
        [auto_view(r, preview_shown=confirm.shown, explain=explain),
         *next_steps(r, demo=demo)]), "auto")


@cli.command()
@repo_option
@runs_option
@click.option("--cold", is_flag=True, help="Drop caches before every run (root), or say why not.")
@click.option("--workload", "workloads", multiple=True,
              type=click.Choice(_verifiable()),
              help="Only these workloads (default: all).")
@click.option("--set", "candidate", multiple=True, metavar="KEY=VALUE",
              help="Time these values instead of the ones in force.")
@plot_option
@json_option
def verify(repo: Optional[str], runs: int, cold: bool, workloads: Tuple[str, ...],
           candidate: Tuple[str, ...], plot_file: Optional[str], as_json: bool) -> None:
    """Time real git before and after git-tune's values, with confidence intervals.

    \b
    Examples:
      git-tune verify --repo .                     the values applied
      git-tune verify --set checkout.workers=8     a value of your own
    """
    from .advisor.measure import verify as verify_mod
    from .views import verify_view
    after = verify_mod.values_to_verify(candidate)
    report = verify_mod.verify(repo, after, runs=runs, cold=cold,
                               workloads=tuple(workloads) or verify_mod.all_workloads(after))
    if plot_file:
        from . import plot
        plot.verify(report.to_dict(), plot_file)
    emit(report.to_dict(), as_json, verify_view, "verify")


@cli.command(name="set")
@click.argument("assignments", nargs=-1, required=True, metavar="KEY=VALUE...")
@repo_option
@scope_option()
@override_option
@dry_run_option
@json_option
def set_values(assignments: Tuple[str, ...], repo: Optional[str], scope: str, override: bool,
               dry_run: bool, as_json: bool) -> None:
    """Write values yourself, through the same safe path as auto (validated, backed up)."""
    from .advisor.write.manual import set_values as run_set
    from .views import write_view
    emit(run_set(assignments, repo, scope, override=override, dry_run=dry_run), as_json,
         write_view, "write")


@cli.command()
@click.option("--max-age", type=Finite(0, 1e6, "days"), default=90, show_default=True,
              help="Days after which applied values count as stale.")
@json_option
def show(max_age: float, as_json: bool) -> None:
    """List what git-tune applied, where, and whether it is stale."""
    from dataclasses import asdict
    from .advisor.write.show import show as run_show
    from .views import show_view
    emit({"applied": [asdict(a) for a in run_show(max_age)]}, as_json, show_view, "show")


@cli.command()
@repo_option
@click.option("--scope", default=None, help="The scope to revert (default: the only one written).")
@json_option
def revert(repo: Optional[str], scope: str, as_json: bool) -> None:
    """Restore the config files git-tune touched to their exact earlier bytes."""
    from dataclasses import asdict
    from .advisor.write.revert import nothing_to_revert, revert as revert_scope, target
    scope_to_revert = target(scope, repo)
    # Nothing of git-tune's there is the state the user asked for (exit 0).
    result = revert_scope(scope_to_revert) if scope_to_revert else nothing_to_revert(None)
    emit(asdict(result), as_json, lambda r: r["message"], "revert")


@cli.group()
def agent() -> None:
    """Watch what your own git commands cost (trace2), the rehash storms, and keep tuning
    on them: drift re-tuned when idle, experiments on your own commands."""


@agent.command("enable")
@repo_option
@click.option("--all", "watch_all", is_flag=True, help="Keep every repository's commands.")
@json_option
def agent_enable(repo: Optional[str], watch_all: bool, as_json: bool) -> None:
    """Route git's trace2 events to git-tune's collector (global config, revertable)."""
    from .advisor.agent import switch
    from .views import agent_enable_view
    emit(switch.enable(repo, watch_all), as_json, agent_enable_view, "agent")


@agent.command("disable")
@click.option("--forget", is_flag=True, help="Delete the records too.")
@json_option
def agent_disable(forget: bool, as_json: bool) -> None:
    """Stop the collector and put the global config back byte for byte."""
    from .advisor.agent import switch
    emit(switch.disable(forget), as_json, lambda r: r["reverted"]["message"], "agent")


@agent.command("status")
@json_option
def agent_status(as_json: bool) -> None:
    """Whether events are routed and collected, and how much is stored."""
    from .advisor.agent import switch
    from .views import agent_status_view
    emit(switch.status(), as_json, agent_status_view, "agent")


@agent.command("start")
@json_option
def agent_start(as_json: bool) -> None:
    """Start the collector if it is not running (after a reboot)."""
    from dataclasses import asdict
    from .advisor.agent import collector
    emit(asdict(collector.start()), as_json,
         lambda r: f"collector running, pid {r['pid']}" if r["running"] else
         "the collector did not start: see collector.log in the agent directory", "agent")


@agent.command("run", hidden=True)
def agent_run() -> None:
    """The collector's loop (started by enable/start)."""
    from .advisor.agent import collector, switch
    collector.run(switch.load, switch.collect, switch.tend)


@agent.command("retune")
@click.option("--budget", type=Finite(1, 3600, "seconds"), default=20, show_default=True,
              help="Seconds each re-calibration may take.")
@json_option
def agent_retune(budget: float, as_json: bool) -> None:
    """Re-tune now what has drifted (git upgraded, host or repository changed): only keys
    that change nothing but speed; others are named for `git-tune auto` to ask about."""
    from .advisor.agent import switch
    from .views import agent_retune_view
    emit(switch.retune_now(budget), as_json, agent_retune_view, "agent-retune")


@agent.command("experiment")
@click.argument("assignment", required=False, metavar="KEY=VALUE")
@repo_option
@scope_option("local")
@click.option("--stop", is_flag=True, help="End the running experiment; the values as before.")
@click.option("--yes", "-y", is_flag=True,
              help="Allow a key that changes more than speed (an index extension, what "
                   "git notices); the agent never starts one on its own.")
@json_option
def agent_experiment(assignment: Optional[str], repo: Optional[str], scope: str, stop: bool,
                     yes: bool, as_json: bool) -> None:
    """Try a value on your own commands against the one in force.

    \b
    The two alternate in slots of 6 commands the key affects; the
    candidate stays only when faster beyond noise, and is dropped at
    once when a command fails under it. A key that changes more than
    speed only with --yes. Examples:
      git-tune agent experiment checkout.workers=8 --repo ~/src/big
      git-tune agent experiment core.untrackedCache=true --yes --repo ~/src/big
      git-tune agent status              how far it is
      git-tune agent experiment --stop   the value from before it back
    \b
    It runs in the repository's own scope (local) unless --scope names a
    wider one. Your own writes win: a value you set meanwhile (git-tune set,
    auto, revert, git config) ends the experiment and stays as you wrote it.
    """
    from .advisor.agent import experiment
    if stop:
        emit({"stopped": experiment.stop()}, as_json,
             lambda r: "experiment stopped; the value from before it is back" if r["stopped"]
             else "no experiment was running", "agent")
        return
    if not assignment:
        raise click.UsageError("name KEY=VALUE to try, or --stop")
    from .models import catalogue
    key, value = catalogue.parse_assignment(assignment)
    exp = experiment.start(scope, key, value, repo, yes=yes)
    emit(experiment.status() or {}, as_json,
         lambda r: f"experiment on {exp.key}: "
                   f"{experiment.shown(exp, experiment.APPROVED)} against "
                   f"{exp.candidate}, {experiment.SLOT_COMMANDS} commands a slot; "
                   "git-tune agent status follows it", "agent")


@agent.command("log")
@json_option
def agent_log(as_json: bool) -> None:
    """Every re-tune and experiment of the agent's, with its reasons and evidence."""
    from .advisor.agent import retune
    from .views import agent_log_view
    emit({"retunes": retune.log()}, as_json, agent_log_view, "agent-log")


@agent.command("report")
@repo_option
@click.option("--since", type=Finite(0, 1e9, "hours"), default=None,
              help="Only commands of the last N hours.")
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False),
              help="Write each command's latencies per set of values as a PNG.")
@json_option
def agent_report(repo: Optional[str], since: Optional[float], plot_file: Optional[str],
                 as_json: bool) -> None:
    """Your commands' latencies (median, p90) per set of values in force; storms."""
    from .advisor.agent import report, store, switch
    from .views import agent_report_view
    switch.collect()
    data = report.report(report.select(store.records(), repo, since * 3600 if since else None))
    if plot_file:
        from . import plot
        data["plot"] = plot.agent(data, plot_file)
    emit(data, as_json, agent_report_view, "agent-report")


@cli.group()
def profile() -> None:
    """Fleet profiles: measured once per host class, applied everywhere in it."""


@profile.command("export")
@repo_option
@workload_option
@budget_option
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write the profile here.")
@json_option
def profile_export(repo: Optional[str], workload: str, budget: float, output: Optional[str],
                   as_json: bool) -> None:
    """Export this host's measured recommendation as a versioned JSON profile."""
    import json
    from .advisor.fleet import profiles
    from .advisor.measure.calibrate import calibrate as run, load_fresh, probe_repository
    from .advisor.measure.record import Options
    from .advisor.decide.recommend import recommend as advise
    report = probe_repository(repo, budget)
    record = load_fresh(report, workload) or run(report, Options(budget=budget, workload=workload))
    from .advisor.agent import retune
    data = profiles.export(report, record, advise(record, workload), retune.log())
    if output:
        from .advisor.write.safefile import write_atomic
        write_atomic(output, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode())
    emit(data, as_json or not output, lambda d: "", "profile")
    if output and not as_json:
        say(f"wrote {output}", err=True)


@cli.command()
@click.argument("profile_path", metavar="PROFILE", type=click.Path(dir_okay=False))
@repo_option
@scope_option()
@click.option("--check", is_flag=True, help="Change nothing; exit 0 if already applied, 6 if it would change.")
@click.option("--diff", "show_diff", is_flag=True, help="Show the change as a diff (it is written too; with --check only shown).")
@click.option("--force", is_flag=True, help="Apply even where the host is not of the profile's class.")
@override_option
@json_option
def apply(profile_path: str, repo: Optional[str], scope: str, check: bool, show_diff: bool,
          force: bool, override: bool, as_json: bool) -> None:
    """Apply a fleet profile without calibrating, if this host is of its class."""
    from .advisor.fleet.apply import apply_profile
    from .views import apply_view
    result = apply_profile(profile_path, scope, repo, check=check, force=force,
                           override=override)
    emit(result, as_json, lambda r: apply_view(r, show_diff), "apply")
    if check and result["would_change"]:
        raise WouldChange("this host is not in the profile's state (--check: nothing was written)")


@cli.group()
def fleet() -> None:
    """Work on many hosts' profiles."""


@fleet.command("merge")
@click.argument("profile_paths", metavar="PROFILE...", nargs=-1, required=True,
                type=click.Path(dir_okay=False))
@click.option("--output-dir", type=click.Path(file_okay=False),
              help="Write one merged profile per host class here.")
@json_option
def fleet_merge(profile_paths: Tuple[str, ...], output_dir: Optional[str], as_json: bool) -> None:
    """Merge many hosts' profiles into one profile per host class, with the spread."""
    import json
    import os
    from dataclasses import asdict
    from .advisor.fleet import profiles
    from .views import merge_view
    loaded, repeats = profiles.load_each_once(profile_paths)
    for r in repeats:
        say(f"warning: {r}", err=True)
    merged = profiles.merge(loaded)
    files = []
    if output_dir:
        from .advisor.write.safefile import write_atomic
        os.makedirs(output_dir, exist_ok=True)
        for m in merged:
            name = "-".join(str(v) for v in m.profile["class"].values())
            name = "".join(c if c.isalnum() or c in "-." else "_" for c in name) + ".json"
            path = os.path.join(output_dir, name)
            write_atomic(path, (json.dumps(m.profile, indent=1, sort_keys=True) + "\n").encode())
            files.append(path)
    data = {"classes": [asdict(m) for m in merged], "files": files}
    emit(data, as_json, merge_view, "fleet-merge")
    for m in merged:
        for w in m.warnings:
            say(f"warning: {w}", err=True)


def _terminate(signum: int, _frame: Optional[FrameType]) -> None:
    # SIGTERM unwinds like Ctrl-C so scratch directories are removed.
    raise KeyboardInterrupt


def main(argv: Optional[List[str]] = None) -> None:
    signal.signal(signal.SIGTERM, _terminate)
    # An ignored SIGCHLD is inherited (a hook's or a service manager's): with it the
    # kernel reaps git itself, and every git's exit status would read as 0.
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    cli.main(args=argv, prog_name="git-tune")

"""The git-tune command line: parse, call a library function, render.

Exit codes (also in README.md): 0 success; 1 unexpected error; 2 usage;
3 engine; 4 git; 5 config write refused or failed; 6 would change (apply
--check); 130 interrupted.
"""
import signal
import sys

import click

from git_tune import __version__
from git_tune.errors import GitTuneError, Interrupted
from git_tune.output import emit

EXIT_OK = 0
EXIT_UNEXPECTED = 1
EXIT_INTERRUPTED = 130


def json_option(f):
    return click.option("--json", "as_json", is_flag=True,
                        help="Print the full result as JSON (stable, versioned schema).")(f)


def repo_option(f):
    return click.option("--repo", "repo", type=click.Path(file_okay=False),
                        help="The repository (default: the one containing the current directory).")(f)


def _version_text() -> str:
    from git_tune.engine import _lib
    try:
        path = _lib.loaded_path()
        abi = _lib.lib().gt_abi_version()
        engine = f"engine ABI {abi} ({path})"
    except GitTuneError as e:
        engine = f"engine unavailable: {e}"
    return f"git-tune {__version__}, {engine}"


def _print_version(ctx, _param, value):
    if value and not ctx.resilient_parsing:
        click.echo(_version_text())
        ctx.exit(0)


class TuneGroup(click.Group):
    """Maps typed errors to exit codes in one place, for every subcommand."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (KeyboardInterrupt, Interrupted):
            click.echo("git-tune: interrupted; scratch files were removed, nothing was changed",
                       err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except GitTuneError as e:
            click.echo(f"git-tune: {e}", err=True)
            ctx.exit(e.exit_code)


@click.group(cls=TuneGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=_print_version, help="Show the version, engine ABI and library path.")
def cli():
    """Measure this host's storage and CPUs, then tune Git's performance settings for it."""


@cli.command()
@repo_option
@click.option("--thorough", is_flag=True,
              help="Measure more samples and run git's untracked-cache test (seconds).")
@json_option
def probe(repo, thorough, as_json):
    """Report the host, its storage, the cache state, git and the repository."""
    from git_tune.advisor.views import probe_view
    from git_tune.probes.report import probe as run_probe
    emit(run_probe(repo, thorough=thorough).to_dict(), as_json, probe_view)


def calibration_options(f):
    f = click.option("--budget", type=float, default=20.0, show_default=True,
                     help="Seconds the calibration may take (real git runs may need more).")(f)
    f = click.option("--strategy", type=click.Choice(["gp", "grid", "random", "coordinate"]),
                     default="gp", show_default=True, help="How sweep points are chosen.")(f)
    f = click.option("--seed", type=int, default=0, show_default=True)(f)
    f = click.option("--cold", is_flag=True,
                     help="Measure lstat with a cold cache (drops caches as root).")(f)
    f = click.option("--runs", type=click.IntRange(5, 100), default=5, show_default=True,
                     help="Real git runs per setting in each A/B comparison.")(f)
    return f


def plot_option(f):
    return click.option("--plot", "plot_file", type=click.Path(dir_okay=False),
                        help="Write the sweep curves as a PNG.")(f)


def _progress_bar():
    """A progress bar on a terminal's stderr; returns (callback, close)."""
    if not sys.stderr.isatty():
        return None, lambda: None
    bar = click.progressbar(length=1000, label="calibrating", file=sys.stderr)
    bar.__enter__()
    state = {"done": 0}

    def update(phase, fraction):
        bar.label = f"calibrating ({phase})"
        step = int(fraction * 1000) - state["done"]
        if step > 0:
            bar.update(step)
            state["done"] += step
    return update, lambda: bar.__exit__(None, None, None)


def _run_calibration(repo, budget, strategy, seed, cold, runs):
    from git_tune.advisor.calibrate import Options, calibrate as run
    update, close = _progress_bar()
    try:
        return run(repo, Options(budget, strategy, seed, cold, runs), update)
    finally:
        close()


@cli.command()
@repo_option
@calibration_options
@plot_option
@json_option
def calibrate(repo, budget, strategy, seed, cold, runs, plot_file, as_json):
    """Run the engine sweeps and real-git A/B runs; store the raw results."""
    from git_tune.advisor.views import calibration_view
    record = _run_calibration(repo, budget, strategy, seed, cold, runs)
    if plot_file:
        from git_tune.advisor import plot
        plot.sweeps(record, plot_file)
    emit(record, as_json, calibration_view)


@cli.command()
@repo_option
@click.option("--workload", type=click.Choice(["interactive", "ci", "mixed"]), default="mixed",
              show_default=True, help="Whose day to optimise for.")
@click.option("--recalibrate", is_flag=True, help="Ignore a stored calibration.")
@calibration_options
@plot_option
@json_option
def recommend(repo, workload, recalibrate, budget, strategy, seed, cold, runs, plot_file, as_json):
    """Recommend settings, each with its measured gain and reason (reuses a fresh calibration)."""
    from git_tune.advisor.calibrate import load_fresh
    from git_tune.advisor.recommend import recommend as advise
    from git_tune.advisor.views import recommend_view
    record = None if recalibrate else load_fresh(repo)
    if record is None:
        record = _run_calibration(repo, budget, strategy, seed, cold, runs)
    if plot_file:
        from git_tune.advisor import plot
        plot.sweeps(record, plot_file)
    emit(advise(record, workload).to_dict(), as_json, recommend_view)


def _terminate(signum, _frame):
    # SIGTERM unwinds like Ctrl-C so scratch directories are removed.
    raise KeyboardInterrupt


def main(argv=None):
    signal.signal(signal.SIGTERM, _terminate)
    cli.main(args=argv, prog_name="git-tune")

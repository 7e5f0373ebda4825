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


def _terminate(signum, _frame):
    # SIGTERM unwinds like Ctrl-C so scratch directories are removed.
    raise KeyboardInterrupt


def main(argv=None):
    signal.signal(signal.SIGTERM, _terminate)
    cli.main(args=argv, prog_name="git-tune")

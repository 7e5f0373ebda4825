"""The exceptions git-tune raises, and the exit code each maps to.

Commands never call sys.exit themselves: the CLI maps these in one place.
"""


class GitTuneError(Exception):
    """Base of every error git-tune reports to its user."""

    exit_code = 1


class UsageError(GitTuneError):
    """The user asked for something impossible (a missing --repo, ...)."""

    exit_code = 2


class EngineError(GitTuneError):
    """The C engine returned a negative status; `message` is its sentence."""

    exit_code = 3

    def __init__(self, status: int, name: str, message: str):
        super().__init__(message or name)
        self.status = status
        self.name = name
        self.message = message


class EngineLoadError(GitTuneError):
    """libgittune.so is missing, unloadable or of another ABI."""

    exit_code = 3


class GitError(GitTuneError):
    """git is missing or failed in a way that stops the command."""

    exit_code = 4


class ConfigWriteError(GitTuneError):
    """A config file could not be written; nothing was changed."""

    exit_code = 5


class Interrupted(GitTuneError):
    """Ctrl-C: work stopped and scratch files were removed."""

    exit_code = 130

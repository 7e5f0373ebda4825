"""The exceptions git-tune raises, and the exit code each maps to: the one table.

Commands never call sys.exit themselves: the CLI maps these in one place.

    0    success, including "nothing to change"
    1    unexpected error (a bug)
    2    UsageError: bad option or value, unknown key, malformed profile, not a repository
    3    EngineError, EngineLoadError: the C engine
    4    GitError: git missing or failing
    5    ConfigWriteError: config could not be written; nothing was changed
    6    WouldChange: apply --check found the host not in the profile's state
    7    Locked: another git-tune held the lock; nothing was changed
    8    ProfileMismatch: the host is not of the profile's class; nothing was changed
    9    UnsafeState: a directory or file of git-tune's own is not yours alone; refused
    130  Interrupted: Ctrl-C or SIGTERM; scratch removed, nothing changed
"""

EXIT_OK = 0
EXIT_UNEXPECTED = 1


class GitTuneError(Exception):
    """Base of every error git-tune reports to its user."""

    exit_code = 1


class UsageError(GitTuneError):
    """The user asked for something impossible (a missing --repo, ...)."""

    exit_code = 2


class EngineError(GitTuneError):
    """The C engine returned a negative status; `message` is its sentence."""

    exit_code = 3

    def __init__(self, status: int, name: str, message: str) -> None:
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


class WouldChange(GitTuneError):
    """`apply --check`: applying the profile would change this host."""

    exit_code = 6


class Locked(GitTuneError):
    """Another git-tune is writing configuration."""

    exit_code = 7


class ProfileMismatch(GitTuneError):
    """This host is not of the profile's class."""

    exit_code = 8


class UnsafeState(GitTuneError):
    """One of git-tune's own directories or files is not the user's alone (a link,
    another user's, writable by others); nothing was read from it or written to it."""

    exit_code = 9

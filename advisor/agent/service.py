"""The collector as a systemd user service, where the user has a systemd instance.

Then systemd starts it at login (and at boot, with lingering on) and again after a
crash; `agent enable` installs and starts the unit, `agent disable` stops and removes
it. Without a user instance (containers, ssh sessions without a systemd login, cron)
the collector runs detached, and any git-tune command starts it again when it is not
running (revive.py). Either way one collector runs: it holds a lock for its life.
"""
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

UNIT = "git-tune-agent.service"


@dataclass(frozen=True)
class ServiceState:
    installed: bool
    lingering: Optional[bool]       # None: unknown (no loginctl)
    note: str = ""


def _systemctl(*args: str) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(["systemctl", "--user", *args], capture_output=True, text=True,
                          timeout=30, stdin=subprocess.DEVNULL)


def available() -> bool:
    """Whether a systemd user instance answers here."""
    if not shutil.which("systemctl"):
        return False
    try:
        return _systemctl("show-environment").returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def unit_path() -> str:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return os.path.join(base, "systemd", "user", UNIT)


def unit_text(environ: Dict[str, Any]) -> str:
    """The unit: the collector of this git-tune's Python, in the environment it would
    be started with detached (no repository of the caller's, no trace2 of its own)."""
    keep = [f"Environment={k}={v}" for k, v in sorted(environ.items())
            if k in ("PATH", "HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME",
                     "GIT_TUNE_STATE_DIR", "GIT_TUNE_CACHE_DIR", "GIT_TRACE2_EVENT",
                     "GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM")
            and "\n" not in v]
    return "\n".join(["[Unit]", "Description=git-tune agent: git's trace2 events into records",
                      "", "[Service]", f"ExecStart={sys.executable} -m git_tune agent run",
                      "Restart=on-failure", "RestartSec=10", *keep, "",
                      "[Install]", "WantedBy=default.target", ""])


def _lingering() -> Optional[bool]:
    if not shutil.which("loginctl"):
        return None
    try:
        proc = subprocess.run(["loginctl", "show-user", str(os.getuid()), "-p", "Linger"],
                              capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return None if proc.returncode else proc.stdout.strip() == "Linger=yes"


def install(environ: Dict[str, Any]) -> ServiceState:
    """Write the unit, enable and start it; ServiceState(False, ...) where that failed
    (the detached collector is the fallback)."""
    path = unit_path()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    from ..write import safefile
    safefile.write_atomic(path, unit_text(environ).encode(), mode=0o644)
    problems: List[str] = []
    for args in (("daemon-reload",), ("enable", "--now", UNIT)):
        proc = _systemctl(*args)
        if proc.returncode:
            problems.append(f"systemctl --user {' '.join(args)}: {proc.stderr.strip()[:200]}")
    linger = _lingering()
    note = ("; ".join(problems) if problems else
            "" if linger is not False else
            f"the collector runs while you are logged in; `loginctl enable-linger "
            f"{os.environ.get('USER', '$USER')}` keeps it running after logout and at boot")
    return ServiceState(not problems, linger, note)


def remove() -> bool:
    """Stop, disable and remove the unit; whether there was one."""
    path = unit_path()
    if not os.path.exists(path):
        return False
    if available():
        _systemctl("disable", "--now", UNIT)
    os.unlink(path)
    if available():
        _systemctl("daemon-reload")
    return True

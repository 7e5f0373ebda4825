"""The collector started again where the agent is enabled and it is not running.

Nothing restarts a detached collector after a logout, a reboot or a kill; until one
runs, git's events wait in the spool (at most trace2.maxFiles of them, argv and all)
and nothing is recorded. Every git-tune command calls revive() first: a few stats where
the agent was never enabled, a read of the pid file where it was. `git-tune agent ...`
commands do not: they read the spool themselves, and status says the collector is down.
GIT_TUNE_AGENT_AUTOSTART=0 turns it off (the tests step the agent by hand).
"""
import os
import time
from typing import Optional

from ... import ownpaths
from ...errors import GitTuneError


def revive() -> Optional[str]:
    """Start the collector where the agent is enabled and routed and none runs; what to
    tell the user (None: nothing was done). Never raises: a command is not failed by
    the agent's state."""
    if os.environ.get("GIT_TUNE_AGENT_AUTOSTART", "1") == "0":
        return None
    try:
        state_file = os.path.join(ownpaths.state_dir(create=False), "agent", "agent.json")
        if not os.path.exists(state_file):
            return None
        from . import collector, store, switch
        state = switch.load()
        if not state.enabled or not switch.routed() or collector.running().running:
            return None
        last = store.last_record_at()
        started = collector.start()
    except (GitTuneError, OSError, ValueError):
        return None
    since = (time.strftime(" (its last record: %Y-%m-%d %H:%M)", time.localtime(last))
             if last else "")
    if not started.running:
        return ("the agent's collector is not running and did not start: see collector.log "
                "in the agent directory")
    return f"the agent's collector was not running{since}; started it again"

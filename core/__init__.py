"""git-tune: measure this host, then tune Git's performance settings for it."""

__version__ = "0.1.0"

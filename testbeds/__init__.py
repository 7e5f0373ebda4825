"""Storage test beds for tests and benchmarks: real file systems of different kinds.

Every bed is a context manager that mounts, yields a path, and always
unmounts and removes what it made (on failure and Ctrl-C too). Beds that
need root or a missing tool raise BedUnavailable with the reason, which
tests turn into a skip.
"""
from testbeds.mount import BedUnavailable, bed, available  # noqa: F401
from testbeds.slow import LOCAL_LIKE, NFS_NOCACHE, NFS_POSITIVE, Latency, hdd, latfs  # noqa: F401

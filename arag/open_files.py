"""The process's limit on open files, raised to what its connections need.

Every connection is a file descriptor, and many systems start processes with a soft limit of 1,024
and a much higher hard limit, so thousands of episodes in flight would fail with "Too many open
files" for a reason no setting names. The soft limit is raised up to the hard one (no privileges
needed); where even that is too low, the caller gets a warning naming `ulimit -n`.
"""

from __future__ import annotations

HEADROOM = 256  # model files, Parquet parts, logs, sockets of the runtime itself


def ensure_open_files(connections: int, what: str) -> str | None:
    """Raise the soft limit to `connections` + HEADROOM where it is lower; None when it suffices,
    else a warning saying what `what` (e.g. "serve.max_connections=4000") needs."""
    try:
        import resource
    except ImportError:  # not a POSIX system: nothing to raise
        return None
    needed = int(connections) + HEADROOM
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return None
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        target = soft
    if target >= needed:
        return None
    return (
        f"{what} needs about {needed} open files (one per connection, plus {HEADROOM}), but this process may open {target} "
        f"(its hard limit): connections beyond it fail with 'Too many open files'; raise the limit (ulimit -n {needed}) before starting it"
    )

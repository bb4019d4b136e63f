"""The process's limit on open files, raised to what its connections need: many systems start
processes with a soft limit of 1,024, so thousands of connections would fail with "Too many open
files" for a reason no setting names. The soft limit rises up to the hard one (no privileges needed).
"""

from __future__ import annotations

HEADROOM = 256  # model files, Parquet parts, logs, sockets of the runtime itself


def ensure_open_files(connections: int, what: str) -> str | None:
    """Raise the soft limit to `connections` + HEADROOM; None when that suffices, else a warning
    naming what `what` (e.g. "serve.max_connections=4000") needs and `ulimit -n`."""
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

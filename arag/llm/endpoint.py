"""Whether an OpenAI-compatible endpoint is there: one GET of `<base_url>/models`, asked before a
command starts any work, so that a server that is not running is named at once instead of after
every episode has failed its retries.

Only a failure to connect counts as absent (refused, no such host, no answer to the connect within
the timeout, a URL httpx cannot use). Any reply, 401 and 404 included, means something listens
there: a hosted API wants its key, a server may not list its models, and the run's own requests say
what is wrong with it."""

from __future__ import annotations

import ipaddress
import os
from urllib.parse import urlsplit

# Seconds to wait for the connection and for the reply: a server on this machine or network answers
# in milliseconds; a hosted API within a second.
PROBE_TIMEOUT_S = 5.0


def models_url(base_url: str) -> str:
    return f"{base_url.rstrip('/')}/models"


def unreachable(base_url: str, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """Why nothing answers at `base_url` (one line), or None when something does."""
    import httpx

    try:
        httpx.get(models_url(base_url), timeout=httpx.Timeout(timeout_s))
    except (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"{type(exc).__name__}: {reason}"
    except httpx.HTTPError:
        return None  # connected, then slow or odd: the run's own calls (with their retries) report it
    return None


def is_loopback(base_url: str) -> bool:
    host = urlsplit(base_url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def workers_elsewhere() -> bool:
    """Whether the run's workers may be on other machines (RAY_ADDRESS names a cluster, even one
    started on this machine: nodes may join it): there a loopback address is each node's own
    server, which this process cannot see."""
    return (os.environ.get("RAY_ADDRESS") or "local") != "local"

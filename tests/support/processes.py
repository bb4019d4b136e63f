"""Stopping a child process the tests or benchmarks started: SIGTERM, then SIGKILL if it lingers."""

from __future__ import annotations

import subprocess


def stop_process(process: subprocess.Popen, timeout_s: float = 30) -> None:
    """Terminate `process` and reap it; kill it when it has not exited within `timeout_s`."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()

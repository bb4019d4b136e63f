"""What the tools run inside (no Ray): `calls.py` the one call path and `admission.py` its gate;
`context.py` one open index in this process; `worker_pool.py` the same in N worker processes;
`batching.py` micro-batched query encoding."""

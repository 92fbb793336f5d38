"""The stand-ins for qrmd's peers and for the host, and the demo that drives the real daemon
with them (DESIGN.md "Layout"):

- ``kubelet``: a kubelet that drives a QRM plugin over its real gRPC wire (plugin watcher,
  admission with topology hints, reconcile, pod removal) and serves ``/pods``;
- ``advisor``: Katalyst's sys-advisor over real gRPC, with a load model and fault modes;
- ``host``: settable stand-ins for the host's ports: NUMA metrics, containers' anonymous
  memory per node, containers' CPU load;
- ``demo``: ``qrmd demo``, the real ``qrmd run`` driven by these on a synthetic node;
- ``dst``: ``qrmd sim``, the deterministic simulation: the daemon's actors on one thread, a
  simulated disk, kubelet and clock, faults from a seed, invariants after every step.

Production code never imports this package: the daemon, its subsystems, the host adapters and
the offline tools run without it (an import contract in pyproject.toml, and a test of
``qrmd run``'s import set, say so). Where a ``qrmd run`` flag names a ``simulated`` source, the
daemon builds its own fixed source from ``qrmd.host`` (``metrics_fixed``,
``cpu_load_sources``); the settable stand-ins here answer through those, so the two agree.
Only the ``qrmd demo`` and ``qrmd sim`` commands import from here; this package imports
anything but the offline tools.
"""

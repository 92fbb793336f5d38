"""The balancer's host paths, checked when the daemon starts (memory-balancer §4.1, §4.2; DESIGN.md
"Configuration ... validated at start").

A balancer whose sources are not there would otherwise run a failing round every period,
forever, while ``/healthz`` says ok. At start:

* the **memory cgroup root** (``--memory-cgroup-root``, or the default mount) must be a
  directory: without it no pod's anonymous memory can ever be read and no advice can ever be
  carried out, and nothing outside qrmd will create it. Start is refused, naming the flag;
* the **metrics file** (``--numa-metrics-file`` or ``--numa-metrics-source file:PATH``) may
  not exist yet: the collector that writes it may start after qrmd (a DaemonSet's containers
  start in any order). Start goes on with a warning naming the flag and the path; rounds fail
  until the file appears, and after the health tolerance (three periods, cpu-policy §12.3)
  the balancer is unhealthy. A path whose directory does not exist gets the same warning.

Only the sources the daemon reads from the host are checked (tests and the demo may give
their own).
"""

from __future__ import annotations

from pathlib import Path

from qrmd.host.balancer_sources import BalancerSourceSettings, SourceKind
from qrmd.host.numa_stat import default_memory_cgroup_root

__all__ = ["check_memory_cgroup_root", "metrics_file_warnings"]


def check_memory_cgroup_root(settings: BalancerSourceSettings) -> Path:
    """The memory cgroup root the balancer reads, which must be a directory.

    Raises:
        ValueError: it is not a directory; the message names ``--memory-cgroup-root``.
    """
    given = settings.memory_cgroup_root
    root = given if given is not None else default_memory_cgroup_root()
    if not root.is_dir():
        how = "" if given is not None else " (the default: no --memory-cgroup-root given)"
        raise ValueError(
            f"--memory-cgroup-root: {root}{how} is not a directory; the balancer reads each "
            "pod's memory.numa_stat under the memory controller's mount (/sys/fs/cgroup on "
            "cgroup v2, /sys/fs/cgroup/memory on v1)"
        )
    return root


def metrics_file_warnings(settings: BalancerSourceSettings) -> list[str]:
    """What is wrong with the metrics file now, if the settings read one.

    Returns:
        One warning naming the flag and the path, or none.
    """
    if SourceKind.FILE not in (settings.latency_source, settings.bandwidth_source):
        return []
    path = settings.metrics_file
    flag = "--numa-metrics-file (or --numa-metrics-source file:PATH)"
    if not path.parent.is_dir():
        problem = f"its directory {path.parent} does not exist"
    elif not path.exists():
        problem = "it does not exist yet"
    elif not path.is_file():
        problem = "it is not a regular file"
    else:
        return []
    return [
        f"{flag}: {path}: {problem}; every balance round fails until a collector writes it, "
        "and the balancer reports unhealthy after three rounds"
    ]

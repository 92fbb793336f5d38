"""The CPU vendor, for the balancer's vendor-aware values (spec memory-balancer §3.1 step 2).

The reference reads the CPUID vendor string; Linux shows it as ``vendor_id`` in
``/proc/cpuinfo`` (``GenuineIntel``, ``AuthenticAMD``, …). Any other vendor, a file without
the line (some ARM kernels) or no file at all gives ``""``: no vendor key, so every
vendor-aware option takes its ``default`` value, as the reference does for other vendors.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["CPUINFO", "read_cpu_vendor"]

CPUINFO = Path("/proc/cpuinfo")


def read_cpu_vendor(cpuinfo: Path | str = CPUINFO) -> str:
    """The first ``vendor_id`` of ``cpuinfo``, or ``""`` when there is none (docstring).

    Args:
        cpuinfo: the file to read (tests pass a copy).

    Returns:
        The vendor string, e.g. ``GenuineIntel``.
    """
    try:
        text = Path(cpuinfo).read_text(errors="replace")
    except OSError:
        return ""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "vendor_id":
            return value.strip()
    return ""

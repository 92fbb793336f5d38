"""Build fake kubelet cgroup trees with ``memory.numa_stat`` files, as the kernel writes them.

``numa_stat_text(version, anon, hierarchical_anon)`` gives a file's text: cgroup v1 counts
pages in ``name=total N0=... N1=...`` lines (own counters, then ``hierarchical_*``), v2 counts
bytes in ``name N0=... N1=...`` lines. ``put_cgroup`` writes one under a directory.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

PAGE = 4096


def _v1_line(name: str, pages: Mapping[int, int]) -> str:
    nodes = " ".join(f"N{n}={v}" for n, v in sorted(pages.items()))
    return f"{name}={sum(pages.values())} {nodes}".rstrip()


def _v2_line(name: str, amounts: Mapping[int, int]) -> str:
    nodes = " ".join(f"N{n}={v}" for n, v in sorted(amounts.items()))
    return f"{name} {nodes}".rstrip()


def numa_stat_text(
    version: int, anon: Mapping[int, int], hierarchical_anon: Mapping[int, int] | None = None
) -> str:
    """A ``memory.numa_stat`` whose anon counters are ``anon`` bytes per node (v1: the own
    counter; ``hierarchical_anon`` defaults to it) and whose other counters are noise."""
    file_ = {n: 3 * PAGE for n in anon}
    if version == 2:
        return (
            "\n".join(
                _v2_line(name, amounts)
                for name, amounts in (
                    ("anon", anon),
                    ("file", file_),
                    ("kernel_stack", {n: 16384 for n in anon}),
                    ("shmem", {n: 0 for n in anon}),
                )
            )
            + "\n"
        )
    hier = hierarchical_anon if hierarchical_anon is not None else anon

    def pages(amounts: Mapping[int, int]) -> dict[int, int]:
        assert all(v % PAGE == 0 for v in amounts.values()), "v1 counts whole pages"
        return {n: v // PAGE for n, v in amounts.items()}

    total = {n: anon.get(n, 0) + file_.get(n, 0) for n in anon}
    hier_total = {n: hier.get(n, 0) + file_.get(n, 0) for n in hier}
    lines = [
        _v1_line("total", pages(total)),
        _v1_line("file", pages(file_)),
        _v1_line("anon", pages(anon)),
        _v1_line("unevictable", {n: 0 for n in anon}),
        _v1_line("hierarchical_total", pages(hier_total)),
        _v1_line("hierarchical_file", pages({n: 3 * PAGE for n in hier})),
        _v1_line("hierarchical_anon", pages(hier)),
        _v1_line("hierarchical_unevictable", {n: 0 for n in hier}),
    ]
    return "\n".join(lines) + "\n"


def put_cgroup(
    directory: Path,
    version: int,
    anon: Mapping[int, int],
    hierarchical_anon: Mapping[int, int] | None = None,
) -> Path:
    """Create ``directory`` with a ``memory.numa_stat`` (and a ``cgroup.procs``, as a real
    cgroup has) and return it."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "memory.numa_stat").write_text(numa_stat_text(version, anon, hierarchical_anon))
    (directory / "cgroup.procs").write_text("")
    return directory

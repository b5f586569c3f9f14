"""What this machine's memory allows: physical memory, memory the kernel can hand out without swapping
(``MemAvailable``), free swap, and this process's resident set. Linux's ``/proc`` where it is there; the POSIX
figures otherwise."""

from __future__ import annotations

import os
import resource


def _meminfo(key: str) -> int | None:
    """A ``/proc/meminfo`` figure in bytes (``key`` as ``MemAvailable``), None where there is no such file."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def available_memory() -> int:
    """Bytes of RAM that new allocations can take without swapping (half the physical memory where unknown)."""
    got = _meminfo("MemAvailable")
    return physical_memory() // 2 if got is None else got


def free_swap() -> int:
    """Bytes of swap not in use (0 where unknown)."""
    return _meminfo("SwapFree") or 0


def physical_memory() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def current_rss() -> int:
    """Resident set size of this process now, bytes."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def gigabytes(n: float) -> str:
    """``12.3 GB``, ``456 MB`` or ``789 KB`` (powers of 1000, as ``df -H``)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6)):
        if n >= size:
            return f"{n / size:.1f} {unit}" if n < 100 * size else f"{n / size:.0f} {unit}"
    return f"{max(n, 0) / 1e3:.0f} KB"

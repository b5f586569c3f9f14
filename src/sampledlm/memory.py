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
    """Bytes of RAM that new allocations can take without swapping (half the physical memory where unknown), within
    what this process's control group may still take (a container's memory limit: :func:`cgroup_room`)."""
    got = _meminfo("MemAvailable")
    got = physical_memory() // 2 if got is None else got
    room = cgroup_room()
    return got if room is None else min(got, room)


#: (limit, usage, statistics, reclaimable file-cache key) of cgroup v2, then v1, as a container mounts them
_CGROUP_FILES = (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current", "/sys/fs/cgroup/memory.stat",
                  "inactive_file"),
                 ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes",
                  "/sys/fs/cgroup/memory/memory.stat", "total_inactive_file"))


def cgroup_room() -> int | None:
    """Bytes the control group may still take: its memory limit less its usage, the inactive file cache counted as
    free (the kernel reclaims it first); None without a limit or where there is no such file."""
    for limit_file, usage_file, stat_file, key in _CGROUP_FILES:
        try:
            with open(limit_file) as f:
                raw = f.read().strip()
            if raw == "max":
                return None
            limit = int(raw)
            with open(usage_file) as f:
                usage = int(f.read())
        except (OSError, ValueError):
            continue
        if limit >= 1 << 60:  # v1's "no limit"
            return None
        cache = 0
        try:
            with open(stat_file) as f:
                cache = next((int(line.split()[1]) for line in f if line.startswith(key + " ")), 0)
        except (OSError, ValueError, IndexError):
            pass
        return max(limit - usage + cache, 0)
    return None


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

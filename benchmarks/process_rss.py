"""A process's resident memory as Linux reports it in /proc/<pid>/status, for the RSS figures
(benchmarks.memory through benchmarks.rss_snapshot) and tests/engine/test_large_values.py.

The peak is VmHWM, the process's own high-water mark. Not getrusage's ru_maxrss: that one
survives fork + exec, so a process started by a big parent (the benchmark runner, pytest)
reports its parent's peak until its own grows past it. `reset_peak` sets VmHWM back to the
current RSS (writing 5 to /proc/<pid>/clear_refs, Linux 4.0+), so that a peak can be measured
for one phase of a process (a snapshot, not the imports before it).
"""

from __future__ import annotations

from pathlib import Path


def status_kib(field: str, pid: int | str = "self") -> int:
    """A `VmXxx:` line of /proc/<pid>/status, in KiB."""
    prefix = field + ":"
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(prefix):
            return int(line.split()[1])
    raise LookupError(f"/proc/{pid}/status has no {field}")


def peak_kib(pid: int | str = "self") -> int:
    """Peak resident memory (VmHWM) since the process started or since `reset_peak`."""
    return status_kib("VmHWM", pid)


def current_kib(pid: int | str = "self") -> int:
    """Resident memory now (VmRSS)."""
    return status_kib("VmRSS", pid)


def reset_peak(pid: int | str = "self") -> bool:
    """Set the peak back to the current RSS; False where the kernel does not allow it."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True

"""What the host knows about a container's service beyond its check: the state
and CPU time of its processes, and the host's pressure (Linux PSI).

The health loop tells a hung service from a slow one with these
(kolla_salt.healing.health.judge): a stopped process (state T) or one that made no
CPU progress while its check failed is hung; a check that failed slowly while
the host was under pressure is slow. Everything is read from /proc (a `root`
argument lets tests use a fake one): the Docker engine runs containers in the
host's PID namespace, so a container's processes are the descendants of its
State.Pid. Processes `docker exec` starts (the checks themselves) are children
of the engine's shim, not of State.Pid: they are not counted.
"""
import os
from dataclasses import dataclass

PSI_RESOURCES = ("cpu", "io", "memory")


@dataclass(frozen=True)
class ServiceSample:
    """A container's service processes at one moment."""
    ticks: int            # utime + stime of all of them, in clock ticks (1/100 s)
    stopped: bool         # one is stopped by a signal (state T): it cannot progress until SIGCONT
    io_wait: bool         # one is in uninterruptible sleep (state D): waiting on the disk
    pids: tuple = ()


def process_table(root="/proc"):
    """{pid: (ppid, state, ticks)} of every process, from one scan of /proc."""
    table = {}
    for entry in os.listdir(root):
        if not entry.isdigit():
            continue
        try:
            with open(f"{root}/{entry}/stat") as f:
                text = f.read()
        except OSError:          # ended meanwhile
            continue
        # The command (field 2) may hold spaces and parentheses: split after the last ')'.
        fields = text[text.rindex(")") + 2:].split()
        table[int(entry)] = (int(fields[1]), fields[0], int(fields[11]) + int(fields[12]))
    return table


def service_sample(table, root_pid):
    """The sample of the processes under `root_pid` (a container's State.Pid), or
    None when it is not in the table. An init that has children (tini, the
    images' PID 1) is left out: its state says nothing about the service."""
    if not root_pid or root_pid not in table:
        return None
    children = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], list(children.get(root_pid, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    pids = sorted(found) or [root_pid]
    states = [table[pid][1] for pid in pids]
    return ServiceSample(ticks=sum(table[pid][2] for pid in pids), stopped="T" in states,
                         io_wait="D" in states, pids=tuple(pids))


def read_pressure(root="/proc"):
    """{resource: microseconds some task waited for it since boot} (PSI's `some
    total`), for those the kernel reports; {} without PSI."""
    totals = {}
    for resource in PSI_RESOURCES:
        try:
            with open(f"{root}/pressure/{resource}") as f:
                for line in f:
                    if line.startswith("some "):
                        totals[resource] = int(line.rsplit("total=", 1)[1])
        except (OSError, ValueError, IndexError):
            continue
    return totals


def pressure_between(before, after, seconds):
    """The highest share (0..1) of `seconds` during which some task waited for CPU,
    I/O or memory, from two read_pressure totals; None when unknown. PSI's own avg10 lags by up to
    10 s; the difference of totals is exact for the window that matters (a check's)."""
    if not before or not after or seconds <= 0:
        return None      # unknown (no PSI): never taken for a calm host
    return max((after[r] - before[r]) / 1e6 / seconds for r in after if r in before)

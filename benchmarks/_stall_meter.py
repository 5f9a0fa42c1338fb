"""Event-loop stalls of the GUI thread, and how much of each one the machine itself caused.

`StallMeter` ticks a precise 5 ms QTimer in the GUI thread and records the gaps between ticks. For each tick
it also reads the thread's scheduler statistics (Linux), so a gap splits into time the GUI thread ran
(Python slots, painting), waited for a free CPU, or was blocked (asleep: waiting for the GIL, or a virtual
CPU the host did not run on time).

`MachineNoise` runs one tiny process per CPU, pinned there, that does nothing but sleep 2 ms and note when it
woke late. Those processes share no GIL and no code with the application, so a late wake-up is the
machine's doing (other tenants of a virtual machine, the host not waking an idle virtual CPU). A GUI stall
that coincides with one is not the application's; the part of a stall that no probe shared is.
"""
from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time

TICK_MS = 5
PROBE_SLEEP_S = 0.002
PROBE_LATE_S = 0.008  # a probe wake-up this late counts as a machine stall

_PROBE = r"""
import json, os, signal, sys, time
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {int(sys.argv[1])})
late = []
def stop(*_):
    print(json.dumps(late), flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
sleep, limit = float(sys.argv[2]), float(sys.argv[2]) + float(sys.argv[3])
last = time.perf_counter()
while True:
    time.sleep(sleep)
    now = time.perf_counter()
    if now - last > limit:
        late.append((last, now))
    last = now
"""


class _SchedStat:
    """(ns on a CPU, ns runnable but waiting for a CPU, CPU last run on) of the thread that created it."""

    def __init__(self):
        try:
            self._sched = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
            self._stat = os.open("/proc/thread-self/stat", os.O_RDONLY)
        except (OSError, AttributeError):
            self._sched = self._stat = None

    def read(self) -> tuple[int, int, int]:
        if self._sched is None:
            return 0, 0, -1
        on_cpu, waiting, _ = os.pread(self._sched, 128, 0).split()
        stat = os.pread(self._stat, 1024, 0)
        cpu = int(stat[stat.rindex(b")") + 2:].split()[36])  # field 39, counted after "pid (comm)"
        return int(on_cpu), int(waiting), cpu


class StallMeter:
    """Gaps between the ticks of a precise 5 ms timer in the GUI thread (create it in that thread)."""

    def __init__(self):
        from PySide6.QtCore import Qt, QTimer

        self._sched = _SchedStat()
        self.gaps: list[float] = []
        self.ends: list[float] = []
        self.sched: list[tuple[int, int, int]] = []
        self._last = None
        self.timer = QTimer(interval=TICK_MS, timerType=Qt.TimerType.PreciseTimer)
        self.timer.timeout.connect(self._tick)

    def _tick(self) -> None:
        now = time.perf_counter()
        sched = self._sched.read()
        if self._last is not None:
            self.gaps.append(now - self._last)
            self.ends.append(now)
            self.sched.append(sched)
        self._last = now

    def start(self) -> "StallMeter":
        self.gaps, self.ends, self.sched, self._last = [], [], [], None
        self._start_sched = self._sched.read()  # so that the first gap splits too
        self.timer.start()
        self._last = time.perf_counter()
        return self

    def stop(self) -> dict:
        self.timer.stop()
        gaps = sorted(self.gaps) or [0.0]
        return {"max_ms": 1000 * gaps[-1], "p99_ms": 1000 * gaps[int(0.99 * (len(gaps) - 1))],
                "median_ms": 1000 * statistics.median(gaps), "ticks": len(gaps)}

    def longest(self, n: int = 5) -> list[tuple[float, float]]:
        """(end time, gap) of the n longest gaps."""
        return sorted(zip(self.ends, self.gaps), key=lambda x: -x[1])[:n]

    def split(self, end: float) -> str:
        """How the GUI thread spent the gap that ended at `end`."""
        i = self.ends.index(end)
        before = self.sched[i - 1] if i else self._start_sched
        if not self.sched[i][0]:
            return ""
        running = (self.sched[i][0] - before[0]) / 1e6
        waiting = (self.sched[i][1] - before[1]) / 1e6
        blocked = 1000 * self.gaps[i] - running - waiting
        return f"GUI thread ran {running:.0f} ms, waited for a CPU {waiting:.0f} ms, asleep {blocked:.0f} ms"


class StackSampler:
    """While the GUI thread has not ticked for `after_s`, sample every thread's innermost frames (a watchdog
    thread in the same process): names what held the GIL or ran in the GUI thread during a long gap."""

    def __init__(self, meter: StallMeter, after_s: float = 0.03, every_s: float = 0.01):
        import threading

        self.meter, self.after_s, self.every_s = meter, after_s, every_s
        self.samples: list[tuple[float, dict[str, str]]] = []  # (time, thread name -> frames)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stall-sampler", daemon=True)
        self._gui_ident = threading.get_ident()

    def start(self) -> "StackSampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        import threading
        import traceback

        names = {}
        while not self._stop.wait(self.every_s):
            last = self.meter._last
            now = time.perf_counter()
            if last is None or now - last < self.after_s:
                continue
            names.update({t.ident: t.name for t in threading.enumerate()})
            stacks = {}
            for ident, frame in sys._current_frames().items():
                if ident == threading.get_ident():
                    continue
                frames = [f for f in traceback.extract_stack(frame) if "/threading.py" not in f.filename][-4:]
                if frames:
                    who = "GUI" if ident == self._gui_ident else names.get(ident, str(ident))
                    stacks[who] = " < ".join(f"{f.name} ({f.filename.rsplit('/', 2)[-1]}:{f.lineno})"
                                             for f in reversed(frames))
            self.samples.append((now, stacks))

    def during(self, start: float, end: float) -> list[dict[str, str]]:
        return [s for t, s in self.samples if start <= t <= end]


class MachineNoise:
    """Late wake-ups of one pinned sleeping process per CPU, over the same clock as `time.perf_counter()`."""

    def __init__(self):
        self._procs: list[subprocess.Popen] = []
        self.stalls: list[tuple[float, float]] = []

    def start(self) -> "MachineNoise":
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
        self.stalls = []
        self._procs = [subprocess.Popen([sys.executable, "-c", _PROBE, str(cpu), str(PROBE_SLEEP_S),
                                         str(PROBE_LATE_S)], stdout=subprocess.PIPE, text=True)
                       for cpu in cpus[:8]]
        time.sleep(0.3)  # let the interpreters start before anything is measured
        return self

    def stop(self) -> None:
        for proc in self._procs:
            proc.send_signal(signal.SIGTERM)
        for proc in self._procs:
            out, _ = proc.communicate(timeout=10)
            self.stalls.extend(tuple(s) for s in json.loads(out or "[]"))
        self._procs = []

    def overlap(self, start: float, end: float) -> float:
        """Seconds of [start, end] during which at least one CPU's probe was stalled."""
        spans = sorted((max(a, start), min(b, end)) for a, b in self.stalls if a < end and b > start)
        total, reach = 0.0, start
        for a, b in spans:
            if b > reach:
                total += b - max(a, reach)
                reach = b
        return total

    def longest(self, start: float, end: float) -> float:
        return max((b - a for a, b in self.stalls if a >= start and b <= end), default=0.0)


def attributable(meter: StallMeter, noise: MachineNoise) -> list[tuple[float, float, float]]:
    """(end, gap, the part of the gap no machine stall overlapped), longest such part first."""
    rows = [(end, gap, gap - noise.overlap(end - gap, end)) for end, gap in zip(meter.ends, meter.gaps)]
    return sorted(rows, key=lambda r: -r[2])

"""Where a rank's host time went between iterations (driver.py, step mode).

A ground truth packs every rank's Python process onto one host; one process
that stalls (a garbage collection, a descheduled thread) while its GPU has
run out of work delays its peers, and the whole job's iteration grows. The
hybrid has only its real ranks' processes, so such a stall shows in the
truth and not in the hybrid. HostWatch records, per iteration:

- how long the host waited for the GPU before it enqueued the iteration
  (driver.py runs at most one iteration ahead): near zero, the host was
  behind and its GPU may have idled;
- every garbage collection (generation, duration) and the iteration being
  enqueued when it ran;
- when (wall clock, the same for every process of the host) it began to
  enqueue each iteration, so that a rank that began later than it usually
  does, against the other ranks, can be named (late_enqueues).

It can also take Python's collector off the hot loop (`gc_mode`):
`python` leaves it as Python runs it; `freeze` collects once and freezes
every object made so far (torch, NCCL groups, the program) so that later
collections never scan them again; `off` disables the collector for the
measured loop (a job that runs this way collects by hand, as Megatron's
--manual-gc does).

Not thread-safe: one per process, used from the thread that enqueues.
"""
import gc
import statistics
import time

GC_MODES = ("python", "freeze", "off")


class HostWatch:
    def __init__(self, gc_mode="python", clock_ns=time.perf_counter_ns, collector=gc, wall_ns=time.time_ns):
        if gc_mode not in GC_MODES:
            raise ValueError(f"gc mode {gc_mode!r}: one of {', '.join(GC_MODES)}")
        self.gc_mode = gc_mode
        self._clock_ns = clock_ns
        self._wall_ns = wall_ns
        self.enqueue_ns = {}  # iteration -> wall clock (ns) when the host began to enqueue it
        self._gc = collector
        self._gc_start_ns = None
        self.iteration = -1  # the iteration being enqueued; -1 before the loop
        self.wait_ms = {}  # iteration -> ms the host waited for the GPU before enqueuing it
        self.collections = []  # [iteration, generation, ms]
        self._started = False

    def start(self):
        """Applies the gc mode and starts recording collections. Call once,
        after start-up (communicators made), before the first iteration."""
        if self._started:
            return
        self._started = True
        if self.gc_mode in ("freeze", "off"):
            self._gc.collect()
        if self.gc_mode == "freeze":
            self._gc.freeze()
        if self.gc_mode == "off":
            self._gc.disable()
        self._gc.callbacks.append(self._on_gc)

    def stop(self):
        """Stops recording and gives Python its collector back as it was."""
        if not self._started:
            return
        self._started = False
        if self._on_gc in self._gc.callbacks:
            self._gc.callbacks.remove(self._on_gc)
        if self.gc_mode == "off":
            self._gc.enable()
        if self.gc_mode == "freeze":
            self._gc.unfreeze()

    def wait_for_gpu(self, iteration, wait):
        """Runs wait() (the host's wait for the GPU before it enqueues
        `iteration`) and records how long it took."""
        self.iteration = iteration
        t0 = self._clock_ns()
        wait()
        self.wait_ms[iteration] = (self._clock_ns() - t0) / 1e6
        self.enqueue_ns[iteration] = self._wall_ns()

    def enqueuing(self, iteration):
        """The host enqueues `iteration` without waiting (the first ones)."""
        self.iteration = iteration
        self.wait_ms.setdefault(iteration, None)
        self.enqueue_ns[iteration] = self._wall_ns()

    def _on_gc(self, phase, info):
        if phase == "start":
            self._gc_start_ns = self._clock_ns()
        elif phase == "stop" and self._gc_start_ns is not None:
            ms = (self._clock_ns() - self._gc_start_ns) / 1e6
            self.collections.append([self.iteration, info.get("generation", -1), round(ms, 3)])
            self._gc_start_ns = None

    def as_json(self):
        """{"gc_mode", "wait_ms": [per iteration, None where the host did not
        wait], "enqueue_ns": [per iteration, wall clock ns or None],
        "gc": [[iteration, generation, ms], ...]}"""
        n = max(self.wait_ms) + 1 if self.wait_ms else 0
        waits = [None if self.wait_ms.get(i) is None else round(self.wait_ms[i], 3) for i in range(n)]
        return {"gc_mode": self.gc_mode, "wait_ms": waits,
                "enqueue_ns": [self.enqueue_ns.get(i) for i in range(n)], "gc": list(self.collections)}


def stalls(host, iteration, gc_ms=1.0, wait_ms=1.0):
    """Whether a rank's host (as_json) may have held iteration back: a
    collection of at least gc_ms while enqueuing it or the one after, or a
    wait for the GPU under wait_ms before either (the host was behind).
    Returns a short reason, or ""."""
    reasons = []
    for it in (iteration, iteration + 1):
        pauses = [c[2] for c in host.get("gc", []) if c[0] == it and c[2] >= gc_ms]
        if pauses:
            reasons.append(f"gc {max(pauses):.1f} ms")
        waits = host.get("wait_ms", [])
        if it < len(waits) and waits[it] is not None and waits[it] < wait_ms:
            reasons.append(f"host behind ({waits[it]:.2f} ms wait)")
    return ", ".join(dict.fromkeys(reasons))


def late_enqueues(hosts, iteration, late_ms=1.0):
    """The ranks ({rank: as_json()}) that began to enqueue `iteration` at
    least late_ms later than their habit says: a pipeline's stages enqueue
    at different times by design. A rank's habit is its median offset from
    the ranks' median start over the iterations every rank recorded; the
    iteration's reference is the median of the ranks' starts less their
    habits (so a late rank does not move it). Returns [(rank, ms late)],
    latest first."""
    starts = {r: h.get("enqueue_ns", []) for r, h in hosts.items()}
    n = min((len(v) for v in starts.values()), default=0)
    common = [i for i in range(n) if all(v[i] is not None for v in starts.values())]
    if iteration not in common or len(common) < 3 or len(starts) < 2:
        return []
    mid = {i: statistics.median(v[i] for v in starts.values()) for i in common}
    habit = {r: statistics.median(v[i] - mid[i] for i in common) for r, v in starts.items()}
    reference = statistics.median(v[iteration] - habit[r] for r, v in starts.items())
    late = [(r, (v[iteration] - habit[r] - reference) / 1e6) for r, v in starts.items()]
    return sorted([x for x in late if x[1] >= late_ms], key=lambda x: -x[1])

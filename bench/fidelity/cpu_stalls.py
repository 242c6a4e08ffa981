#!/usr/bin/env python3
"""Where a packed host's CPUs stalled during a run, against its slow iterations.

run-gpu.sh CPU_STALLS=1 runs the bundle's prism-cpu-stalls beside each run:
on every CPU one fair (SCHED_OTHER) and, as root, one SCHED_FIFO thread
sleep 1 ms at a time, and each wake later than 2 ms is listed with the wall
clock its sleep began (RUN/cpu-stalls.txt; bench/fidelity/cpu_stalls.cc).
A late fifo wake means the virtual CPU itself did not run (the hypervisor's
steal, which /proc/stat's steal column counts too); a late fair wake with
the fifo sleeper of that CPU on time means the guest's scheduler ran other
threads first (a crowded run queue).

read(path) -> {"wakes": [{policy, cpu, n, p50_us, p99_us, max_us, over,
    over_ms}], "steal_ms": {cpu: ms}, "stalls": [(wall_ns, cpu, policy,
    late_us)], "notes": [comment lines]}
gpu_iteration_at(host, wall_ns) -> the iteration rank's GPU was running at
    wall_ns, from driver.py's host record (None before it is known).
    driver.py enqueues iteration k right after waiting for iteration k-2 to
    finish (host_watch.wait_for_gpu), so between enqueue k and enqueue k+1
    the GPU runs iteration k-1 (as long as the host waits: it does on a
    host that keeps ahead, compare.py's hosts line says whether it did).
slow_iteration_stalls(stalls, results, policy, min_ms, over_pct) ->
    (slow iterations holding a stall, slow iterations, other measured
    iterations holding one, other measured iterations), by rank 0's clock.
measured_window(results) -> (first, last) wall clock ns of rank 0's measured
    iterations, from the same host record (None without one).
summary(path, results) -> one line for compare.py: the whole run's late
    wakes per policy (start-up included), the steal, then per policy those of
    the measured iterations and the slow iterations that held one.
"""
import bisect
import os
import sys

import spikes

STALL_MS = 5.0  # a stall worth setting beside a slow iteration (the truths' spikes are 5-20 ms)


def read(path):
    wakes, steal, stalls, notes = [], {}, [], []
    with open(path, errors="replace") as f:
        for line in f:
            line = line.strip()
            if line.startswith("#"):
                notes.append(line)
            elif line.startswith("wakes "):
                p = line.split()
                row = {"policy": p[1], "cpu": int(p[3])}
                for key, value in zip(p[4::2], p[5::2]):
                    row[key] = float(value)
                wakes.append(row)
            elif line.startswith("steal "):
                p = line.split()
                steal[int(p[2])] = int(p[4])
            elif line.startswith("stall "):
                p = line.split()
                stalls.append((int(p[1]), int(p[2]), p[3], int(p[4])))
    return {"wakes": wakes, "steal_ms": steal, "stalls": stalls, "notes": notes}


def gpu_iteration_at(host, wall_ns):
    enq = host.get("enqueue_ns") or []
    known = [(t, k) for k, t in enumerate(enq) if t is not None and k >= 2]
    if not known or wall_ns < known[0][0]:
        return None
    i = bisect.bisect_right([t for t, _ in known], wall_ns) - 1
    return known[i][1] - 1


def slow_iteration_stalls(stalls, results, policy="fifo", min_ms=STALL_MS, over_pct=1.0):
    r0 = results.get(0)
    if not r0 or "host" not in r0:
        return None
    made_late = spikes.made_late_iterations(results)
    measured = [i for i in range(r0.get("warmup", 0), len(r0["iteration_ms"])) if i not in made_late]
    slow = {i for i, _ in spikes.slow_iterations(results, over_pct)}
    lo, hi = measured_window(results) or (0, 0)
    held = {gpu_iteration_at(r0["host"], wall) for wall, _, pol, late_us in stalls
            if pol == policy and late_us >= min_ms * 1000 and lo <= wall <= hi}
    others = [i for i in measured if i not in slow]
    return (len(slow & held), len(slow), len([i for i in others if i in held]), len(others))


def measured_window(results):
    """(first, last) wall clock ns of rank 0's measured iterations, about: iteration k starts
    when k-1 ends, which is when the host enqueued k+1; the last ends within two iterations of
    its own enqueue. None without a host record."""
    r0 = results.get(0)
    enq = (r0 or {}).get("host", {}).get("enqueue_ns") or []
    w = (r0 or {}).get("warmup", 0)
    if len(enq) < w + 2 or enq[w + 1] is None or enq[-1] is None:
        return None
    return enq[w + 1], enq[-1] + int(2e6 * r0["iteration_ms"][-1])


def _measured_text(stalls, window, policy):
    lo, hi = window
    late = [us for wall, _, pol, us in stalls if pol == policy and lo <= wall <= hi]
    span_s = (hi - lo) / 1e9
    return (f"{policy} in the measured iterations ({span_s:.1f} s): {len(late)} wakes over 2 ms, "
            f"{sum(1 for us in late if us >= STALL_MS * 1000)} of {STALL_MS:g} ms or more, longest "
            f"{max(late, default=0) / 1000:.1f} ms")


def _policy_text(rows, policy):
    rows = [r for r in rows if r["policy"] == policy]
    if not rows:
        return f"{policy}: none ran"
    over = int(sum(r["over"] for r in rows))
    longest = max(r["max_us"] for r in rows) / 1000
    total = sum(r["over_ms"] for r in rows)
    cpus = sum(1 for r in rows if r["over"] > 0)
    return f"{policy} {over} wakes over 2 ms on {cpus} of {len(rows)} CPUs, longest {longest:.1f} ms, {total:.1f} ms in all"


def summary(path, results):
    s = read(path)
    if not s["wakes"]:
        return (f"CPU stalls: {len(s['stalls'])} stall lines but no summary (the report was cut short, or "
                "prism-cpu-stalls was killed before it wrote one)")
    text = f"CPU stalls (1 ms sleepers): {_policy_text(s['wakes'], 'fifo')}; {_policy_text(s['wakes'], 'fair')}"
    if s["steal_ms"]:
        text += f"; steal {sum(s['steal_ms'].values())} ms over {len(s['steal_ms'])} CPUs"
    else:
        text += "; steal not readable"
    window = measured_window(results)
    for policy in ("fifo", "fair"):
        if not any(w["policy"] == policy for w in s["wakes"]):
            continue
        if window:
            text += "; " + _measured_text(s["stalls"], window, policy)
        held = slow_iteration_stalls(s["stalls"], results, policy)
        if held:
            text += (f"; {policy} stalls of {STALL_MS:g} ms or more in {held[0]} of {held[1]} slow iterations"
                     f" (over 1%), {held[2]} of {held[3]} others")
    refused = [n for n in s["notes"] if "refused" in n]
    if refused:
        text += f" ({refused[0].lstrip('# ')})"
    return text


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: cpu_stalls.py RUN_DIR  (holding cpu-stalls.txt and r<rank>.json)\n")
        return 2
    path = os.path.join(argv[1], "cpu-stalls.txt")
    if not os.path.isfile(path):
        print(f"{argv[1]}: no cpu-stalls.txt (run-gpu.sh CPU_STALLS=1)")
        return 1
    print(summary(path, spikes.run_results(argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

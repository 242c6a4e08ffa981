#!/usr/bin/env python3
"""Tables of a fidelity run (bench/fidelity/run-gpu.sh OUT DATA): the ground
truth against the model (prismd --simulate on the same graph), then every
hybrid run against the ground truth, as rank 0 (and the second real rank)
saw them. Usage: compare.py OUT DATA."""
import json
import os
import re
import statistics
import sys

import host_watch
import pooled as pooled_mod
import cpu_stalls
import spikes


def load(path):
    """A JSON file (prismd's pretty-printed report), or the last line of a
    JSON-lines one (the driver's); None if absent or unreadable."""
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return json.loads(text.splitlines()[-1])
    except (ValueError, IndexError):
        return None


def model_comm_events(data, name, rank=0):
    """A rank's communication ops in prismd --simulate's trace (the X events
    that are not compute); [] without a trace."""
    try:
        with open(os.path.join(data, name, "model-trace.json")) as f:
            t = json.load(f)
    except OSError:
        return []
    return [e for e in t["traceEvents"] if e.get("ph") == "X" and e.get("pid") == rank and e.get("cat") != "compute"]


def model_medians(data, name, rank=0, group=lambda label: label):
    """Median model time (us) of a rank's communication ops from prismd
    --simulate's trace, per group(label); {} without a trace."""
    per = {}
    for e in model_comm_events(data, name, rank):
        per.setdefault(group(e["name"]), []).append(e["dur"])
    return {k: statistics.median(v) for k, v in per.items()}


def model_ops(data, name):
    """Per-op model times (us) of rank 0."""
    return model_medians(data, name)


def pct(a, b):
    return 100.0 * (a - b) / b if b else float("nan")


# The bench's check that a ground truth holds the model before anything is
# compared with it (the timing issue): its large collectives within 2% of
# prismd --simulate.
TRUTH_GATE_BYTES, TRUTH_GATE_PCT = 16 << 20, 2.0


def sweep_without_truth(out, data, name, runs):
    """A sweep too large for a ground truth: the real rank's median per op
    beside prismd --simulate's (rank 0). False when no hybrid run left one."""
    model = model_ops(data, name)
    shown = False
    for kind in sorted(r for r in runs if r.startswith("hybrid")):
        run_dir = os.path.join(out, f"{name}-{kind}")
        for rank in real_ranks_of(run_dir):
            shown = sweep_rank_table(run_dir, name, kind, rank, model) or shown
    return shown


def real_ranks_of(run_dir):
    """The ranks whose results a run left (r<rank>.json), lowest first."""
    try:
        names = os.listdir(run_dir)
    except OSError:
        return []
    return sorted(int(m.group(1)) for m in (re.match(r"r(\d+)\.json$", n) for n in names) if m)


def sweep_rank_table(run_dir, name, kind, rank, model):
    """One real rank's medians per op beside prismd --simulate's (rank 0's:
    every rank of a sweep runs the same ops). False if it left none."""
    h = load(os.path.join(run_dir, f"r{rank}.json"))
    if not h or "ops" not in h:
        return False
    print(f"\n## {name}: {kind} vs prismd --simulate, rank {rank} (median per op; no ground truth)")
    print(f"{'op':<14}{'bytes':>11}{'hybrid us':>12}{'simulate us':>13}{'err':>9}")
    for l in sorted(h["ops"], key=lambda l: (l.split()[0], int(l.split()[1]))):
        op, size = l.split()
        a, m = h["ops"][l]["median_us"], model.get(l)
        err = f"{pct(a, m):>+8.1f}%" if m else f"{'-':>9}"
        print(f"{op:<14}{int(size):>11}{a:>12.1f}{(m or float('nan')):>13.1f}{err}")
    return True


def sweep_tables(out, data, name, runs):
    truth = load(os.path.join(out, f"{name}-truth", "r0.json"))
    if not truth:
        if not sweep_without_truth(out, data, name, runs):
            print(f"{name}: no ground truth (see {name}-truth/r0.log)")
        return
    model = model_ops(data, name)
    labels = sorted(truth["ops"], key=lambda l: (l.split()[0], int(l.split()[1])))
    print(f"\n## {name}: ground truth vs the model (rank 0, median per op)")
    print(f"{'op':<14}{'bytes':>11}{'truth us':>12}{'model us':>12}{'err':>9}")
    large = []
    for l in labels:
        op, size = l.split()
        t, m = truth["ops"][l]["median_us"], model.get(l)
        print(f"{op:<14}{int(size):>11}{t:>12.1f}{(m or float('nan')):>12.1f}{pct(m, t) if m else float('nan'):>+8.1f}%")
        if m and int(size) >= TRUTH_GATE_BYTES:
            large.append(abs(pct(m, t)))
    if large:
        ok = max(large) <= TRUTH_GATE_PCT
        print(f"truth holds the model at {TRUTH_GATE_BYTES >> 20} MiB and above (within {TRUTH_GATE_PCT:g}%): "
              f"{'yes' if ok else 'NO'}, worst {max(large):.2f}%"
              + ("" if ok else " (a truth that does not hold its links is no reference for the hybrid: "
                                   "bench/fidelity/README.md)"))
    for kind in [r for r in runs if r.startswith("hybrid")]:
        for rank in (0, 1):
            h = load(os.path.join(out, f"{name}-{kind}", f"r{rank}.json"))
            t = load(os.path.join(out, f"{name}-truth", f"r{rank}.json"))
            if not h or not t:
                continue
            print(f"\n## {name}: {kind} vs ground truth, rank {rank} (median per op; simulate: prismd "
                  f"--simulate, rank 0)")
            print(f"{'op':<14}{'bytes':>11}{'truth us':>12}{'hybrid us':>12}{'err':>9}{'simulate us':>13}{'err':>9}")
            worst = 0.0
            for l in labels:
                if l not in h["ops"] or l not in t["ops"]:
                    continue
                op, size = l.split()
                a, b = h["ops"][l]["median_us"], t["ops"][l]["median_us"]
                e = pct(a, b)
                if int(size) >= 1 << 20:
                    worst = max(worst, abs(e))
                m = model.get(l)
                sim = f"{m:>13.1f}{pct(m, b):>+8.1f}%" if m else f"{'-':>13}{'-':>9}"
                print(f"{op:<14}{int(size):>11}{b:>12.1f}{a:>12.1f}{e:>+8.1f}%{sim}")
            print(f"worst |error| at 1 MiB and above: {worst:.2f}%")
    sweep_pooled(out, data, name, runs)


def sweep_worst(h, t, labels):
    """The worst |error| (%) of sweep result h against t over labels of 1 MiB and more."""
    errs = [abs(pct(h["ops"][l]["median_us"], t["ops"][l]["median_us"])) for l in labels
            if l in h["ops"] and l in t["ops"] and int(l.split()[1]) >= 1 << 20]
    return max(errs) if errs else None


def sweep_pooled(out, data, name, runs):
    """Three truths of a sweep or more (truth, truth-again, truth-again2,
    ...): per op the median of the runs' medians, each hybrid against that
    pool, and each truth against the pool of the others (how far one run of
    the real program strays from the rest: the floor under a hybrid's
    error). A single truth's 1 MiB operation has scattered 16% between two
    runs on the one-GPU host (docs/limitations.md); the pool shrinks it."""
    kinds = [k for k in ["truth"] + again_runs("truth", runs)
             if load(os.path.join(out, f"{name}-{k}", "r0.json"))]
    if len(kinds) < 3:
        return
    truths = {k: load(os.path.join(out, f"{name}-{k}", "r0.json")) for k in kinds}
    pool = pooled_mod.pool_ops(list(truths.values()))
    labels = sorted(pool["ops"], key=lambda l: (l.split()[0], int(l.split()[1])))
    model = model_ops(data, name)
    hybrids = [k for k in sorted(runs) if k.startswith("hybrid")
               and load(os.path.join(out, f"{name}-{k}", "r0.json"))]
    cols = [(k, load(os.path.join(out, f"{name}-{k}", "r0.json"))) for k in hybrids]
    print(f"\n## {name}: against the pooled truth ({len(kinds)} runs: {', '.join(kinds)}), rank 0, median per op")
    print(f"{'op':<14}{'bytes':>11}{'pooled us':>12}" + "".join(f"{k:>13}{'err':>9}" for k, _ in cols)
          + f"{'simulate us':>13}{'err':>9}")
    for l in labels:
        op, size = l.split()
        t = pool["ops"][l]["median_us"]
        row = f"{op:<14}{int(size):>11}{t:>12.1f}"
        for _, h in cols:
            a = h["ops"].get(l, {}).get("median_us")
            row += f"{a:>13.1f}{pct(a, t):>+8.1f}%" if a else f"{'-':>13}{'-':>9}"
        m = model.get(l)
        row += f"{m:>13.1f}{pct(m, t):>+8.1f}%" if m else f"{'-':>13}{'-':>9}"
        print(row)
    floor = {}
    for k in kinds:
        rest = pooled_mod.pool_ops([truths[o] for o in kinds if o != k])
        floor[k] = sweep_worst(truths[k], rest, labels)
    spread = [w for w in floor.values() if w is not None]
    spread_text = (f"a truth against the others: median {statistics.median(spread):.2f}%, worst {max(spread):.2f}%"
                   if spread else "no truth has ops of 1 MiB or more")
    worst = {k: sweep_worst(h, pool, labels) for k, h in cols}
    print(f"{name}: worst |error| at 1 MiB and above against the pooled truth: "
          + "; ".join(f"{k} {w:.2f}%" for k, w in worst.items() if w is not None)
          + f" ({spread_text}; "
          + ", ".join(f"{k} {w:.2f}%" for k, w in floor.items() if w is not None) + ")")


def op_kind(label):
    """A label's operation kind, as driver.py groups its comm_us: the numbers
    of microbatch and layer dropped ("tp all-reduce fwd", "send activation")."""
    return re.sub(r"\s*(mb|layer)\s+\d+", "", label).strip()


def model_kinds(data, name, rank=0):
    """Per-kind model times (us) of a rank from prismd --simulate's trace,
    labels grouped by op_kind; {} without a trace or without that rank in it.
    The ops of one send/recv group (one label, one start) are one op, as the
    driver times the group: the longest of them."""
    group = {}
    for e in model_comm_events(data, name, rank):
        key = (e["name"], e["ts"]) if "ts" in e else (e["name"], len(group))
        group[key] = max(group.get(key, 0.0), e["dur"])
    per = {}
    for (label, _), dur in group.items():
        per.setdefault(op_kind(label), []).append(dur)
    return {k: statistics.median(v) for k, v in per.items()}


# The bound on each operation kind's median (the fidelity issue's acceptance): within 5% of the truth's,
# or within KIND_FLOOR_US of it (a send that fits in NCCL's buffers takes tens of us of CUDA time in a run,
# and none in the model: no percentage means anything there).
KIND_BOUND_PCT, KIND_FLOOR_US = 5.0, 100.0


def comm_timing(result):
    """How a run timed its communication (driver.py --op-timing): CUDA events
    around each call (the default) or NCCL's kernel stamps; durations taken
    the two ways are not set side by side."""
    return result.get("comm_timing", "cuda-events")


def kind_outside(us, truth_us):
    """Whether a kind's median misses the truth's by more than both bounds."""
    return abs(pct(us, truth_us)) > KIND_BOUND_PCT and abs(us - truth_us) > KIND_FLOOR_US


def kinds_missed(truth, run):
    """The kinds of `run` whose median misses `truth`'s (kind_outside), or
    None when the two have no kinds timed the same way to compare."""
    tc, hc = truth.get("comm_us", {}), run.get("comm_us", {})
    common = [k for k in tc if k in hc]
    if not common or comm_timing(truth) != comm_timing(run):
        return None
    return [k for k in sorted(common) if kind_outside(hc[k]["median"], tc[k]["median"])]


def kind_tables(out, data, name, truth_kind, truths, hybrid_kinds, runs):
    """Per real rank: the median duration of every communication kind in the
    truth, in each hybrid run and in prismd --simulate (where its trace has
    the rank), with each one's error against the truth, and which stay within
    KIND_BOUND_PCT. A send's time in a run ends when NCCL's kernel is done
    with it (its data in the connection's buffers), not when the peer has it."""
    for r in sorted(truths):
        comm = truths[r].get("comm_us", {})
        method = comm_timing(truths[r])
        cols, other_method = [], []
        for kind in hybrid_kinds:
            h = load(os.path.join(out, f"{name}-{kind}", f"r{r}.json")) if kind in runs else None
            if h and h.get("comm_us") and comm_timing(h) != method:
                other_method.append(f"{kind} ({comm_timing(h)})")
            elif h and h.get("comm_us"):
                cols.append((kind, {k: v["median"] for k, v in h["comm_us"].items()}))
        mk = model_kinds(data, name, r)
        if mk:
            cols.append(("model", mk))
        if not comm or not cols:
            continue
        print(f"\n## {name}: per operation kind, rank {r}: median us over the measured iterations "
              f"({truth_kind}, timed by {method}; err against it)")
        if other_method:
            print(f"left out, timed another way than the truth: {', '.join(other_method)}")
        print(f"{'kind':34s} {'truth':>10s}" + "".join(f" {c:>12s} {'err':>8s}" for c, _ in cols))
        worst = {c: (0.0, "") for c, _ in cols}
        outside = {c: [] for c, _ in cols}
        for k in sorted(comm):
            t = comm[k]["median"]
            row = f"{k[:34]:34s} {t:10.1f}"
            for c, med in cols:
                if k not in med:
                    row += f" {'-':>12s} {'-':>8s}"
                    continue
                e = pct(med[k], t)
                row += f" {med[k]:12.1f} {e:+7.1f}%"
                if abs(e) > worst[c][0]:
                    worst[c] = (abs(e), k)
                if kind_outside(med[k], t):
                    outside[c].append(k)
            print(row)
        print(f"kinds within {KIND_BOUND_PCT:g}% (or {KIND_FLOOR_US:g} us) of the truth: " + "; ".join(
            f"{c} {'NO' if outside[c] else 'yes'} (worst {worst[c][0]:.1f}%" + (f": {worst[c][1]}" if worst[c][1] else "")
            + (f"; outside: {' | '.join(outside[c])})" if outside[c] else ")") for c, _ in cols))


def truth_vs_model(data, name, truth_kind, truths):
    """The ground truth's spread against prismd --simulate (rank 0): a model
    near the truth's fastest iterations but below its mean says the gap is
    jitter in the truth (a cost every iteration pays would lift the minimum
    too). Its compute per kind: whether the sleeps last what the graph says.
    (Per communication kind: kind_tables.)"""
    t = truths.get(0)
    try:
        mm = load(os.path.join(data, name, "model.json"))["iteration_time_s"] * 1e3
    except (TypeError, KeyError):
        return
    if not t:
        return
    ti = t["iteration_ms"][t.get("warmup", 0):]
    if len(ti) < 2:
        return
    s, mean = sorted(ti), statistics.mean(ti)
    var = sum((x - mean) ** 2 for x in ti)
    lag1 = sum((ti[i] - mean) * (ti[i + 1] - mean) for i in range(len(ti) - 1)) / var if var else 0.0
    print(f"\n## {name}: {truth_kind} vs prismd --simulate, rank 0: {len(ti)} iterations")
    print(f"model {mm:.3f} ms; truth min {s[0]:.3f} ({pct(s[0], mm):+.2f}%), p10 {s[len(s) // 10]:.3f} "
          f"({pct(s[len(s) // 10], mm):+.2f}%), median {statistics.median(ti):.3f} "
          f"({pct(statistics.median(ti), mm):+.2f}%), mean {mean:.3f} ({pct(mean, mm):+.2f}%), "
          f"sd {statistics.stdev(ti):.3f}, lag-1 autocorrelation {lag1:+.2f}")
    for k, v in sorted(t.get("compute_us", {}).items()):
        print(f"compute {k}: median {v['median']:.1f} us over {v['n']} (graph {v.get('graph_us', float('nan')):.1f} us)")
    host_lines(truths, t.get("warmup", 0), ti)


def host_lines(truths, warmup, iteration_ms, spike_pct=1.0):
    """What happened around the truth's slow iterations (rank 0's iterations
    more than spike_pct over their median): the ranks' hosts that stalled
    (garbage collections, hosts that had fallen behind their GPU: driver.py's
    host section, host_watch.py; a spike no host explains is the network's or
    the GPU's) and the first ops, over every rank's timeline, that started
    late (spikes.py: where the delay began, and whether that op ran long or
    waited)."""
    hosts = {r: res["host"] for r, res in truths.items() if isinstance(res.get("host"), dict)}
    measured = range(warmup, warmup + len(iteration_ms))
    if hosts:
        pauses = [c[2] for h in hosts.values() for c in h.get("gc", []) if c[0] in measured]
        modes = sorted({h.get("gc_mode", "?") for h in hosts.values()})
        longest = f", longest {max(pauses):.1f} ms" if pauses else ""
        print(f"hosts ({len(hosts)} ranks, gc {'/'.join(modes)}): {len(pauses)} collections in the measured "
              f"iterations{longest}")
    med = statistics.median(iteration_ms)
    for i, ms in enumerate(iteration_ms):
        if pct(ms, med) <= spike_pct:
            continue
        it = warmup + i
        parts = []
        if hosts:
            why = [f"rank {r} {w}" for r, h in sorted(hosts.items()) for w in [host_watch.stalls(h, it)] if w]
            why += [f"rank {r} began to enqueue it {ms:+.1f} ms late" for r, ms in host_watch.late_enqueues(hosts, it)]
            parts.append("; ".join(why) or "no host stalled")
        late, before = spikes.first_late_ops(truths, it), spikes.late_into(truths, it)
        if late:
            parts.append("first late: " + spikes.describe(late))
        if before:
            parts.append(f"came in late from iteration {it - 1}: " + "; ".join(
                f"rank {r} ({label} {lateness:+.1f} ms)" for r, label, lateness in before))
        if parts:
            print(f"  iteration {it} {pct(ms, med):+.2f}% over the median: " + "; ".join(parts))


# The bounds for a step (the fidelity issue's acceptance, tighter than the
# timing issue's 1%, 2%, 2%): mean iteration error, worst iteration, the late
# iteration (a late real rank), peak GPU memory (%). A slow virtual rank's
# spec (`straggler:`) is judged by its mean too, against "slow rank mean".
STEP_BOUNDS = (("mean", 0.5), ("worst iteration", 1.5), ("late iteration", 1.0), ("slow rank mean", 1.0),
               ("peak memory", 0.1))


def step_verdict(errors):
    """One line: each measured error (name -> %) against STEP_BOUNDS."""
    parts, missed = [], []
    for key, bound in STEP_BOUNDS:
        if key not in errors:
            continue
        ok = abs(errors[key]) <= bound
        parts.append(f"{key} {abs(errors[key]):.2f}% {'<=' if ok else '>'} {bound:g}%")
        if not ok:
            missed.append(key)
    verdict = "within every bound" if not missed else "outside: " + ", ".join(missed)
    return "bounds: " + "; ".join(parts) + f" -> {verdict}"


def step_tables(out, data, name, runs):
    # A second truth (truth-again) is judged as a hybrid is: its errors
    # against the first are the truth's own run-to-run spread. Three truths
    # or more are also pooled (pooled_tables).
    for truth_kind, base_kinds in (("truth", ["hybrid1", "hybrid2", "hybrid1-run"]),
                                   ("truth-late", ["hybrid1-late"])):
        truths = run_results(out, name, truth_kind)
        if not truths:
            continue
        again_kinds = again_runs(truth_kind, runs)
        hybrid_kinds = base_kinds + again_kinds
        truth_vs_model(data, name, truth_kind, truths)
        kind_tables(out, data, name, truth_kind, truths, hybrid_kinds, runs)
        if truth_kind == "truth-late" and "hybrid1-late" in runs:
            late_table(out, data, name, truths, runs)
        if truth_kind == "truth":
            slow_table(out, data, name, truths, runs)
        judged = {}  # (kind, rank) -> errors, for the floor line below
        for kind in hybrid_kinds:
            if kind not in runs:
                continue
            for r in sorted(truths):
                h = load(os.path.join(out, f"{name}-{kind}", f"r{r}.json"))
                if h:
                    other = "again" if "again" in kind else "hybrid"  # a second truth, or a hybrid run
                    judged[(kind, r)] = judge_run(data, name, f"{kind} vs {truth_kind}", truths[r], h, kind, r, other)
        floor_lines(name, again_kinds[0] if again_kinds else None, judged)
        if len(again_kinds) >= 2:
            pooled_tables(out, data, name, truth_kind, [truth_kind] + again_kinds, base_kinds, runs)


def run_results(out, name, kind):
    """A run's results per rank (r<rank>.json of ranks 0..63): {rank: result}."""
    results = {}
    for r in range(0, 64):
        j = load(os.path.join(out, f"{name}-{kind}", f"r{r}.json"))
        if j:
            results[r] = j
    return results


def again_runs(truth_kind, runs):
    """The repeats of a truth that ran (truth-again, truth-again2, ...), in order."""
    found = [k for k in runs if re.fullmatch(re.escape(truth_kind) + r"-again(\d*)", k)]
    return sorted(found, key=lambda k: int(k.rsplit("again", 1)[1] or 1))


def run_errors(data, name, t, h, kind):
    """The errors (%) of run h against truth t that STEP_BOUNDS judges: mean,
    worst iteration, the slow rank's mean (a straggler spec), the late
    iteration (late runs), peak memory. Pure."""
    wu = t.get("warmup", 0)
    ti, hi = t["iteration_ms"][wu:], h["iteration_ms"][wu:]
    n = min(len(ti), len(hi))
    mt, mh = statistics.mean(ti[:n]), statistics.mean(hi[:n])
    errors = {"mean": pct(mh, mt), "worst iteration": max(abs(pct(hi[i], ti[i])) for i in range(n))}
    if "STRAGGLER_RANK" in read_meta(data, name):
        errors["slow rank mean"] = errors["mean"]
    k = int(os.environ.get("LATE_ITER", "10"))
    if "late" in kind and len(t["iteration_ms"]) > k and len(h["iteration_ms"]) > k:
        errors["late iteration"] = pct(h["iteration_ms"][k], t["iteration_ms"][k])
    if "peak_gpu_bytes" in t and "peak_gpu_bytes" in h:
        errors["peak memory"] = pct(h["peak_gpu_bytes"], t["peak_gpu_bytes"])
    return errors


def judge_run(data, name, title, t, h, kind, r, other):
    """One run (a hybrid, or a truth's repeat) against a truth, rank r:
    mean, worst iteration, the late iteration (late runs), peak memory, each
    against STEP_BOUNDS; prints the verdict and returns the errors (%)."""
    wu = t.get("warmup", 0)
    ti, hi = t["iteration_ms"][wu:], h["iteration_ms"][wu:]
    n = min(len(ti), len(hi))
    errs = [pct(hi[i], ti[i]) for i in range(n)]
    mt, mh = statistics.mean(ti[:n]), statistics.mean(hi[:n])
    errors = run_errors(data, name, t, h, kind)
    print(f"\n## {name}: {title}, rank {r}: {n} iterations after {wu} warm-up")
    print(f"mean iteration: truth {mt:.3f} ms, {other} {mh:.3f} ms, error {errors['mean']:+.2f}%; "
          f"worst iteration |error| {errors['worst iteration']:.2f}%; "
          f"mean |error| per iteration {statistics.mean(abs(e) for e in errs):.2f}%")
    k = int(os.environ.get("LATE_ITER", "10"))
    if "late iteration" in errors:
        print(f"late iteration {k}: truth {t['iteration_ms'][k]:.3f} ms, {other} {h['iteration_ms'][k]:.3f} ms, "
              f"error {errors['late iteration']:+.2f}%")
    if "peak memory" in errors:
        print(f"peak GPU memory: truth {t['peak_gpu_bytes']} B (reserved {t['peak_reserved_bytes']}, NCCL "
              f"{t['nccl_device_bytes']}), {other} {h['peak_gpu_bytes']} B (reserved "
              f"{h['peak_reserved_bytes']}, NCCL {h['nccl_device_bytes']}), error "
              f"{errors['peak memory']:+.4f}%")
    print(step_verdict(errors))
    print(f"per iteration (ms) truth/{other}: " + " ".join(f"{ti[i]:.2f}/{hi[i]:.2f}" for i in range(n)))
    return errors


def pooled_tables(out, data, name, truth_kind, truth_kinds, base_kinds, runs):
    """Three truths or more of one spec (truth, truth-again, truth-again2,
    ...): the hybrids against their pool (pooled.pool_results: per iteration
    the median of the runs), and each truth against the pool of the others,
    which is the floor a deterministic hybrid is held to on that host."""
    per_kind = {k: run_results(out, name, k) for k in truth_kinds}
    failed = [k for k in truth_kinds if not per_kind[k]]
    truth_kinds = [k for k in truth_kinds if per_kind[k]]
    ranks = sorted(set.intersection(*(set(per_kind[k]) for k in truth_kinds))) if truth_kinds else []
    if len(truth_kinds) < 3 or not ranks:
        print(f"\n{name}: no pooled {truth_kind}: {len(truth_kinds)} of its runs left results (three are needed)")
        return
    pooled = {r: pooled_mod.pool_results([per_kind[k][r] for k in truth_kinds]) for r in ranks}
    label = f"pooled {truth_kind} ({len(truth_kinds)} runs)"
    print(f"\n## {name}: the hybrids against the {label}: per iteration the median of the runs, "
          f"per operation kind the median of their medians"
          + (f" (left out, no results: {', '.join(failed)})" if failed else ""))
    kind_tables(out, data, name, label, pooled, base_kinds, runs)
    judged = {}
    for kind in base_kinds:
        for r in ranks:
            h = load(os.path.join(out, f"{name}-{kind}", f"r{r}.json")) if kind in runs else None
            if h:
                judged[(kind, r)] = judge_run(data, name, f"{kind} vs the {label}", pooled[r], h, kind, r, "hybrid")
    for kind in truth_kinds:
        for r in sorted({r for _, r in judged} or {ranks[0]}):  # the hybrids' real ranks
            rest = pooled_mod.pool_results([per_kind[k][r] for k in truth_kinds if k != kind])
            judged[(kind, r)] = judge_run(data, name, f"{kind} vs the pool of the other {len(truth_kinds) - 1}",
                                          rest, per_kind[kind][r], kind, r, "again")
    for (kind, r), e in sorted(judged.items()):
        if kind in truth_kinds:
            continue
        floor = [judged[(k, r)] for k in truth_kinds]
        at = [key for key in ("mean", "worst iteration", "late iteration") if key in e]
        typical = {key: statistics.median(abs(f[key]) for f in floor) for key in at}
        inside = all(abs(e[key]) <= typical[key] for key in at)
        print(f"{name}: {kind} against the {label}, rank {r}: " + "; ".join(
            f"{key} {abs(e[key]):.2f}% (a truth against the others: median {typical[key]:.2f}%, "
            f"worst {max(abs(f[key]) for f in floor):.2f}%)" for key in at)
            + (" -> within a typical truth's spread" if inside else
               " -> outside a typical truth's spread: " + ", ".join(k for k in at if abs(e[k]) > typical[k])))
    if truth_kind == "truth" and 0 in pooled:
        pooled_slow_cost(out, data, name, truth_kinds, base_kinds, runs, pooled[0])


def pooled_slow_cost(out, data, name, truth_kinds, base_kinds, runs, pooled_slow):
    """A slow-rank spec whose base spec also has three truths or more: what
    the slow rank cost, pooled truth against pooled truth (rank 0's mean
    measured iteration), beside each hybrid's (slow run against its base run)
    and the model's. One truth of each gives a cost that the truths' own
    scatter (a few ms) can swamp; the pools shrink it."""
    meta = read_meta(data, name)
    base = straggler_base(name, {d.rsplit("-", 1)[0] for d in os.listdir(out)})
    if "STRAGGLER_RANK" not in meta or not base:
        return
    base_runs = [r[0] for r in (run_results(out, base, k) for k in truth_kinds) if 0 in r]
    if len(base_runs) < 3:
        return
    truth_cost = statistics.mean(timed(pooled_slow)) - statistics.mean(timed(pooled_mod.pool_results(base_runs)))
    parts = [f"truth {truth_cost:+.3f} ms"]
    for kind in base_kinds:
        h = load(os.path.join(out, f"{name}-{kind}", "r0.json")) if kind in runs else None
        b = load(os.path.join(out, f"{base}-{kind}", "r0.json"))
        if h and b and timed(h) and timed(b):
            cost = statistics.mean(timed(h)) - statistics.mean(timed(b))
            parts.append(f"{kind} {cost:+.3f} ms ({cost - truth_cost:+.3f} ms against the truth's)")
    model, mb = model_iteration_ms(data, name), model_iteration_ms(data, base)
    if model and mb:
        parts.append(f"model {model - mb:+.3f} ms ({model - mb - truth_cost:+.3f} ms against the truth's)")
    print(f"{name}: what the slow rank cost, pooled ({len(base_runs)} truths of {base} and the pool above), "
          f"rank 0's mean iteration: " + ", ".join(parts))


def floor_lines(name, again, judged):
    """Where a second truth ran (`again`: its run kind, or None): each
    hybrid's errors beside the truth's own against itself (the floor under
    any hybrid's error on that host), per real rank of the hybrid."""
    if not again:
        return
    for (kind, r), e in sorted(judged.items()):
        f = judged.get((again, r))
        if "again" in kind or f is None:
            continue
        at = [k for k in ("mean", "worst iteration", "late iteration") if k in e and k in f]
        verdict = ("within the truth's own spread" if all(abs(e[k]) <= abs(f[k]) for k in at)
                   else "outside the truth's own spread: " + ", ".join(k for k in at if abs(e[k]) > abs(f[k])))
        print(f"{name}: {kind} against the truth's own spread ({again}), rank {r}: " + "; ".join(
            f"{k} {abs(e[k]):.2f}% vs {abs(f[k]):.2f}%" for k in at) + f" -> {verdict}")


def timed(result):
    """A step run's measured iterations (ms), warm-up left out."""
    return result["iteration_ms"][result.get("warmup", 0):]


def model_late(data, name, rank):
    """What prismd --simulate --late made of that rank's delay (prepare.sh's
    model-late-r<rank>.json): its "late" entry, or None."""
    m = load(os.path.join(data, name, f"model-late-r{rank}.json"))
    try:
        return m["late"][0]
    except (TypeError, KeyError, IndexError):
        return None


def late_table(out, data, name, truths, runs):
    """A late real rank (run-gpu.sh's truth-late and hybrid1-late: rank 0
    computes LATE_MS longer in iteration LATE_ITER, warm-up counted): per real
    rank, the iterations around the late one in both runs, and how much the
    late iteration and the three after it grew over the run's median
    iteration (the truth passes the delay on; does the hybrid pass on as
    much?)."""
    k, late_ms = int(os.environ.get("LATE_ITER", "10")), float(os.environ.get("LATE_MS", "20"))
    late_rank = int(os.environ.get("LATE_RANK", "0"))
    late_op_lines(out, name, late_rank, ["truth-late"] + again_runs("truth-late", runs) + ["hybrid1-late"])
    for r in sorted(truths):
        h = load(os.path.join(out, f"{name}-hybrid1-late", f"r{r}.json"))
        t = truths[r]
        if not h or len(t["iteration_ms"]) <= k or len(h["iteration_ms"]) <= k:
            continue
        wu = t.get("warmup", 0)
        who = "real rank" if late_rank == 0 else "rank (virtual in the hybrid: prismd --late)"
        print(f"\n## {name}: late {who} (rank {late_rank} computes {late_ms:g} ms longer in iteration {k}), rank {r}")
        print(f"{'iteration':>9s} {'truth-late ms':>14s} {'hybrid1-late ms':>16s} {'err':>8s}")
        last = min(len(t["iteration_ms"]), len(h["iteration_ms"]))
        for i in range(max(wu, k - 2), min(last, k + 4)):
            a, b = h["iteration_ms"][i], t["iteration_ms"][i]
            print(f"{i:9d} {b:14.3f} {a:16.3f} {pct(a, b):+7.2f}%" + ("  <- late" if i == k else ""))
        mt, mh = statistics.mean(t["iteration_ms"][wu:last]), statistics.mean(h["iteration_ms"][wu:last])
        print(f"{'mean':>9s} {mt:14.3f} {mh:16.3f} {pct(mh, mt):+7.2f}%")

        def growth(it):
            others = [x for i, x in enumerate(it[wu:last], wu) if not k <= i < k + 4]
            base = statistics.median(others) if others else float("nan")
            return it[k] - base, sum(x - base for x in it[k:min(last, k + 4)])
        (tg, tg4), (hg, hg4) = growth(t["iteration_ms"]), growth(h["iteration_ms"])
        print(f"growth over the run's median iteration: late iteration truth {tg:+.3f} ms, hybrid {hg:+.3f} ms; "
              f"iterations {k}..{k + 3} together truth {tg4:+.3f} ms, hybrid {hg4:+.3f} ms (the delay: {late_ms:g} ms)")
        model = model_late(data, name, late_rank)
        if model is not None:
            print(f"the model (prismd --simulate --late {model['rank']}:{model['iteration']}:{model['ms']:g}, prepare.sh): late "
                  f"iteration {model['iteration_over_others_ms']:+.3f} ms over the others")


def late_op_lines(out, name, late_rank, kinds):
    """The late rank's late op as its GPU ran it, per run that left one
    (driver.py's late_op): did the sleep last what was asked, and did it
    start when it usually does? A late truth whose iteration grew by more
    than the delay says here whether the op itself ran long."""
    rows = []
    for kind in kinds:
        op = (load(os.path.join(out, f"{name}-{kind}", f"r{late_rank}.json")) or {}).get("late_op")
        if op:
            rows.append((kind, op))
    if not rows:
        return
    print(f"\n## {name}: rank {late_rank}'s late op as its GPU ran it (ms)")
    print(f"{'run':<22}{'op':<20}{'asked':>9}{'took':>9}{'over':>8}{'usual':>9}{'start':>9}{'usual start':>13}")
    for kind, op in rows:
        asked = op["graph_ms"] + op["late_ms"]

        def num(v):
            return f"{v:.3f}" if v is not None else "-"
        print(f"{kind:<22}{op['label'][:19]:<20}{asked:>9.3f}{op['measured_ms']:>9.3f}{op['measured_ms'] - asked:>+8.3f}"
              f"{num(op['usual_ms']):>9}{op['start_ms']:>9.3f}{num(op['usual_start_ms']):>13}")


def straggler_base(name, runs_all):
    """The spec a straggler spec was made from, by name (NAME-slow or
    NAME-straggler: NAME), if it was run too; else None."""
    for suffix in ("-slow", "-straggler"):
        if name.endswith(suffix) and name[: -len(suffix)] in runs_all:
            return name[: -len(suffix)]
    return None


def slow_table(out, data, name, truths, runs):
    """A slow virtual rank (a spec with `straggler:`; prepare.sh writes
    STRAGGLER_RANK into meta.env): the mean, median, min and max iteration of
    rank 0 in the truth, each hybrid run and prismd --simulate, errors against
    the truth; and, when the spec it was made from ran too (NAME-slow or
    NAME-straggler against NAME), what the slow rank cost in each."""
    meta = read_meta(data, name)
    if "STRAGGLER_RANK" not in meta or 0 not in truths:
        return
    cols = [("truth", timed(truths[0]))]
    for kind in ("hybrid1", "hybrid2"):
        h = load(os.path.join(out, f"{name}-{kind}", "r0.json")) if kind in runs else None
        if h and timed(h):
            cols.append((kind, timed(h)))
    model = model_iteration_ms(data, name)
    print(f"\n## {name}: slow virtual rank {meta['STRAGGLER_RANK']} (compute x{meta.get('STRAGGLER_SCALE', '?')}), "
          f"rank 0, ms (err against the truth)")
    print(f"{'':8s}" + "".join(f" {c:>11s} {'err':>8s}" for c, _ in cols) + (f" {'model':>11s} {'err':>8s}" if model else ""))
    for stat, fn in (("mean", statistics.mean), ("median", statistics.median), ("min", min), ("max", max)):
        t = fn(cols[0][1])
        row = f"{stat:8s}" + "".join(f" {fn(v):11.3f} {pct(fn(v), t):+7.2f}%" for _, v in cols)
        if model:
            row += f" {model:11.3f} {pct(model, t):+7.2f}%"
        print(row)
    slow = truths.get(int(meta["STRAGGLER_RANK"]), {}).get("compute_us", {})
    for k, v in sorted(slow.items()):  # did its sleeps last what the graph asks of it, beside rank 0's?
        r0 = truths[0].get("compute_us", {}).get(k)
        print(f"slow rank {meta['STRAGGLER_RANK']}'s compute {k} in the truth: median {v['median']:.1f} us "
              f"(graph {v.get('graph_us', float('nan')):.1f} us)"
              + (f"; rank 0's {r0['median']:.1f} us (graph {r0.get('graph_us', float('nan')):.1f} us)" if r0 else ""))
    base = straggler_base(name, {d.rsplit("-", 1)[0] for d in os.listdir(out)})
    if base:
        parts = []
        for kind, v in cols:
            b = load(os.path.join(out, f"{base}-{kind}", "r0.json"))
            if b and timed(b):
                parts.append(f"{kind} {statistics.mean(v) - statistics.mean(timed(b)):+.3f} ms "
                             f"({pct(statistics.mean(v), statistics.mean(timed(b))):+.2f}%)")
        mb = model_iteration_ms(data, base)
        if model and mb:
            parts.append(f"model {model - mb:+.3f} ms ({pct(model, mb):+.2f}%)")
        if parts:
            print(f"what the slow rank cost (mean iteration against {base}): " + ", ".join(parts))


def model_iteration_ms(data, name):
    """prismd --simulate's iteration (ms) of a prepared spec, or None."""
    try:
        return load(os.path.join(data, name, "model.json"))["iteration_time_s"] * 1e3
    except (TypeError, KeyError):
        return None


def read_meta(data, name):
    """A prepared spec's meta.env as a dict ({} if absent)."""
    meta = {}
    try:
        for line in open(os.path.join(data, name, "meta.env")):
            if "=" in line:
                k, v = line.strip().split("=", 1)
                meta[k] = v
    except OSError:
        pass
    return meta


def model_tables(out, data, name, runs):
    """Runs without a ground truth (a world too large for one host): the real
    ranks' iteration times beside prismd --simulate's."""
    try:
        model_s = load(os.path.join(data, name, "model.json"))["iteration_time_s"]
    except (TypeError, KeyError):
        return
    for kind in sorted(runs):
        if not kind.startswith("hybrid"):
            continue
        for r in range(0, 64):
            h = load(os.path.join(out, f"{name}-{kind}", f"r{r}.json"))
            if not h:
                continue
            wu = h.get("warmup", 0)
            hi = h["iteration_ms"][wu:]
            if not hi:
                continue
            mh, mm = statistics.mean(hi), model_s * 1e3
            print(f"\n## {name}: {kind} vs prismd --simulate, rank {r}: {len(hi)} iterations after {wu} warm-up")
            print(f"mean iteration: model {mm:.3f} ms, hybrid {mh:.3f} ms, difference {pct(mh, mm):+.2f}%; "
                  f"worst iteration {max(abs(pct(x, mm)) for x in hi):.2f}%")
            print("per iteration (ms): " + " ".join(f"{x:.2f}" for x in hi))


def prismd_summary(out):
    for d in sorted(os.listdir(out)):
        log = os.path.join(out, d, "prismd.log")
        if not os.path.exists(log):
            continue
        with open(log, errors="replace") as f:
            text = f.read()
        # late receives: the share of a steady iteration the real ranks' receives from virtual peers
        # came late (issue 22's bound: under 1%).
        lines = [l for l in text.splitlines()
                 if re.search(r"hybrid:|late receives|engine lag|divergence|replay stopped", l)]
        print(f"\n[{d}] prismd: " + "\n  ".join(lines[:8]))


def link_hold_summary(out):
    """How well each run's shaped real-peer links held the model
    (PRISM_LINK_REPORT lines in the ranks' logs): rank 0 and the rank whose
    bytes most often landed after the modelled delivery."""
    for d in sorted(os.listdir(out)):
        reports = {}
        for name in sorted(os.listdir(os.path.join(out, d))) if os.path.isdir(os.path.join(out, d)) else []:
            m = re.match(r"r(\d+)\.log$", name)
            if not m:
                continue
            with open(os.path.join(out, d, name), errors="replace") as f:
                lines = [l.split(": ", 2)[-1].strip() for l in f if "shaped receives:" in l]
            if lines:
                reports[int(m.group(1))] = lines[-1]
        if not reports:
            continue
        late = {r: float(re.search(r"\(([\d.]+)%\)", t).group(1)) if re.search(r"\(([\d.]+)%\)", t) else 0.0
                for r, t in reports.items()}
        worst = max(late, key=late.get)
        print(f"\n[{d}] links held ({len(reports)} ranks reporting): rank {worst} (most late): {reports[worst]}")
        if 0 in reports and worst != 0:
            print(f"  rank 0: {reports[0]}")


def neighbour_summary(out):
    """The GPU neighbour beside each run (NEIGHBOUR_GBPS: gpu_neighbour.py's
    neighbour.txt): the rate it held, or why it did not run."""
    for d in sorted(os.listdir(out)):
        path = os.path.join(out, d, "neighbour.txt")
        if not os.path.isfile(path):
            continue
        with open(path, errors="replace") as f:
            lines = [l.strip() for l in f if l.strip()]
        print(f"\n[{d}] {lines[-1] if lines else 'gpu neighbour: no output (did it start?)'}")


def cpu_stalls_summary(out):
    """How late each run's CPUs woke a sleeper (CPU_STALLS=1: cpu-stalls.txt, cpu_stalls.py), and
    whether rank 0's slow iterations held the long stalls."""
    for d in sorted(os.listdir(out)):
        path = os.path.join(out, d, "cpu-stalls.txt")
        if os.path.isfile(path):
            print(f"\n[{d}] {cpu_stalls.summary(path, spikes.run_results(os.path.join(out, d)))}")


def thread_cpu_summary(out, top=3):
    """Where each run's CPU went (THREAD_CPU=1: thread_cpu.py's threads.txt):
    the busiest thread names and the total, in cores."""
    for d in sorted(os.listdir(out)):
        path = os.path.join(out, d, "threads.txt")
        if not os.path.isfile(path):
            continue
        rows = []
        with open(path) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) == 4 and not line.startswith(("#", "cpu_s")):
                    rows.append((float(parts[1]), int(parts[2]), parts[3]))
        total = [r for r in rows if r[2] == "all"]
        busiest = sorted((r for r in rows if r[2] != "all"), reverse=True)[:top]
        if not busiest:
            continue
        text = ", ".join(f"{name} {cores:.2f} ({n} threads)" for cores, n, name in busiest)
        print(f"\n[{d}] CPU by thread, in cores: {text}" + (f"; all {total[0][0]:.2f}" if total else ""))


def nccl_choices_summary(out):
    """What NCCL chose, per run (NCCL_CHOOSES=1: run-gpu.sh's nccl-choices.txt, from NCCL's TUNING log
    lines of every rank): algorithm/protocol per collective and size, and the protocols seen at all."""
    for d in sorted(os.listdir(out)):
        path = os.path.join(out, d, "nccl-choices.txt")
        if not os.path.isfile(path):
            continue
        per_op, protocols = {}, set()
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) != 5:
                    continue
                op, nbytes, algo, proto, _count = parts
                per_op.setdefault(op, {}).setdefault(int(nbytes), set()).add(f"{algo}/{proto}")
                protocols.add(proto)
        if not per_op:
            continue
        print(f"\n[{d}] NCCL's choices (its TUNING log, all ranks); protocols in use: {', '.join(sorted(protocols))}")
        for op in sorted(per_op):
            sizes = per_op[op]
            print(f"  {op}: " + ", ".join(f"{human_bytes(b)} {'+'.join(sorted(sizes[b]))}" for b in sorted(sizes)))


def hang_summary(out, top=4):
    """Runs whose ranks were still running shortly before RUN_TIMEOUT (run-gpu.sh's hang-threads.txt: a
    "# rank R pid P [at: OP]" line, then one line per thread, "pid tid [name] wchan syscall=N state=S"):
    where their threads waited, and per rank the op driver.py noted last (whereabouts.py) and where its main
    thread was (its innermost Python frame, and the driver's, from the stacks SIGUSR1 wrote into r<R>.log),
    ranks alike together."""
    for d in sorted(os.listdir(out)):
        path = os.path.join(out, d, "hang-threads.txt")
        if not os.path.isfile(path):
            continue
        pids, waits, rank_pids, threads, rank_at = set(), {}, {}, {}, {}
        with open(path) as f:
            for line in f:
                h = re.match(r"# rank (\d+) pid (\d+)(?: at: (.*))?", line)
                if h:
                    rank_pids[int(h.group(1))] = h.group(2)
                    if h.group(3):
                        rank_at[int(h.group(1))] = h.group(3).strip()
                    continue
                m = re.match(r"(\d+) (\d+) \[(.*)\] (\S*)", line)
                if m:
                    pids.add(m.group(1))
                    threads.setdefault(m.group(1), []).append(line)
                    key = f"{m.group(3)} in {m.group(4) or '(running)'}"
                    waits[key] = waits.get(key, 0) + 1
        common = sorted(waits.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
        print(f"\n[{d}] {len(pids)} rank(s) still running shortly before RUN_TIMEOUT; threads: " +
              ", ".join(f"{k} x{n}" for k, n in common) + " (Python stacks in the ranks' r<R>.log)")
        where = {}
        for rank, pid in sorted(rank_pids.items()):
            text = rank_whereabouts(os.path.join(out, d), rank, threads.get(pid, []))
            if rank in rank_at:
                text = f"at {rank_at[rank]}: {text}"
            where.setdefault(text, []).append(rank)
        for text, ranks in sorted(where.items(), key=lambda kv: kv[1][0]):
            print(f"  {'rank' if len(ranks) == 1 else 'ranks'} {rank_ranges(ranks)}: {text}")


def rank_whereabouts(run_dir, rank, thread_lines):
    """One rank of a hung run in a few words: its main thread's innermost Python frame and the driver's
    (r<R>.log), or that none was written, and how many threads it had left."""
    frames = main_thread_frames(os.path.join(run_dir, f"r{rank}.log"))
    if not frames:
        stack = "no Python stack written"
    else:
        inner = frames[0]
        own = next((fr for fr in frames if fr.startswith("driver.py:")), None)
        stack = inner if own in (None, inner) else f"{inner} < {own}"
    if len(thread_lines) <= 2:  # what a process in exit leaves: its leader and the thread tearing down
        return f"{stack}; {len(thread_lines)} thread(s) left (exiting?)"
    return stack


def main_thread_frames(log_path):
    """The main thread's frames, innermost first, as "file.py:LINE function", from the last faulthandler
    dump in a rank's log (the block whose outermost frame is <module>); [] when there is none."""
    try:
        with open(log_path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    blocks, block = [], None
    for line in lines:
        if re.match(r"(Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):", line):
            block = []
            blocks.append(block)
            continue
        m = re.match(r'\s+File "(.*)", line (\d+) in (\S+)', line)
        if m and block is not None:
            block.append(f"{os.path.basename(m.group(1))}:{m.group(2)} {m.group(3)}")
        elif block is not None and block:
            block = None
    mains = [b for b in blocks if b and b[-1].endswith(" <module>")]
    return mains[-1] if mains else []


def rank_ranges(ranks):
    """[0, 1, 2, 5, 7, 8] -> "0-2, 5, 7-8"."""
    parts, start = [], None
    for i, r in enumerate(ranks):
        if start is None:
            start = r
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            parts.append(str(start) if start == r else f"{start}-{r}")
            start = None
    return ", ".join(parts)


def human_bytes(n):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def acceptance_summary(out, data, runs):
    """The last table: per step spec, hybrid run and real rank, its errors
    against the pooled truth (three truths or more) or the one truth, each
    against the bounds (STEP_BOUNDS, a straggler spec's mean by "slow rank
    mean" alone; kinds: KIND_BOUND_PCT or KIND_FLOOR_US), in one line each:
    what a note about the acceptance quotes."""
    rows = []
    for name, kinds in sorted(runs.items()):
        if read_meta(data, name).get("MODE") == "sweep":
            continue
        for truth_kind, hybrid_kinds in (("truth", ["hybrid1", "hybrid2", "hybrid1-run", "hybrid2-run"]),
                                         ("truth-late", ["hybrid1-late"])):
            truth_kinds = [k for k in [truth_kind] + again_runs(truth_kind, kinds) if run_results(out, name, k)]
            if not truth_kinds:
                continue
            per_kind = {k: run_results(out, name, k) for k in truth_kinds}
            ranks = set.intersection(*(set(v) for v in per_kind.values()))
            pooled = len(truth_kinds) >= 3
            for kind in [k for k in hybrid_kinds if k in kinds]:
                for r, h in sorted(run_results(out, name, kind).items()):
                    if r not in ranks:
                        continue
                    t = (pooled_mod.pool_results([per_kind[k][r] for k in truth_kinds]) if pooled
                         else per_kind[truth_kind][r])
                    rows.append((name, kind, r, len(truth_kinds) if pooled else 1, run_errors(data, name, t, h, kind),
                                 kinds_missed(t, h)))
    if not rows:
        return
    print(f"\n## Acceptance summary: each hybrid against its truth (the pool of three runs or more, else the one); "
          f"bounds " + ", ".join(f"{k} {b:g}%" for k, b in STEP_BOUNDS)
          + f", operation kinds {KIND_BOUND_PCT:g}% (or {KIND_FLOOR_US:g} us)")
    print(f"{'spec':28s} {'run':12s} {'rank':>4s} {'truths':>6s} {'mean':>8s} {'worst':>7s} {'late':>8s} "
          f"{'kinds':>6s}  verdict")
    for name, kind, r, n, e, missed in rows:
        # A straggler spec's mean is judged by its own bound ("slow rank mean").
        outside = [k for k, b in STEP_BOUNDS if k in e and abs(e[k]) > b
                   and not (k == "mean" and "slow rank mean" in e)]
        if missed:
            outside.append("kinds (" + " | ".join(missed) + ")")
        late = f"{e['late iteration']:+7.2f}%" if "late iteration" in e else f"{'-':>8s}"
        kinds_col = "-" if missed is None else ("yes" if not missed else "NO")
        print(f"{name[:28]:28s} {kind:12s} {r:4d} {n:6d} {e['mean']:+7.2f}% {e['worst iteration']:6.2f}% {late} "
              f"{kinds_col:>6s}  " + ("within" if not outside else "outside: " + ", ".join(outside)))


def main():
    out, data = sys.argv[1], sys.argv[2]
    runs = {}
    for d in sorted(os.listdir(out)):
        m = re.match(r"(.+)-(truth|truth-late|truth-again\d*|truth-late-again\d*|hybrid1|hybrid2|hybrid1-late|hybrid1-run|hybrid2-run)$", d)
        if m:
            runs.setdefault(m.group(1), set()).add(m.group(2))
    for name, kinds in runs.items():
        meta = read_meta(data, name)
        if meta.get("MODE") == "sweep":
            sweep_tables(out, data, name, kinds)
        elif "truth" in kinds or "truth-late" in kinds:
            step_tables(out, data, name, kinds)
        else:
            model_tables(out, data, name, kinds)
    acceptance_summary(out, data, runs)
    prismd_summary(out)
    link_hold_summary(out)
    thread_cpu_summary(out)
    cpu_stalls_summary(out)
    neighbour_summary(out)
    nccl_choices_summary(out)
    hang_summary(out)


if __name__ == "__main__":
    main()

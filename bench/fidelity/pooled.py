"""Several ground truths of one spec pooled into one (compare.py).

On a host where a truth's iterations scatter by a few percent between two
runs of the same program (docs/timing.md, "The truth against itself"), one
truth is a noisy sample of what the program takes; a hybrid run is nearly
deterministic. Pooling K truths gives the hybrid a reference whose noise
shrinks with K, and each truth held against the pool of the others says how
far a run of the real program itself strays: the floor under any error.

pool_results(results) -> one result in the driver's format:
  iteration_ms[i]      the median over the runs of their iteration i (the
                       runs are the same program: iteration i is the same
                       work, the late iteration included); as long as the
                       shortest run
  warmup               the first run's
  comm_us[kind]        {"median": the median of the runs' medians,
                        "n": the runs' counts together}, for the kinds
                       every run has, when every run timed them the same
                       way (comm_timing, kept); none when they differ
  peak_* / nccl_device_bytes   the first run's (the memory of one program
                       does not scatter: compare.py checks it to the byte)

pool_ops(results) -> a sweep's ops in the driver's format: per label every
run has, {"median_us": the median of the runs' medians}.
"""
import statistics

MEMORY_KEYS = ("peak_gpu_bytes", "peak_reserved_bytes", "nccl_device_bytes")


def pool_results(results):
    """One result from the driver results of K >= 1 runs of the same rank."""
    if not results:
        raise ValueError("pool_results: no runs to pool")
    n = min(len(r["iteration_ms"]) for r in results)
    pooled = {
        "warmup": results[0].get("warmup", 0),
        "iteration_ms": [statistics.median(r["iteration_ms"][i] for r in results) for i in range(n)],
    }
    methods = {r.get("comm_timing", "cuda-events") for r in results}
    kinds = set.intersection(*(set(r.get("comm_us", {})) for r in results)) if len(methods) == 1 else set()
    if len(methods) == 1 and "comm_timing" in results[0]:
        pooled["comm_timing"] = results[0]["comm_timing"]
    if kinds:
        pooled["comm_us"] = {
            k: {"median": statistics.median(r["comm_us"][k]["median"] for r in results),
                "n": sum(r["comm_us"][k].get("n", 0) for r in results)}
            for k in sorted(kinds)}
    for key in MEMORY_KEYS:
        if key in results[0]:
            pooled[key] = results[0][key]
    return pooled


def pool_ops(results):
    """One sweep result ({"ops": {label: {"median_us": ...}}}) from K >= 1 runs."""
    if not results:
        raise ValueError("pool_ops: no runs to pool")
    labels = set.intersection(*(set(r.get("ops", {})) for r in results))
    return {"ops": {l: {"median_us": statistics.median(r["ops"][l]["median_us"] for r in results)}
                    for l in sorted(labels)}}

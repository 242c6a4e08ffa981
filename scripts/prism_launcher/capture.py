"""`prism capture`: a run of the real ranks that records what they measure, prism-session-capture's
graph, and the refine rounds (docs/capture.md)."""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

from prism_launcher.common import (HERE, PrismError, need_tool, say)
from prism_launcher.run import (cmd_run)

# ---------------------------------------------------------------- capture

CAPTURE_HELP = """\
prism capture --graph G --ranks R --out DIR [prism run's options] -- PROGRAM ARGS...
prism capture --world N --ranks R --out DIR [--gpus-per-node K] [prism run's options] -- PROGRAM ARGS...

Runs the program as `prism run` does, with prismd recording the plugin
sessions, then writes one capture recording per real rank with the compute
measured on it (prism-session-capture) and extrapolates them to every rank
(prism-graphgen extrapolate; docs/capture.md):
  DIR/sessions.rec                          prismd --record-sessions
  DIR/recordings/rank-<r>.capture.jsonl     what each real rank did, its compute measured
  DIR/captured.graph                        the whole job, one program per role
  DIR/round-<k>/..., DIR/refined.graph      with --refine K: rounds capturing with the previous graph
  DIR/torch/torch-rank-<r>.jsonl            what each real rank asked of torch.distributed (calls,
                                            async_op, work.wait(), allocator memory): scripts/prism_torch,
                                            put first on the ranks' PYTHONPATH (--no-torch-trace: not)
Meanwhile prismd plays G's virtual ranks, so the program must issue G's
operations (as in prism run); choose the real ranks so that every role
(pipeline stage, ...) has one. The captured graph's compute is measured where
the real ranks' NCCL operations delimit it, else G's (docs/capture.md says
which). --out must not exist.

Without --graph, prismd follows the real ranks (prismd --follow; DIR/world.graph
gives it the world of N ranks, K GPUs per node, the NIC of --nic-gbps and
--nic-latency-us, and is the captured graph's cluster unless --cluster says
otherwise): the virtual ranks join the
groups the real ranks make (the program must initialise its communicators
eagerly, init_process_group(device_id=...), and make rank-range groups) and
are on time for every operation; the captured graph is what the real ranks
did: their groups, operations and measured compute (docs/capture.md).
"""


TORCH_TRACE_DIR = os.path.join(HERE, "prism_torch")


def torch_trace_env(folder, trace=True, follow=False):
    """The real ranks' environment for scripts/prism_torch: its sitecustomize first on PYTHONPATH (the
    caller's PYTHONPATH after it); `trace`: PRISM_TORCH_TRACE naming where each rank writes
    torch-rank-<r>.jsonl; `follow` (no graph): PRISM_ANNOUNCE_GROUPS, so that each split_group call's
    groups reach prismd through the store (prism_group_announce.py). Empty when neither is asked for."""
    env = {}
    if trace:
        env["PRISM_TORCH_TRACE"] = os.path.abspath(folder)
    if follow:
        env["PRISM_ANNOUNCE_GROUPS"] = "1"
    if env:
        path = os.environ.get("PYTHONPATH")
        env["PYTHONPATH"] = TORCH_TRACE_DIR + (os.pathsep + path if path else "")
    return env


def session_capture_takes(capture, option):
    """Whether this prism-session-capture takes `option` (older builds lack --torch-trace, --world-graph)."""
    try:
        out = subprocess.run([capture, "--help"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return option in out.stdout


def run_step_cost_args(prismd_args):
    """--run-step-cost-us V for prism-session-capture when prismd was given --step-cost-us V (not auto)."""
    value = None
    for i, a in enumerate(prismd_args):
        if a.startswith("--step-cost-us="):
            value = a.split("=", 1)[1]
        elif a == "--step-cost-us" and i + 1 < len(prismd_args):
            value = prismd_args[i + 1]
    return ["--run-step-cost-us", value] if value not in (None, "auto") else []


def session_capture_reads_torch_traces(capture):
    """Whether this prism-session-capture takes --torch-trace (older builds do not)."""
    return session_capture_takes(capture, "--torch-trace")


def cmd_capture(args):
    if args.daemon:
        raise PrismError("--daemon: prism capture starts its own prismd (it must record the sessions)")
    if os.path.lexists(args.out):
        raise PrismError(f"--out {args.out}: already exists; name a new folder")
    if args.refine < 0:
        raise PrismError(f"--refine {args.refine}: give the most rounds, 0 or more")
    args.rank_env_extra = torch_trace_env(os.path.join(args.out, "torch"), trace=not args.no_torch_trace,
                                          follow=not args.graph)
    if not args.graph and not args.world:
        raise PrismError("prism capture without --graph needs --world N (the target's world size): prismd then "
                         "follows the real ranks (docs/capture.md)")
    if args.dry_run:
        if not args.graph:  # what the capture would run: its world graph in a folder of its own
            follow_world(args, need_tool("prism-graphgen", args.graphgen, "--graphgen"),
                         tempfile.mkdtemp(prefix="prism-capture-dry-run-"))
        return cmd_run(args)
    base = {k: list(v) if isinstance(v, list) else v for k, v in vars(args).items()}  # before the run changes it
    status, steady = capture_once(args, args.out)
    if status != 0 or args.refine == 0:
        return status
    # Refine: capture again with the previous graph, until the first real rank's iteration is stable.
    cluster = args.cluster or args.graph  # the first capture's cluster (the world graph without --graph)
    log_dir = args.log_dir
    graph_of = [os.path.join(args.out, "captured.graph")]

    def round_of(k):
        round_args = argparse.Namespace(**{k: list(v) if isinstance(v, list) else v for k, v in base.items()})
        round_args.graph, round_args.world, round_args.cluster = graph_of[0], None, cluster
        round_args.name = base["name"] or "captured"
        round_args.log_dir = os.path.join(log_dir, f"round-{k}") if log_dir else None
        out = os.path.join(args.out, f"round-{k}")
        if not args.no_torch_trace:
            round_args.rank_env_extra = torch_trace_env(os.path.join(out, "torch"))
        status, steady = capture_once(round_args, out)
        if status == 0:
            graph_of[0] = os.path.join(out, "captured.graph")
        return status, steady

    status, last = refine_rounds(round_of, steady, args.refine, say)
    if last:
        shutil.copyfile(graph_of[0], os.path.join(args.out, "refined.graph"))
        say(f"refined graph: {os.path.join(args.out, 'refined.graph')} (round {last})")
    return status


def refine_rounds(run_round, steady, rounds, report):
    """Up to `rounds` calls of run_round(k) -> (status, steady), each a capture with the previous round's
    graph; `steady` (rank, seconds) is the first real rank's steady iteration before round 1. Reports
    "round k: rank R steady A s -> B s, change C%" per round and stops when the change is under 0.5%.
    Returns (status, the last round that captured a graph, 0 when none)."""
    last = 0
    for k in range(1, rounds + 1):
        status, now = run_round(k)
        if status != 0:
            report(f"round {k} captured nothing (status {status}); the graph of round {last} stands")
            return status, last
        last = k
        if not steady or not now or steady[0] != now[0] or steady[1] <= 0:
            report(f"round {k}: no steady iteration of the first real rank to compare; going on")
            steady = now
            continue
        change = abs(now[1] / steady[1] - 1) * 100
        report(f"round {k}: rank {now[0]} steady {steady[1]:.4f} s -> {now[1]:.4f} s, change {change:.2f}%")
        steady = now
        if change < 0.5:
            report(f"stable after round {k} (change under 0.5%)")
            break
    else:
        if rounds:
            report(f"not stable after {rounds} round(s): the last change was 0.5% or more")
    return 0, last


STEADY_LINE = re.compile(r"^rank (\d+): .*; steady iteration ([0-9.eE+-]+) s")


def first_steady(lines):
    """(rank, seconds) of the lowest rank's "steady iteration" in prism-session-capture's lines, or None."""
    found = [(int(m.group(1)), float(m.group(2))) for m in map(STEADY_LINE.match, lines) if m]
    return min(found) if found else None


def follow_world(args, graphgen, folder):
    """prismd --follow: a graph of the world only (its ranks, cluster and world communicator) in
    `folder`, made args.graph, and prismd's --follow."""
    args.graph = os.path.join(folder, "world.graph")
    nic = (["--nic-gbps", str(args.nic_gbps)] if args.nic_gbps else []) + \
          (["--nic-latency-us", str(args.nic_latency_us)] if args.nic_latency_us else [])
    rc = subprocess.call([graphgen, "collective", "--op", "allreduce", "--bytes", "1K", "--ranks",
                          str(args.world), "--gpus-per-node", str(args.gpus_per_node), *nic, "--name", "world",
                          "-o", args.graph], stdout=subprocess.DEVNULL)
    if rc != 0:
        raise PrismError(f"prism-graphgen could not make the world graph of {args.world} ranks (status {rc})")
    args.prismd_arg = list(args.prismd_arg) + ["--follow"]
    # NCCL's step cost is measured on this run: no lockstep floor beyond the link latency
    # (docs/capture.md, "NCCL's step cost, measured"), unless the caller set one.
    if not any(a.startswith("--step-cost-us") for a in args.prismd_arg):
        args.prismd_arg += ["--step-cost-us", "0"]


def capture_once(args, out):
    """One capture into `out` (created): the run, prism-session-capture, extrapolate. Returns (status,
    the first real rank's steady iteration as (rank, s) or None)."""
    follow = not args.graph
    capture = need_tool("prism-session-capture", args.session_capture, "--session-capture")
    graphgen = need_tool("prism-graphgen", args.graphgen, "--graphgen")
    os.makedirs(out, mode=0o700)
    sessions = os.path.join(out, "sessions.rec")
    recordings = os.path.join(out, "recordings")
    captured = os.path.join(out, "captured.graph")
    torch_traces = os.path.join(out, "torch")
    name = args.name or ("captured" if follow else os.path.splitext(os.path.basename(args.graph))[0] + "-captured")
    if follow:
        follow_world(args, graphgen, out)
    args.prismd_arg = list(args.prismd_arg) + ["--record-sessions", sessions]
    status = cmd_run(args)
    if status != 0:
        say(f"nothing captured: the run ended with status {status} (prismd's recording so far: {sessions})")
        return status, None
    cluster = args.cluster or args.graph  # without --graph: the world graph's cluster
    traced = follow and os.path.isdir(torch_traces) and any(f.endswith(".jsonl") for f in os.listdir(torch_traces))
    if traced and not session_capture_reads_torch_traces(capture):
        say(f"{capture} does not read torch traces (an older build): streams, dependencies and memory "
            f"are left out; the traces are in {torch_traces}")
        traced = False
    steady = None
    # NCCL's step cost is fitted with the links prismd ran with: the graph's, or the world graph's.
    links = ["--world-graph", args.graph] if follow else ["--graph", args.graph]
    if follow and not session_capture_takes(capture, "--world-graph"):
        links = []
    if session_capture_takes(capture, "--run-step-cost-us"):
        links += run_step_cost_args(args.prismd_arg)
    for cmd in ([capture, sessions] + links +
                (["--torch-trace", torch_traces] if traced else []) +
                ["-o", recordings, "--skip-iterations", str(args.skip_iterations)],
                [graphgen, "extrapolate", recordings] + (["--cluster", cluster] if cluster else []) +
                ["--name", name, "-o", captured]):
        done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
        sys.stdout.write(done.stdout)
        sys.stdout.flush()
        if done.returncode != 0:
            raise PrismError(f"{os.path.basename(cmd[0])} failed (status {done.returncode}); the run's recording "
                             f"is {sessions}")
        steady = steady or first_steady(done.stdout.splitlines())
    say(f"captured graph: {captured}")
    return 0, steady

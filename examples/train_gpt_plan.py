#!/usr/bin/env python3
"""The plan of examples/train_gpt.py, in plain Python (no torch): its
configuration, its process groups, its pipeline schedule and the list of
communication operations one rank issues in one iteration.

train_gpt.py drives its training loop with these functions and checks, after
its first iteration, that the operations it really issued are exactly
rank_ops(); test/train_gpt_plan_test.py checks that rank_ops() equals what
`prism-graphgen inspect --ops RANK` says the graph of the matching job file
(examples/train-gpt-*.yaml) makes that rank do. Together they keep the example
and its graph identical: same communicators (members, creation order), same
collectives and send/recvs, same order, same sizes.

It follows prism-graphgen's model of a Megatron job (docs/graphgen.md):
rank = tp + TP*(dp + DP*pp); the groups of parallel.process_groups (minimal by
default, megatron for all of Megatron-core's); the 1F1B or GPipe schedule with
one batched exchange per step in Megatron's order; one data-parallel bucket per
layer (the embedding joins the first layer's, the output layer the last's),
reduce-scattered in fp32 right after the layer's last backward and all-gathered
in bf16 after the optimizer (distributed optimizer).

CLI: train_gpt_plan.py --world 8 --rank 3 [train_gpt.py's model flags] prints
the rank's operations as JSON lines; --groups prints the process groups.
"""
import argparse
import dataclasses
import json
import sys

BF16, FP32 = "bf16", "fp32"


@dataclasses.dataclass
class Config:
    """Model and parallel layout; the defaults are examples/train-gpt-*.yaml's."""
    world: int = 8
    layers: int = 8
    hidden: int = 1024
    heads: int = 16
    ffn_hidden: int = 4096
    seq_len: int = 1024
    vocab: int = 16384
    micro_batch: int = 1
    microbatches: int = 4          # per iteration and data-parallel rank
    tp: int = 2
    pp: int = 2
    schedule: str = "1f1b"         # or gpipe
    groups: str = "minimal"        # or megatron (every group Megatron-core creates)

    @property
    def dp(self):
        return self.world // (self.tp * self.pp)

    @property
    def layers_per_stage(self):
        return self.layers // self.pp

    @property
    def padded_vocab(self):        # Megatron pads to a multiple of 128 * tp
        m = 128 * self.tp
        return (self.vocab + m - 1) // m * m

    @property
    def tokens(self):              # per microbatch
        return self.micro_batch * self.seq_len

    def check(self):
        """Raises ValueError naming the flag when the layout does not fit."""
        rules = [
            (self.world % (self.tp * self.pp) == 0, f"world size {self.world} is not divisible by tp*pp"),
            (self.layers % self.pp == 0, "--layers must be divisible by --pp"),
            (self.hidden % self.heads == 0, "--hidden must be divisible by --heads"),
            (self.heads % self.tp == 0, "--heads must be divisible by --tp"),
            (self.ffn_hidden % self.tp == 0, "--ffn-hidden must be divisible by --tp"),
            (self.schedule in ("1f1b", "gpipe"), "--schedule must be 1f1b or gpipe"),
            (self.groups in ("minimal", "megatron"), "--groups must be minimal or megatron"),
            (min(self.microbatches, self.micro_batch, self.world, self.tp, self.pp) >= 1, "sizes must be >= 1"),
        ]
        for ok, message in rules:
            if not ok:
                raise ValueError(message)
        return self


@dataclasses.dataclass(frozen=True)
class Coords:
    tp: int
    dp: int
    pp: int


def coords(cfg, rank):
    """Megatron's order tp-cp-ep-dp-pp, tp fastest (cp = ep = 1 here)."""
    return Coords(tp=rank % cfg.tp, dp=rank // cfg.tp % cfg.dp, pp=rank // (cfg.tp * cfg.dp))


# ---- process groups (graphgen/megatron_layout.cc) ----

def groups_of(sizes, token):
    """Megatron's RankGenerator: sizes of (tp, cp, ep, dp, pp); the groups of
    ranks that differ only in the dimensions named by token ("tp", "dp-cp")."""
    names = ["tp", "cp", "ep", "dp", "pp"]
    inside = [names.index(t) for t in token.split("-")]
    member_dims = [i for i in range(5) if i in inside]
    group_dims = [i for i in range(5) if i not in inside]
    stride, s = [], 1
    for n in sizes:
        stride.append(s)
        s *= n
    group_size = 1
    for i in member_dims:
        group_size *= sizes[i]
    groups = []
    for g in range(s // group_size):
        base, rest = 0, g
        for i in group_dims:
            base += rest % sizes[i] * stride[i]
            rest //= sizes[i]
        members = []
        for m in range(group_size):
            rank, r = base, m
            for i in member_dims:
                rank += r % sizes[i] * stride[i]
                r //= sizes[i]
            members.append(rank)
        groups.append(members)
    return groups


def _megatron_kinds(cfg):
    """[(slot, groups, same_loop)] in Megatron-core's creation order (newest,
    d98e8a64dd / core_v0.19.0, Gloo groups on). same_loop: group i comes right
    after group i of the kind before it. Slots ending in "_gloo" are Gloo groups."""
    dec = [cfg.tp, 1, 1, cfg.dp, cfg.pp]
    exp = [cfg.tp, 1, 1, cfg.dp, cfg.pp]    # expert_tp = tp, ep = 1: expert dp = dp
    pipelines = groups_of(dec, "pp")
    singletons = [[r] for r in range(cfg.world)]
    kinds = [("gtp", singletons, False),
             ("dp_cp", groups_of(dec, "dp-cp"), False), ("dp_cp_gloo", groups_of(dec, "dp-cp"), True),
             ("dp", groups_of(dec, "dp"), False), ("dp_gloo", groups_of(dec, "dp"), True),
             ("cp", groups_of(dec, "cp"), False), ("mp", groups_of(dec, "tp-pp"), False),
             ("tp", groups_of(dec, "tp"), False), ("pp", pipelines, False),
             ("embd", [p if len(p) == 1 else [p[0], p[-1]] for p in pipelines], True),
             ("pos_embd", [[p[0]] for p in pipelines], True),
             ("tp_dp_cp", groups_of(dec, "tp-dp-cp"), False), ("tp_dp", groups_of(dec, "tp-dp"), False),
             ("tp_cp", groups_of(dec, "tp-cp"), False), ("egtp", singletons, False),
             ("ep", groups_of(exp, "ep"), False), ("etp", groups_of(exp, "tp"), False),
             ("tp_ep", groups_of(exp, "tp-ep"), False), ("tp_ep_pp", groups_of(exp, "tp-ep-pp"), False),
             ("tp_ep_pp_egtp", groups_of(exp, "tp-ep-pp"), False),
             ("edp", groups_of(exp, "dp"), False), ("edp_gloo", groups_of(exp, "dp"), True),
             ("dist_opt", [list(range(cfg.world))], False)]
    if cfg.groups == "minimal":   # dense, cp = 1, distributed optimizer, tied embeddings
        used = {"dp_cp", "tp", "pp"} | ({"embd"} if cfg.pp > 1 else set())
        kinds = [k for k in kinds if k[0] in used]
    return kinds


def is_gloo(slot):
    return slot.endswith("_gloo")


def process_groups(cfg):
    """[(name, slot, members)] in creation order: every rank calls new_group for
    each, in this order (Megatron's loops make dp_cp[i] and its Gloo twin, and
    pp[i], embd[i], pos_embd[i], together). Names are graphgen's names
    ("tp[3]", "dp_gloo[0]"); is_gloo(slot) says which are Gloo groups."""
    kinds = _megatron_kinds(cfg)
    out = []
    for k, (slot, groups, same_loop) in enumerate(kinds):
        if same_loop:
            continue
        loop = [kinds[k]]
        for follower in kinds[k + 1:]:
            if not follower[2]:
                break
            loop.append(follower)
        for i in range(len(groups)):
            for s, g, _ in loop:
                out.append((f"{s}[{i}]", s, g[i]))
    return out


def rank_groups(cfg, rank):
    """{slot: (name, members)} of the groups this rank belongs to, "world" included."""
    mine = {"world": ("world", list(range(cfg.world)))}
    for name, slot, members in process_groups(cfg):
        if rank in members and not is_gloo(slot):
            mine[slot] = (name, members)
    return mine


# ---- pipeline schedule (graphgen/schedule.cc) ----

def stage_actions(schedule, pp, stage, m):
    """[("F", mb) | ("B", mb) | ("X", send_prev, recv_prev, send_next, recv_next)]:
    one stage's passes and exchanges (one batched p2p group each, Megatron's
    order send-prev, recv-prev, send-next, recv-next)."""
    first, last = stage == 0, stage == pp - 1
    out = []

    def x(send_prev=False, recv_prev=False, send_next=False, recv_next=False):
        if send_prev or recv_prev or send_next or recv_next:
            out.append(("X", send_prev, recv_prev, send_next, recv_next))

    if schedule == "gpipe":
        for i in range(m):
            x(recv_prev=not first); out.append(("F", i)); x(send_next=not last)
        for i in range(m):
            x(recv_next=not last); out.append(("B", i)); x(send_prev=not first)
        return out
    warmup = min(pp - stage - 1, m)
    remaining = m - warmup
    for i in range(warmup):
        x(recv_prev=not first); out.append(("F", i)); x(send_next=not last)
    if remaining > 0:
        x(recv_prev=not first)
    for i in range(remaining):
        out.append(("F", warmup + i))
        x(send_next=not last, recv_next=not last)                    # send_forward_recv_backward
        out.append(("B", i))
        x(send_prev=not first, recv_prev=not first and i + 1 < remaining)  # send_backward_recv_forward
    for i in range(warmup):
        x(recv_next=not last); out.append(("B", remaining + i)); x(send_prev=not first)
    return out


# ---- parameters and buckets (graphgen/cost_model.cc) ----

def layer_params(cfg):
    """Per rank: QKV and output projection, 2-matrix MLP (no biases), two norms."""
    h = cfg.hidden
    return (h * 3 * h + h * h) // cfg.tp + 2 * h * cfg.ffn_hidden // cfg.tp + 2 * h


def embedding_params(cfg):      # word embedding shard + learned positions (stage 0)
    return cfg.padded_vocab // cfg.tp * cfg.hidden + cfg.seq_len * cfg.hidden


def output_params(cfg):         # own copy of the output layer when pp > 1 (tied), final norm
    return (cfg.padded_vocab // cfg.tp * cfg.hidden if cfg.pp > 1 else 0) + cfg.hidden


def bucket_params(cfg, stage, i):
    """Parameters of local layer i's gradient bucket on `stage` (unpadded)."""
    n = layer_params(cfg)
    if stage == 0 and i == 0:
        n += embedding_params(cfg)
    if stage == cfg.pp - 1 and i == cfg.layers_per_stage - 1:
        n += output_params(cfg)
    return n


def padded(n, multiple):
    return (n + multiple - 1) // multiple * multiple


def bucket_order(cfg, stage):
    """Local layer indices in the order their buckets are reduced."""
    return list(range(cfg.layers_per_stage - 1, -1, -1))


# ---- the operations of one rank ----

class _Ops:
    def __init__(self, cfg, rank):
        self.cfg, self.rank = cfg, rank
        self.stage = coords(cfg, rank).pp
        self.groups = rank_groups(cfg, rank)
        self.ops = []

    def size(self, slot):
        return len(self.groups[slot][1]) if slot in self.groups else 1

    def coll(self, slot, kind, nbytes, dtype, label):
        if self.size(slot) > 1:   # a one-rank group exchanges nothing
            self.ops.append({"type": "collective", "kind": kind, "bytes": nbytes, "dtype": dtype,
                             "comm": self.groups[slot][0], "label": label})

    def p2p(self, send, peer_stage, label):
        self.ops.append({"type": "send" if send else "recv", "bytes": self.cfg.tokens * self.cfg.hidden * 2,
                         "comm": self.groups["pp"][0], "peer": peer_stage, "label": label})

    def exchange(self, send_prev, recv_prev, send_next, recv_next):
        n = send_prev + recv_prev + send_next + recv_next
        prev, nxt = (self.stage - 1) % self.cfg.pp, (self.stage + 1) % self.cfg.pp
        if n > 1:
            self.ops.append({"type": "group_start"})
        if send_prev: self.p2p(True, prev, "pp.send-grad")
        if recv_prev: self.p2p(False, prev, "pp.recv-act")
        if send_next: self.p2p(True, nxt, "pp.send-act")
        if recv_next: self.p2p(False, nxt, "pp.recv-grad")
        if n > 1:
            self.ops.append({"type": "group_end"})

    def tp_ar(self, label, nbytes=None, dtype=BF16):
        self.coll("tp", "allreduce", nbytes or self.cfg.tokens * self.cfg.hidden * 2, dtype, label)

    def layer_number(self, i):
        return self.stage * self.cfg.layers_per_stage + i

    def forward(self):
        cfg = self.cfg
        if self.stage == 0:
            self.tp_ar("f.embedding.tp-ar")
        for i in range(cfg.layers_per_stage):
            n = self.layer_number(i)
            self.tp_ar(f"f.L{n}.attn.tp-ar")
            self.tp_ar(f"f.L{n}.mlp.tp-ar")
        if self.stage == cfg.pp - 1:
            for what in ("max", "target", "sum-exp"):
                self.tp_ar(f"f.loss.tp-ar-{what}", cfg.tokens * 4, FP32)

    def backward(self, last_microbatch):
        cfg = self.cfg
        if self.stage == cfg.pp - 1:
            self.tp_ar("b.output.tp-ar")
        for i in reversed(range(cfg.layers_per_stage)):
            n = self.layer_number(i)
            self.tp_ar(f"b.L{n}.mlp.tp-ar")
            self.tp_ar(f"b.L{n}.attn.tp-ar")
            if last_microbatch and not (self.stage == 0 and i == 0):
                self.reduce_bucket(i)
        if self.stage == 0 and last_microbatch:
            self.reduce_bucket(0)

    def reduce_bucket(self, i):
        p = padded(bucket_params(self.cfg, self.stage, i), self.size("dp_cp"))
        self.coll("dp_cp", "reducescatter", p * 4, FP32, f"dp.L{self.layer_number(i)}.grads.rs")

    def finalize(self):
        cfg = self.cfg
        if cfg.pp > 1 and self.stage in (0, cfg.pp - 1):
            self.coll("embd", "allreduce", cfg.padded_vocab // cfg.tp * cfg.hidden * 4, FP32, "embedding-grads")
        self.coll("dist_opt" if cfg.groups == "megatron" else "world", "allreduce", 4, FP32, "grad-norm")
        for i in bucket_order(cfg, self.stage):
            p = padded(bucket_params(cfg, self.stage, i), self.size("dp_cp"))
            self.coll("dp_cp", "allgather", p * 2, BF16, f"dp.L{self.layer_number(i)}.grads.param-ag")


def rank_ops(cfg, rank):
    """The communication operations `rank` issues in one iteration, in order:
    dicts with type (collective, send, recv, group_start, group_end), comm
    (graphgen's communicator name), kind, bytes (NCCL's full-buffer
    convention), dtype, peer (pipeline comm rank = stage) and label."""
    o = _Ops(cfg, rank)
    for a in stage_actions(cfg.schedule, cfg.pp, o.stage, cfg.microbatches):
        if a[0] == "X":
            o.exchange(*a[1:])
        elif a[0] == "F":
            o.forward()
        else:
            o.backward(a[1] == cfg.microbatches - 1)
    o.finalize()
    return o.ops


def add_model_flags(ap):
    """train_gpt.py's model and layout flags (defaults = Config's)."""
    d = Config()
    for name, help_text in [("layers", "transformer layers"), ("hidden", "hidden size"), ("heads", "attention heads"),
                            ("ffn-hidden", "MLP width"), ("seq-len", "sequence length"), ("vocab", "vocabulary"),
                            ("micro-batch", "sequences per microbatch"),
                            ("microbatches", "microbatches per iteration and data-parallel rank"),
                            ("tp", "tensor-parallel size"), ("pp", "pipeline-parallel size")]:
        ap.add_argument(f"--{name}", type=int, default=getattr(d, name.replace("-", "_")),
                        help=f"{help_text} (default %(default)s)")
    ap.add_argument("--schedule", default=d.schedule, choices=["1f1b", "gpipe"], help="pipeline schedule")
    ap.add_argument("--groups", default=d.groups, choices=["minimal", "megatron"],
                    help="process groups to create: the used ones (job key parallel.process_groups: minimal) "
                         "or every group Megatron-core creates (megatron)")


def config_from_args(args, world):
    return Config(world=world, layers=args.layers, hidden=args.hidden, heads=args.heads,
                  ffn_hidden=args.ffn_hidden, seq_len=args.seq_len, vocab=args.vocab, micro_batch=args.micro_batch,
                  microbatches=args.microbatches, tp=args.tp, pp=args.pp, schedule=args.schedule,
                  groups=args.groups).check()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--world", type=int, required=True, help="world size")
    ap.add_argument("--rank", type=int, default=0, help="rank whose operations to list")
    ap.add_argument("--list-groups", action="store_true", help="print the process groups instead")
    add_model_flags(ap)
    args = ap.parse_args()
    try:
        cfg = config_from_args(args, args.world)
    except ValueError as e:
        sys.exit(f"train_gpt_plan: error: {e}")
    if args.list_groups:
        for name, slot, members in process_groups(cfg):
            print(json.dumps({"name": name, "slot": slot, "members": members,
                              "backend": "gloo" if is_gloo(slot) else "nccl"}))
        return
    for op in rank_ops(cfg, args.rank):
        print(json.dumps(op))


if __name__ == "__main__":
    main()

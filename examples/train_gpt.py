#!/usr/bin/env python3
"""A small GPT trained with tensor, pipeline and data parallelism in plain
PyTorch (torch.distributed only): Prism's example program.

Start it like any distributed PyTorch program; each process reads RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT (env://):
    torchrun --nproc-per-node 8 examples/train_gpt.py
    RANK=3 WORLD_SIZE=8 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python3 examples/train_gpt.py
    scripts/prism run --graph train-gpt-1024.graph --ranks 0 -- python3 examples/train_gpt.py
It prints one JSON line per iteration ({"train_gpt": "iteration", "time_s": ...}).

Parallelism (Megatron-style, rank = tp + TP*(dp + DP*pp)):
  * tensor: column-parallel QKV and MLP-in, row-parallel projection and
    MLP-out; the all-reduces are the "f" (backward) and "g" (forward) of
    Megatron; vocab-parallel embedding and cross-entropy;
  * pipeline: 1F1B (or GPipe), activations and gradients exchanged with
    batch_isend_irecv on the pipeline group, one batch per exchange;
  * data: distributed-optimizer style: one fp32 gradient bucket per layer,
    reduce-scattered on the data-parallel group as soon as the layer's last
    backward is done; Adam on the local shard; bf16 parameters all-gathered.

init_process_group("nccl") is called WITHOUT device_id unless --device-id is
given: PyTorch then creates each group's NCCL communicator at its first
collective (lazy); with --device-id every new_group is an ncclCommSplit of the
world at once (eager). Groups are made with new_group, every rank creating
every group in the same order.

The loop is driven by examples/train_gpt_plan.py (no torch), which also lists
the communication each rank must issue; after the first iteration the script
checks that it issued exactly that (--no-check-ops turns it off). The job files
examples/train-gpt-{8,1024,8192}.yaml describe this program to prism-graphgen;
test/train_gpt_plan_test.py checks that their graphs agree with the plan.

--measure runs one rank alone (no process group) and prints the compute table
of the job file (forward/backward ns per layer kind, optimizer step), e.g.
    python3 examples/train_gpt.py --measure --world 1024 --measure-out compute.yaml
--cpu runs on the CPU with the gloo backend: a smoke test of the script's logic.
"""
import argparse
import datetime
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_gpt_plan as plan  # noqa: E402

DTYPE = torch.bfloat16
DTYPE_NAMES = {torch.bfloat16: "bf16", torch.float32: "fp32"}
OP_FIELDS = ("type", "kind", "bytes", "dtype", "comm", "peer", "label")


def log(**fields):
    print(json.dumps({"train_gpt": fields.pop("event"), **fields}), flush=True)


# ---------------------------------------------------------------- communication

class Comm:
    """Every exchange of the script goes through here: it knows the groups of
    this rank by slot ("tp", "pp", "dp_cp", "embd", "world", ...), skips
    one-rank groups, and records what it issues (record=True) so that the
    first iteration can be compared with train_gpt_plan.rank_ops()."""

    def __init__(self, groups=None, names=None, members=None, gloo=False):
        self.groups, self.names, self.members = groups or {}, names or {}, members or {}
        self.gloo = gloo
        self.log = None

    def size(self, slot):
        return len(self.members.get(slot, [0]))

    def _note(self, **op):
        if self.log is not None:
            self.log.append(op)

    def _coll(self, kind, t, nbytes, slot, label):
        self._note(type="collective", kind=kind, bytes=nbytes, dtype=DTYPE_NAMES.get(t.dtype, str(t.dtype)),
                   comm=self.names[slot], label=label)

    def all_reduce(self, t, slot, label, op=dist.ReduceOp.SUM):
        if self.size(slot) == 1:
            return
        self._coll("allreduce", t, t.numel() * t.element_size(), slot, label)
        if self.gloo and t.dtype == DTYPE:   # gloo reduces bf16 poorly: in fp32
            tmp = t.float()
            dist.all_reduce(tmp, op=op, group=self.groups[slot])
            t.copy_(tmp)
        else:
            dist.all_reduce(t, op=op, group=self.groups[slot])

    def reduce_scatter(self, out, inp, slot, label):
        """out is inp's shard of this rank (in place, as Megatron); async."""
        if self.size(slot) == 1:
            return None
        self._coll("reducescatter", inp, inp.numel() * inp.element_size(), slot, label)
        if self.gloo:
            return dist.all_reduce(inp, group=self.groups[slot], async_op=True)
        return dist.reduce_scatter_tensor(out, inp, group=self.groups[slot], async_op=True)

    def all_gather(self, out, inp, slot, label):
        """inp is out's shard of this rank (in place); async."""
        if self.size(slot) == 1:
            return None
        self._coll("allgather", out, out.numel() * out.element_size(), slot, label)
        if self.gloo:
            chunks = [c.float() for c in out.chunk(self.size(slot))]
            dist.all_gather(chunks, inp.float(), group=self.groups[slot])
            out.copy_(torch.cat(chunks))
            return None
        return dist.all_gather_into_tensor(out, inp, group=self.groups[slot], async_op=True)

    def exchange(self, ops):
        """ops: [(is_send, tensor, peer pipeline stage, label)] in Megatron's
        order; one batch_isend_irecv on the pipeline group, then wait."""
        if len(ops) > 1:
            self._note(type="group_start")
        p2p = []
        for is_send, t, peer, label in ops:
            self._note(type="send" if is_send else "recv", bytes=t.numel() * t.element_size(),
                       comm=self.names["pp"], peer=peer, label=label)
            p2p.append(dist.P2POp(dist.isend if is_send else dist.irecv, t, self.members["pp"][peer],
                                  group=self.groups["pp"]))
        if len(ops) > 1:
            self._note(type="group_end")
        for work in dist.batch_isend_irecv(p2p):
            work.wait()


class CopyToTP(torch.autograd.Function):
    """Megatron's f: identity forward, all-reduce of the input gradient backward."""

    @staticmethod
    def forward(ctx, x, comm, label):
        ctx.comm, ctx.label = comm, label
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous()
        ctx.comm.all_reduce(grad, "tp", ctx.label)
        return grad, None, None


class ReduceFromTP(torch.autograd.Function):
    """Megatron's g: all-reduce forward (partial sums of a row-parallel layer), identity backward."""

    @staticmethod
    def forward(ctx, x, comm, label):
        x = x.contiguous()
        comm.all_reduce(x, "tp", label)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None, None


class VocabParallelCrossEntropy(torch.autograd.Function):
    """Cross-entropy over logits split by vocabulary across the TP group:
    all-reduces of the max (MAX), the target logit and the sum of exponentials
    (SUM), one fp32 per token each; the backward needs no exchange."""

    @staticmethod
    def forward(ctx, logits, target, vocab_start, comm):
        ctx.dtype = logits.dtype
        logits = logits.float()
        logits_max = logits.max(dim=-1)[0]
        comm.all_reduce(logits_max, "tp", "f.loss.tp-ar-max", op=dist.ReduceOp.MAX)
        logits = logits - logits_max.unsqueeze(-1)
        outside = (target < vocab_start) | (target >= vocab_start + logits.size(-1))
        local = (target - vocab_start).masked_fill(outside, 0)
        predicted = logits.gather(-1, local.unsqueeze(-1)).squeeze(-1).masked_fill(outside, 0.0)
        comm.all_reduce(predicted, "tp", "f.loss.tp-ar-target")
        exp = logits.exp()
        sum_exp = exp.sum(dim=-1)
        comm.all_reduce(sum_exp, "tp", "f.loss.tp-ar-sum-exp")
        exp.div_(sum_exp.unsqueeze(-1))
        ctx.save_for_backward(exp, local, outside)
        return sum_exp.log() - predicted

    @staticmethod
    def backward(ctx, grad):
        softmax, local, outside = ctx.saved_tensors
        grad_logits = softmax.clone()
        grad_logits.scatter_add_(-1, local.unsqueeze(-1), -(~outside).float().unsqueeze(-1))
        grad_logits.mul_(grad.unsqueeze(-1))
        return grad_logits.to(ctx.dtype), None, None, None


# ---------------------------------------------------------------- model

def new_param(generator, *shape, std=0.02, device=None):
    w = torch.empty(*shape, device=device, dtype=torch.float32)
    w.normal_(0.0, std, generator=generator)
    return nn.Parameter(w.to(DTYPE))


class Norm(nn.Module):
    """LayerNorm with a weight and no bias (graphgen counts 2*hidden per layer)."""

    def __init__(self, hidden, device):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden, device=device, dtype=DTYPE))

    def forward(self, x):
        return F.layer_norm(x, (x.size(-1),), self.weight, None, 1e-5)


def causal_attention(q, k, v):
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    scores = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(q.size(-1))   # torch < 2.0
    mask = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).triu(1)
    return (scores.masked_fill(mask, float("-inf")).softmax(-1) @ v.float()).to(q.dtype)


class Attention(nn.Module):
    """Norm, column-parallel QKV, causal attention over the local heads, row-parallel projection."""

    def __init__(self, cfg, layer, comm, gen, device):
        super().__init__()
        h, tp = cfg.hidden, cfg.tp
        self.comm, self.layer, self.heads, self.head_dim = comm, layer, cfg.heads // tp, h // cfg.heads
        self.norm = Norm(h, device)
        self.qkv = new_param(gen, 3 * h // tp, h, device=device)
        self.proj = new_param(gen, h, h // tp, std=0.02 / math.sqrt(2 * cfg.layers), device=device)

    def forward(self, x):
        b, s, _ = x.shape
        y = CopyToTP.apply(self.norm(x), self.comm, f"b.L{self.layer}.attn.tp-ar")
        q, k, v = F.linear(y, self.qkv).view(b, s, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        o = causal_attention(q, k, v).transpose(1, 2).reshape(b, s, self.heads * self.head_dim)
        return x + ReduceFromTP.apply(F.linear(o, self.proj), self.comm, f"f.L{self.layer}.attn.tp-ar")


class Mlp(nn.Module):
    """Norm, column-parallel fc1, GeLU, row-parallel fc2."""

    def __init__(self, cfg, layer, comm, gen, device):
        super().__init__()
        h, f = cfg.hidden, cfg.ffn_hidden // cfg.tp
        self.comm, self.layer = comm, layer
        self.norm = Norm(h, device)
        self.fc1 = new_param(gen, f, h, device=device)
        self.fc2 = new_param(gen, h, f, std=0.02 / math.sqrt(2 * cfg.layers), device=device)

    def forward(self, x):
        y = CopyToTP.apply(self.norm(x), self.comm, f"b.L{self.layer}.mlp.tp-ar")
        y = F.linear(F.gelu(F.linear(y, self.fc1)), self.fc2)
        return x + ReduceFromTP.apply(y, self.comm, f"f.L{self.layer}.mlp.tp-ar")


class Layer(nn.Module):
    def __init__(self, cfg, layer, comm, gen, device):
        super().__init__()
        self.attn = Attention(cfg, layer, comm, gen, device)
        self.mlp = Mlp(cfg, layer, comm, gen, device)

    def forward(self, x):
        return self.mlp(self.attn(x))


class Embedding(nn.Module):
    """Vocab-parallel word embedding (all-reduce forward) plus learned positions."""

    def __init__(self, cfg, tp_rank, comm, gen, device):
        super().__init__()
        self.comm, self.rows = comm, cfg.padded_vocab // cfg.tp
        self.start = tp_rank * self.rows
        self.word = new_param(gen, self.rows, cfg.hidden, device=device)
        self.position = new_param(gen, cfg.seq_len, cfg.hidden, device=device)

    def forward(self, tokens):
        outside = (tokens < self.start) | (tokens >= self.start + self.rows)
        e = F.embedding((tokens - self.start).masked_fill(outside, 0), self.word)
        e = ReduceFromTP.apply(e.masked_fill(outside.unsqueeze(-1), 0.0), self.comm, "f.embedding.tp-ar")
        return e + self.position[: tokens.size(1)]


class Head(nn.Module):
    """Final norm, vocab-parallel output layer (its own copy of the word
    embedding when pp > 1, else the embedding itself: tied) and loss."""

    def __init__(self, cfg, tp_rank, comm, gen, device, tied_weight=None):
        super().__init__()
        self.comm, self.start = comm, tp_rank * (cfg.padded_vocab // cfg.tp)
        self.norm = Norm(cfg.hidden, device)
        self.weight = tied_weight if tied_weight is not None else new_param(gen, cfg.padded_vocab // cfg.tp,
                                                                            cfg.hidden, device=device)

    def own_params(self, tied):
        return [self.norm.weight] if tied else [self.weight, self.norm.weight]

    def forward(self, x, labels):
        y = CopyToTP.apply(self.norm(x), self.comm, "b.output.tp-ar")
        logits = F.linear(y, self.weight)
        loss = VocabParallelCrossEntropy.apply(logits.view(-1, logits.size(-1)), labels.view(-1), self.start,
                                               self.comm)
        return loss.mean()


# ---------------------------------------------------------------- distributed optimizer

class Bucket:
    """One layer's parameters in a flat bf16 buffer (the parameters are views
    of it), their fp32 gradients in a flat buffer padded to a multiple of the
    data-parallel size, and the Adam state of this rank's shard."""

    def __init__(self, params, dp, dp_rank, label, device):
        self.params, self.label = params, label
        n = sum(p.numel() for p in params)
        self.size = plan.padded(n, dp)
        self.flat = torch.zeros(self.size, dtype=DTYPE, device=device)
        self.grads = torch.zeros(self.size, dtype=torch.float32, device=device)
        self.offsets, off = {}, 0
        for p in params:
            view = self.flat[off:off + p.numel()].view_as(p)
            view.copy_(p.data)
            p.data = view
            self.offsets[id(p)] = off
            off += p.numel()
        shard = self.size // dp
        self.lo, self.hi, self.dp = dp_rank * shard, (dp_rank + 1) * shard, dp
        self.master = self.flat[self.lo:self.hi].float()
        self.m, self.v = torch.zeros_like(self.master), torch.zeros_like(self.master)
        self.work = None

    def grad_view(self, p):
        off = self.offsets[id(p)]
        return self.grads[off:off + p.numel()]

    def reduce(self, comm):
        """Start the reduce-scatter of the (averaged) gradients."""
        for p in self.params:
            if p.grad is None:
                self.grad_view(p).zero_()
            else:
                self.grad_view(p).copy_(p.grad.view(-1))
        self.grads.mul_(1.0 / self.dp)
        self.work = comm.reduce_scatter(self.grads[self.lo:self.hi], self.grads, "dp_cp", f"dp.{self.label}.grads.rs")

    def wait(self):
        if self.work is not None:
            self.work.wait()
        self.work = None

    def adam(self, clip, step, lr, betas=(0.9, 0.95), eps=1e-8):
        g = self.grads[self.lo:self.hi] * clip
        self.m.mul_(betas[0]).add_(g, alpha=1 - betas[0])
        self.v.mul_(betas[1]).addcmul_(g, g, value=1 - betas[1])
        denom = (self.v / (1 - betas[1] ** step)).sqrt_().add_(eps)
        self.master.addcdiv_(self.m, denom, value=-lr / (1 - betas[0] ** step))
        self.flat[self.lo:self.hi].copy_(self.master)

    def gather(self, comm):
        return comm.all_gather(self.flat, self.flat[self.lo:self.hi], "dp_cp", f"dp.{self.label}.grads.param-ag")


# ---------------------------------------------------------------- one pipeline stage

class Stage:
    """The part of the model on this rank and its 1F1B/GPipe loop."""

    def __init__(self, cfg, rank, comm, device, seed):
        self.cfg, self.comm, self.device, self.rank = cfg, comm, device, rank
        c = plan.coords(cfg, rank)
        self.stage, self.tp_rank, self.dp_rank = c.pp, c.tp, c.dp
        self.first, self.last = c.pp == 0, c.pp == cfg.pp - 1
        gen = torch.Generator(device=device)
        gen.manual_seed(seed * 1000003 + self.stage * 1009 + self.tp_rank)   # replicas equal across dp
        n0 = self.stage * cfg.layers_per_stage
        self.layers = [Layer(cfg, n0 + i, comm, gen, device) for i in range(cfg.layers_per_stage)]
        self.embedding = Embedding(cfg, self.tp_rank, comm, gen, device) if self.first else None
        tied = cfg.pp == 1
        self.head = Head(cfg, self.tp_rank, comm, gen, device,
                         self.embedding.word if tied else None) if self.last else None
        self.buckets = []
        for i, layer in enumerate(self.layers):
            params = list(layer.parameters())
            if self.first and i == 0:
                params += [self.embedding.word, self.embedding.position]
            if self.last and i == cfg.layers_per_stage - 1:
                params += self.head.own_params(tied)
            self.buckets.append(Bucket(params, cfg.dp, self.dp_rank, f"L{n0 + i}", device))
        self.step_count = 0

    # -- data: the same tokens on every rank of a pipeline, a learnable mapping as labels
    def batch(self, iteration, mb):
        gen = torch.Generator(device=self.device)
        gen.manual_seed(((iteration * 7919 + mb) * 104729 + self.dp_rank) % (2 ** 62))
        tokens = torch.randint(0, self.cfg.vocab, (self.cfg.micro_batch, self.cfg.seq_len), generator=gen,
                               device=self.device)
        return tokens, (tokens * 7 + 3) % self.cfg.vocab

    def act_shape(self):
        return (self.cfg.micro_batch, self.cfg.seq_len, self.cfg.hidden)

    def run_iteration(self, iteration, lr):
        cfg = self.cfg
        self.recv_acts, self.recv_grads, self.send_acts, self.send_grads = [], [], [], []
        self.saved, self.loss = {}, 0.0
        for a in plan.stage_actions(cfg.schedule, cfg.pp, self.stage, cfg.microbatches):
            if a[0] == "X":
                self.exchange(*a[1:])
            elif a[0] == "F":
                self.forward(iteration, a[1])
            else:
                self.backward(a[1], a[1] == cfg.microbatches - 1)
        self.finalize(lr)
        return self.loss

    def exchange(self, send_prev, recv_prev, send_next, recv_next):
        prev, nxt = (self.stage - 1) % self.cfg.pp, (self.stage + 1) % self.cfg.pp
        ops = []
        if send_prev:
            ops.append((True, self.send_grads.pop(0), prev, "pp.send-grad"))
        if recv_prev:
            self.recv_acts.append(torch.empty(self.act_shape(), dtype=DTYPE, device=self.device))
            ops.append((False, self.recv_acts[-1], prev, "pp.recv-act"))
        if send_next:
            ops.append((True, self.send_acts.pop(0), nxt, "pp.send-act"))
        if recv_next:
            self.recv_grads.append(torch.empty(self.act_shape(), dtype=DTYPE, device=self.device))
            ops.append((False, self.recv_grads[-1], nxt, "pp.recv-grad"))
        self.comm.exchange(ops)

    def forward(self, iteration, mb):
        saved = {"layers": []}
        if self.first:
            tokens, labels = self.batch(iteration, mb)
            saved["embedding"] = self.embedding(tokens)
            x = saved["embedding"].detach().requires_grad_()
        else:
            x = self.recv_acts.pop(0).requires_grad_()
        for layer in self.layers:           # layer by layer, so that each can be
            out = layer(x)                  # reduced as soon as its backward is done
            saved["layers"].append((x, out))
            x = out.detach().requires_grad_()
        if self.last:
            _, labels = self.batch(iteration, mb)
            saved["loss"] = (x, self.head(x, labels) / self.cfg.microbatches)
            self.loss += saved["loss"][1].detach()
        else:
            self.send_acts.append(x.detach())
        self.saved[mb] = saved

    def backward(self, mb, last_microbatch):
        saved = self.saved.pop(mb)
        if self.last:
            x, loss = saved["loss"]
            loss.backward()
            grad = x.grad
        else:
            grad = self.recv_grads.pop(0)
        for i in reversed(range(len(self.layers))):
            x, out = saved["layers"][i]
            out.backward(grad)
            grad = x.grad
            if last_microbatch and not (self.first and i == 0):
                self.buckets[i].reduce(self.comm)
        if self.first:
            saved["embedding"].backward(grad)
            if last_microbatch:
                self.buckets[0].reduce(self.comm)
        else:
            self.send_grads.append(grad.contiguous())

    def finalize(self, lr, max_norm=1.0):
        cfg = self.cfg
        for b in self.buckets:
            b.wait()
        if cfg.pp > 1 and (self.first or self.last):   # tied embedding and output copy
            b, p = (self.buckets[0], self.embedding.word) if self.first else (self.buckets[-1], self.head.weight)
            self.comm.all_reduce(b.grad_view(p), "embd", "embedding-grads")
        squares = torch.zeros(1, dtype=torch.float32, device=self.device)
        for b in self.buckets:
            squares += b.grads[b.lo:b.hi].pow(2).sum()
        self.comm.all_reduce(squares, "dist_opt" if cfg.groups == "megatron" else "world", "grad-norm")
        clip = (max_norm / (squares.sqrt() + 1e-6)).clamp(max=1.0)
        self.step_count += 1
        for b in self.buckets:
            b.adam(clip, self.step_count, lr)
        works = [b.gather(self.comm) for b in reversed(self.buckets)]
        for w in works:
            if w is not None:
                w.wait()
        for layer in self.layers:
            layer.zero_grad(set_to_none=True)
        for m in (self.embedding, self.head):
            if m is not None:
                m.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- measuring compute

def timed(fn, device, reps=20, warmup=5):
    """Median ns of fn() over reps (CUDA events on a GPU)."""
    times = []
    for i in range(warmup + reps):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            ns = start.elapsed_time(end) * 1e6
        else:
            t = time.perf_counter()
            fn()
            ns = (time.perf_counter() - t) * 1e9
        if i >= warmup:
            times.append(ns)
    return int(statistics.median(times))


def measure_pair(forward, device):
    """(fwd_ns, bwd_ns) of forward() -> (output, grad_for_output)."""
    state = {}

    def fwd():
        state["out"], state["grad"] = forward()

    def bwd():
        state["out"].backward(state["grad"])

    fwd_ns = timed(fwd, device)
    bwd_ns = timed(lambda: (fwd(), bwd()), device) - fwd_ns
    return fwd_ns, max(bwd_ns, 1)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def measure(cfg, device, seed):
    """Compute of one rank of `cfg` (its TP shard, no communication)."""
    comm = Comm()
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    b, s, h = cfg.micro_batch, cfg.seq_len, cfg.hidden
    layer = Layer(cfg, 0, comm, gen, device)
    embedding = Embedding(cfg, 0, comm, gen, device)
    head = Head(cfg, 0, comm, gen, device)
    x = torch.randn(b, s, h, device=device, dtype=DTYPE, requires_grad=True)
    g = torch.randn(b, s, h, device=device, dtype=DTYPE)
    tokens = torch.randint(0, cfg.vocab, (b, s), device=device)
    table = {
        "attention": measure_pair(lambda: (layer.attn(x), g), device),
        "mlp": measure_pair(lambda: (layer.mlp(x), g), device),
        "embedding": measure_pair(lambda: (embedding(tokens), g), device),
        "output": measure_pair(lambda: (head(x, tokens), torch.ones((), device=device)), device),
    }
    table["optimizer"] = (max(measure_optimizer(cfg, stage, device, seed) for stage in {0, cfg.pp - 1}), None)
    return table


def measure_optimizer(cfg, stage, device, seed):
    """One Adam step (all buckets) of the first rank of `stage`."""
    rank = stage * cfg.tp * cfg.dp
    st = Stage(cfg, rank, Comm(), device, seed)
    return timed(lambda: [bk.adam(1.0, 1, 1e-4) for bk in st.buckets], device, reps=10, warmup=2)


def print_measurement(cfg, table, path, device):
    what = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    lines = [f"# compute of examples/train_gpt.py, one rank of tp={cfg.tp} pp={cfg.pp} dp={cfg.dp} "
             f"(micro_batch {cfg.micro_batch} x seq {cfg.seq_len}), measured on {what}, torch {torch.__version__}"]
    for kind, (fwd, bwd) in table.items():
        lines.append(f"{kind}: {{fwd_ns: {fwd}}}" if bwd is None else f"{kind}: {{fwd_ns: {fwd}, bwd_ns: {bwd}}}")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    log(event="measure", **{k: {"fwd_ns": f, "bwd_ns": b} for k, (f, b) in table.items()})
    if path:
        with open(path, "w") as f:
            f.write(text)


# ---------------------------------------------------------------- start-up

def parse_args():
    ap = argparse.ArgumentParser(description="A small GPT with TP, PP and DP in plain PyTorch (Prism's example)")
    plan.add_model_flags(ap)
    ap.add_argument("--iterations", type=int, default=10, help="training iterations (default %(default)s)")
    ap.add_argument("--lr", type=float, default=3e-4, help="Adam learning rate")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--device-id", action="store_true",
                    help="init_process_group(device_id=...): eager communicators (every new_group splits the world)")
    ap.add_argument("--timeout-s", type=float, default=600, help="process-group timeout (default %(default)s s)")
    ap.add_argument("--no-check-ops", action="store_true",
                    help="do not compare the first iteration's communication with train_gpt_plan.rank_ops()")
    ap.add_argument("--measure", action="store_true",
                    help="time one rank's compute (no process group) and print the job file's compute_table")
    ap.add_argument("--world", type=int, default=int(os.environ.get("WORLD_SIZE", 8)),
                    help="--measure: world size of the job (default $WORLD_SIZE, else 8)")
    ap.add_argument("--measure-out", default="", help="--measure: also write the compute table to this YAML file")
    ap.add_argument("--cpu", action="store_true", help="run on the CPU with gloo (a smoke test of the logic)")
    return ap.parse_args()


def pick_device(args):
    if args.cpu or not torch.cuda.is_available():
        if not args.cpu:
            sys.exit("train_gpt: no CUDA device (use --cpu for a CPU smoke test)")
        return torch.device("cpu")
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device("cuda", local_rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    return device


def make_groups(cfg, rank):
    """Every rank creates every group of the plan, in order (new_group is collective)."""
    groups, names, members = {"world": dist.group.WORLD}, {"world": "world"}, {"world": list(range(cfg.world))}
    for name, slot, ranks in plan.process_groups(cfg):
        if plan.is_gloo(slot):  # Megatron's Gloo twins: made (they take a group number), not used
            dist.new_group(ranks, backend="gloo")
            continue
        g = dist.new_group(ranks)
        if rank in ranks:
            groups[slot], names[slot], members[slot] = g, name, ranks
    return groups, names, members


def check_ops(cfg, rank, issued):
    want = [{k: op[k] for k in OP_FIELDS if k in op} for op in plan.rank_ops(cfg, rank)]
    got = [{k: op[k] for k in OP_FIELDS if k in op} for op in issued]
    for i, (w, g) in enumerate(zip(want, got)):
        if w != g:
            return f"op {i}: issued {g}, the plan (and the graph) say {w}"
    if len(want) != len(got):
        return f"issued {len(got)} operations, the plan (and the graph) say {len(want)}"
    return None


def train(args, device):
    t0 = time.perf_counter()
    kwargs = {"device_id": device} if args.device_id else {}
    dist.init_process_group("gloo" if args.cpu else "nccl", timeout=datetime.timedelta(seconds=args.timeout_s),
                            **kwargs)
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        cfg = plan.config_from_args(args, world)
    except ValueError as e:
        sys.exit(f"train_gpt: error: {e}")
    t_init = time.perf_counter()
    comm = Comm(*make_groups(cfg, rank), gloo=args.cpu)
    t_groups = time.perf_counter()
    stage = Stage(cfg, rank, comm, device, args.seed)
    log(event="start", rank=rank, world=world, tp=cfg.tp, pp=cfg.pp, dp=cfg.dp, stage=stage.stage,
        groups=cfg.groups, communicators="eager" if args.device_id else "lazy",
        init_s=round(t_init - t0, 3), new_group_s=round(t_groups - t_init, 3))
    times = []
    for it in range(args.iterations):
        comm.log = [] if it == 0 and not args.no_check_ops else None
        sync(device)
        t = time.perf_counter()
        loss = stage.run_iteration(it, args.lr)
        sync(device)
        times.append(time.perf_counter() - t)
        log(event="iteration", rank=rank, stage=stage.stage, iteration=it, time_s=round(times[-1], 6),
            loss=round(float(loss), 4) if stage.last else None)
        if comm.log is not None:
            problem = check_ops(cfg, rank, comm.log)
            if problem:
                print(f"train_gpt: error: rank {rank}: the communication differs from train_gpt_plan.rank_ops(): "
                      f"{problem}", file=sys.stderr, flush=True)
                sys.exit(3)
            log(event="ops-check", rank=rank, ops=len(comm.log), match=True)
    steady = times[1:] or times
    log(event="done", rank=rank, iterations=len(times), mean_time_s=round(sum(steady) / len(steady), 6))
    dist.destroy_process_group()


def main():
    args = parse_args()
    device = pick_device(args)
    if args.measure:
        try:
            cfg = plan.config_from_args(args, args.world)
        except ValueError as e:
            sys.exit(f"train_gpt: error: {e}")
        print_measurement(cfg, measure(cfg, device, args.seed), args.measure_out, device)
        return
    train(args, device)


if __name__ == "__main__":
    main()

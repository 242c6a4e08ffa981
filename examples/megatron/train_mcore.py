#!/usr/bin/env python3
"""A GPT trained with Megatron-core, written as a Megatron-core user writes it
(it knows nothing about Prism): env:// start-up, the LOCAL_RANK device,
parallel_state.initialize_model_parallel(tp, pp) with Megatron's defaults
(Gloo groups on), GPTModel with the local layer spec, Megatron's
DistributedDataParallel, the pipeline schedule of get_forward_backward_func(),
finalize_model_grads and a torch Adam, on random tokens.

Its defaults are the model of examples/megatron/gpt-{8,1024,8192}.yaml
(docs/megatron.md): RMSNorm and no linear biases (the parameter count
prism-graphgen models), untied embeddings (no start-up all-reduce of the
shared embedding), bf16 with fp32 gradient reduction.

  torchrun --nproc-per-node 8 examples/megatron/train_mcore.py        # ground truth
  scripts/prism run --graph g.graph --ranks 0 -- python3 examples/megatron/train_mcore.py
  (Megatron-LM from a source checkout: PYTHONPATH=/path/to/Megatron-LM)

Output: one JSON line per event ({"train_mcore": "start"|"iteration"|"done", ...});
"iteration" lines carry time_s (CUDA-synchronised wall time of the iteration).
"""
import argparse
import datetime
import json
import os
import time
from functools import partial

import torch
import torch.distributed as dist
from megatron.core import parallel_state
from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
from megatron.core.distributed.finalize_model_grads import finalize_model_grads
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
from megatron.core.models.gpt.gpt_model import GPTModel
from megatron.core.pipeline_parallel.schedules import get_forward_backward_func
from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed
from megatron.core.transformer.module import Float16Module
from megatron.core.transformer.transformer_config import TransformerConfig


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--pp", type=int, default=2)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--ffn-hidden", type=int, default=4096)
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=16384)
    ap.add_argument("--micro-batch", type=int, default=1)
    ap.add_argument("--microbatches", type=int, default=4, help="microbatches per iteration")
    ap.add_argument("--iterations", type=int, default=12)
    ap.add_argument("--device-id", action="store_true",
                    help="init_process_group(device_id=...): eager NCCL, every new_group a split")
    ap.add_argument("--no-gloo", action="store_true",
                    help="create_gloo_process_groups=False (the job file then says parallel.gloo_groups: false)")
    ap.add_argument("--timeout-s", type=int, default=600)
    return ap.parse_args()


def log(**fields):
    print(json.dumps({"train_mcore": fields.pop("event"), **fields}), flush=True)


def random_batches(args, device, seed):
    g = torch.Generator(device="cpu").manual_seed(seed)
    s = args.seq_len
    mask = torch.triu(torch.ones(1, 1, s, s, dtype=torch.bool), diagonal=1).to(device)  # True = masked
    positions = torch.arange(s, device=device).unsqueeze(0).expand(args.micro_batch, s)
    while True:
        tokens = torch.randint(0, args.vocab, (args.micro_batch, s + 1), generator=g).to(device)
        yield {"tokens": tokens[:, :-1], "labels": tokens[:, 1:], "position_ids": positions,
               "attention_mask": mask, "loss_mask": torch.ones(args.micro_batch, s, device=device)}


def forward_step(data_iterator, model):
    batch = next(data_iterator)
    output = model(batch["tokens"], batch["position_ids"], batch["attention_mask"], labels=batch["labels"])

    def loss_func(loss_mask, output_tensor):
        losses = output_tensor.float().view(-1)
        loss = torch.sum(losses * loss_mask.view(-1)) / loss_mask.sum()
        return loss, {"lm loss": loss.detach()}

    return output, partial(loss_func, batch["loss_mask"])


def main():
    args = parse_args()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device("cuda", local_rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    extra = {"device_id": device} if args.device_id else {}
    t0 = time.perf_counter()
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=args.timeout_s), **extra)
    if args.no_gloo:
        parallel_state.initialize_model_parallel(args.tp, args.pp, create_gloo_process_groups=False)
    else:
        parallel_state.initialize_model_parallel(args.tp, args.pp)
    rank = dist.get_rank()
    model_parallel_cuda_manual_seed(1234)
    t_groups = time.perf_counter()

    config = TransformerConfig(
        num_layers=args.layers, hidden_size=args.hidden, num_attention_heads=args.heads,
        ffn_hidden_size=args.ffn_hidden, normalization="RMSNorm", add_bias_linear=False,
        hidden_dropout=0.0, attention_dropout=0.0, bf16=True, params_dtype=torch.bfloat16,
        pipeline_dtype=torch.bfloat16, tensor_model_parallel_size=args.tp,
        pipeline_model_parallel_size=args.pp)
    model = GPTModel(
        config=config, transformer_layer_spec=get_gpt_layer_local_spec(normalization="RMSNorm"),
        vocab_size=args.vocab, max_sequence_length=args.seq_len,
        pre_process=parallel_state.is_pipeline_first_stage(),
        post_process=parallel_state.is_pipeline_last_stage(),
        share_embeddings_and_output_weights=False, position_embedding_type="learned_absolute")
    model.to(device)
    # bf16 the way Megatron's own training wraps a model (megatron/training: get_model): the
    # parameters in bf16, the first stage's inputs cast, the last stage's outputs back to fp32.
    model = Float16Module(config, model)
    ddp_config = DistributedDataParallelConfig(grad_reduce_in_fp32=True, overlap_grad_reduce=False,
                                               use_distributed_optimizer=False)
    model = DistributedDataParallel(config=config, ddp_config=ddp_config, module=model)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    forward_backward = get_forward_backward_func()
    data = random_batches(args, device, seed=parallel_state.get_data_parallel_rank())
    log(event="start", rank=rank, world=dist.get_world_size(), tp=args.tp, pp=args.pp,
        dp=parallel_state.get_data_parallel_world_size(), stage=parallel_state.get_pipeline_model_parallel_rank(),
        communicators="eager" if args.device_id else "lazy", init_s=round(t_groups - t0, 3))

    for it in range(args.iterations):
        torch.cuda.synchronize()
        start = time.perf_counter()
        model.zero_grad_buffer()
        optimizer.zero_grad()
        losses = forward_backward(forward_step_func=forward_step, data_iterator=data, model=model,
                                  num_microbatches=args.microbatches, seq_length=args.seq_len,
                                  micro_batch_size=args.micro_batch, decoder_seq_length=args.seq_len,
                                  forward_only=False)
        finalize_model_grads([model])
        optimizer.step()
        torch.cuda.synchronize()
        fields = {"rank": rank, "iteration": it, "time_s": round(time.perf_counter() - start, 6)}
        if losses:
            fields["loss"] = round(float(sum(l["lm loss"] for l in losses) / len(losses)), 4)
        log(event="iteration", **fields)

    log(event="done", rank=rank)
    parallel_state.destroy_model_parallel()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

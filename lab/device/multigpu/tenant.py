"""GPU tenants for the multi-GPU runs.

  tenant.py churn SECONDS            a short CUDA process: matmuls for SECONDS, then exit
  tenant.py matmul SECONDS GPU DUTY  an fp32 matmul loop on GPU at a duty cycle (time-sliced peer)
  tenant.py ddp SECONDS OUT_JSON     DDP over every GPU (NCCL all-reduce + bf16 matmul), each rank
                                     also leaving PyTorch's classic stray context on GPU 0
"""
import json
import os
import sys
import time

import torch


def churn(seconds):
    a = torch.randn(2048, 2048, device="cuda")
    end = time.time() + seconds
    while time.time() < end:
        (a @ a).sum().item()


def matmul(seconds, gpu, duty):
    torch.cuda.set_device(gpu)
    a = torch.randn(4096, 4096, device="cuda")
    end = time.time() + seconds
    while time.time() < end:
        t0 = time.time()
        while time.time() - t0 < 0.1 * duty:
            a @ a
            torch.cuda.synchronize()
        rest = 0.1 - (time.time() - t0)
        if rest > 0:
            time.sleep(rest)


def rank_main(rank, world, seconds, out):
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29531")
    # The stray context: a tensor made before set_device lands on GPU 0 from every rank.
    stray = torch.ones(64 * 1024 * 1024, device="cuda")  # 256 MiB on cuda:0, plus a context
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    a = torch.randn(8192, 8192, device=f"cuda:{rank}", dtype=torch.bfloat16)
    grad = torch.randn(64 * 1024 * 1024, device=f"cuda:{rank}")  # 256 MiB all-reduced per step
    steps, t0 = 0, time.time()
    go = torch.ones(1, device=f"cuda:{rank}")
    while True:
        # Rank 0 decides when to stop, so every rank makes the same number of all-reduces
        # (ranks that each watched their own clock would leave the others waiting in one).
        go.fill_(1.0 if time.time() - t0 < seconds else 0.0)
        dist.broadcast(go, 0)
        if go.item() == 0:
            break
        for _ in range(4):
            a @ a
        dist.all_reduce(grad)
        steps += 1
    torch.cuda.synchronize()
    elapsed = time.time() - t0
    result = {"rank": rank, "pid": os.getpid(), "steps": steps, "seconds": elapsed,
              "allreduce_bytes": grad.numel() * grad.element_size(), "world": world,
              "stray_bytes": stray.numel() * stray.element_size()}
    with open(f"{out}.{rank}", "w") as f:
        json.dump(result, f)
    dist.destroy_process_group()


def ddp(seconds, out):
    import torch.multiprocessing as mp

    world = torch.cuda.device_count()
    mp.spawn(rank_main, args=(world, seconds, out), nprocs=world, join=True)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "churn":
        churn(float(sys.argv[2]))
    elif mode == "matmul":
        matmul(float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
    elif mode == "ddp":
        ddp(float(sys.argv[2]), sys.argv[3])
    else:
        sys.exit(f"unknown mode {mode}")

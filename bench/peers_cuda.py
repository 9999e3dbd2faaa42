#!/usr/bin/env python3
"""PyTorch on the same GPU as bench/cuda_bench.cc: the peer a user would pick instead.

The same workloads and sizes as braze_bench's *_cuda benchmarks, run by PyTorch eager and
by torch.compile (Inductor, default mode), f32 with TF32 off (Braze's cuBLASLt GEMMs are
exactly FP32). Inputs live on the device; a timed iteration is the step's kernels plus a
synchronize, as in cuda_bench.cc (the runs of 2026-11-26 13:58 and 14:12 UTC synchronized
once per batch of calls instead). Each variant's result is checked against eager's.
Prints a table and writes Google-Benchmark-like JSON (real_time medians, named
BM_<Workload>_<peer>_cuda as tools/braze-plot reads them) to argv[1]:
    tools/braze-plot cuda.json torch.json -o plot.png

Run by tools/gpu-check.sh on a machine with PyTorch; nothing here runs in CI.
"""
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = torch.device("cuda")
gen = torch.Generator(device=dev).manual_seed(1)


def uniform(*shape, lo=-1.0, hi=1.0):
    return torch.rand(*shape, device=dev, generator=gen) * (hi - lo) + lo


def time_ms(fn, reps=3, min_s=0.2):
    """Median over `reps` of the mean time of a batch of calls long enough to take min_s,
    each call followed by a synchronize, as cuda_bench.cc's iterations are (a batch
    synchronized once would overlap one call's launch latency with the last's kernels)."""
    def call():
        fn()
        torch.cuda.synchronize()

    for _ in range(3):
        call()
    n, t = 1, 0.0
    while t < min_s / 4:
        t0 = time.perf_counter()
        for _ in range(n):
            call()
        t = time.perf_counter() - t0
        n *= 2
    n = max(1, int(n * min_s / max(t, 1e-9) / 2))
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n):
            call()
        out.append((time.perf_counter() - t0) * 1e3 / n)
    return statistics.median(out)


def chain8(x):
    y = x
    for i in range(8):
        y = torch.tanh(y * 0.9 + 0.1) if i % 2 == 0 else torch.sigmoid(y) - y * 0.5
    return y


def softmax(x):
    return torch.softmax(x, dim=-1)


def layernorm(x, gamma, beta):
    return F.layer_norm(x, (x.shape[-1],), gamma, beta, eps=1e-5)


def dense_relu(x, w, b):
    return torch.relu(torch.addmm(b, x, w))


def sgd_step_manual(x, labels, w, b):
    """Softmax regression step with the gradient written out (what Braze's autodiff emits)."""
    logits = x @ w + b
    p = torch.softmax(logits, dim=-1)
    loss = -(labels * torch.log_softmax(logits, dim=-1)).sum(-1).mean()
    g = (p - labels) / x.shape[0]
    w.sub_(0.1 * (x.t() @ g))
    b.sub_(0.1 * g.sum(0))
    return loss


def mlp_steps(record):
    """examples/mlp's train step as BM_MlpStep_cuda runs it (bench/train_models.h):
    784-1024-1024-10 with ReLU, He-normal weights and zero biases, softmax cross entropy,
    Adam(1e-3), batch 128 of x uniform in [0, 1) and labels (i * 7) % 10, both copied
    from the host each step. Autograd with PyTorch's fused Adam (one multi-tensor kernel),
    eager and with the model under torch.compile (forward and backward compiled)."""
    xs = torch.rand(128, 784)
    ys = (torch.arange(128) * 7) % 10
    xd = torch.empty(128, 784, device=dev)
    yd = torch.empty(128, dtype=torch.long, device=dev)

    def make():
        m = torch.nn.Sequential(torch.nn.Linear(784, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 10)).to(dev)
        for layer in m:
            if isinstance(layer, torch.nn.Linear):
                torch.nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
                torch.nn.init.zeros_(layer.bias)
        return m

    for peer, compiled in (("torch_autograd", False), ("torch_compile", True)):
        model = make()
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)
        fwd = torch.compile(model) if compiled else model

        def step():
            xd.copy_(xs)
            yd.copy_(ys)
            loss = F.cross_entropy(fwd(xd), yd)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            return loss

        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        first_s = time.perf_counter() - t0
        record("MlpStep", peer, time_ms(step), f"(first step {first_s:.1f} s)")


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else "torch_peers.json"
    rows = []

    def record(workload, peer, ms, note="", gbs=None):
        name = f"BM_{workload}_{peer}_cuda"
        rows.append({"name": name, "real_time": ms, "time_unit": "ms", "note": note})
        if gbs is not None:
            rows[-1]["GB/s"] = gbs
        print(f"{name:44s} {ms:10.4f} ms {note}", flush=True)
        # Written after every result: a run cut short by its time limit keeps what it has.
        with open(out_path, "w") as f:
            json.dump({"context": {"torch": torch.__version__,
                                   "device": torch.cuda.get_device_name()},
                       "benchmarks": rows}, f, indent=1)

    def both(name, fn, args, tol):
        ref = fn(*args)
        record(name, "torch_eager", time_ms(lambda: fn(*args)))
        t0 = time.perf_counter()
        cfn = torch.compile(fn)
        got = cfn(*args)
        torch.cuda.synchronize()
        compile_s = time.perf_counter() - t0
        err = (got - ref).abs().max().item()
        if not err <= tol:
            print(f"MISMATCH {name}: torch.compile vs eager max abs err {err}", flush=True)
        record(name, "torch_compile", time_ms(lambda: cfn(*args)),
               f"(compile {compile_s:.1f} s, max err {err:.2e})")

    print(torch.__version__, torch.cuda.get_device_name(), flush=True)
    x = uniform(8192, 8192)
    both("Chain8", chain8, (x,), 1e-5)
    y = torch.empty_like(x)
    copy_ms = time_ms(lambda: y.copy_(x))
    record("Copy", "torch", copy_ms, gbs=2 * x.numel() * 4 / copy_ms / 1e6)
    del x, y

    x = uniform(16384, 1024)
    both("Softmax", softmax, (x,), 1e-6)
    gamma, beta = uniform(1024), uniform(1024)
    both("LayerNorm", layernorm, (x, gamma, beta), 1e-4)
    del x

    a, w, bias = uniform(4096, 4096), uniform(4096, 4096), uniform(4096)
    both("MatMulBiasRelu", dense_relu, (a, w, bias), 1e-2)
    del a, w

    # The train step fed from the host each step, as BM_TrainStep_cuda is.
    xs = torch.rand(128, 784)
    ys = torch.zeros(128, 10)
    ys[torch.arange(128), torch.arange(128) % 10] = 1
    xd, yd = torch.empty(128, 784, device=dev), torch.empty(128, 10, device=dev)
    w = (torch.randn(784, 10, device=dev) * 0.01).requires_grad_()
    b = torch.zeros(10, device=dev, requires_grad=True)

    def autograd_step():
        xd.copy_(xs)
        yd.copy_(ys)
        loss = F.cross_entropy(xd @ w + b, yd)
        w.grad, b.grad = None, None
        loss.backward()
        with torch.no_grad():
            w.sub_(0.1 * w.grad)
            b.sub_(0.1 * b.grad)
        return loss

    record("TrainStep", "torch_autograd", time_ms(autograd_step))
    wm, bm = w.detach().clone(), b.detach().clone()
    cstep = torch.compile(sgd_step_manual)

    def compiled_step():
        xd.copy_(xs)
        yd.copy_(ys)
        return cstep(xd, yd, wm, bm)

    t0 = time.perf_counter()
    compiled_step()
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    record("TrainStep", "torch_compile", time_ms(compiled_step), f"(compile {compile_s:.1f} s)")

    mlp_steps(record)


if __name__ == "__main__":
    main()

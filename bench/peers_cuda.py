#!/usr/bin/env python3
"""PyTorch on the same GPU as bench/cuda_bench.cc: the peer a user would pick instead.

The same workloads and sizes as braze_bench's *_cuda benchmarks, run by PyTorch eager and
by torch.compile (Inductor, default mode), f32 with TF32 off (Braze's cuBLASLt GEMMs are
exactly FP32): Chain8, Softmax, LayerNorm, MatMulBiasRelu (and in bf16), the softmax regression and MLP
train steps, and the other issues' workloads: the ResNet basic block (cuDNN, channels
last), causal attention at T 2048 (PyTorch's SDPA; forward, and forward + backward) and
the transformer block's train step (SDPA with dropout, fused AdamW). Inputs live on the device; a timed iteration is the step's kernels plus a
synchronize, as in cuda_bench.cc (the runs of 2026-11-26 13:58 and 14:12 UTC synchronized
once per batch of calls instead). Each variant's result is checked against eager's.
Prints a table and writes Google-Benchmark-like JSON (real_time medians, named
BM_<Workload>_<peer>_cuda as tools/braze-plot reads them) to argv[1]:
    tools/braze-plot cuda.json torch.json -o plot.png
With --filter=REGEX only the workloads whose Braze benchmark name BM_<Workload>_cuda
the regex matches (re.search, as braze_bench's --benchmark_filter reads it) run:
    bench/peers_cuda.py torch.json --filter='BM_(Softmax|LayerNorm)_cuda'

Run by tools/gpu-check.sh on a machine with PyTorch; nothing here runs in CI.
"""
import argparse
import json
import re
import statistics
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


def resnet_block(x, w1, bn1, w2, bn2):
    """BM_ResNetBlock_cuda's block (bench/train_models.h): conv 3x3 SAME (no bias), BN in
    inference mode (eps 1e-3, Braze's kBnEpsilon), ReLU, conv, BN, + x, ReLU. NCHW
    indexing on channels_last tensors: cuDNN's NHWC kernels, Braze's layout."""
    def bn(y, p):
        gamma, beta, mean, var = p
        return F.batch_norm(y, mean, var, gamma, beta, training=False, eps=1e-3)

    y = torch.relu(bn(F.conv2d(x, w1, padding=1), bn1))
    return torch.relu(bn(F.conv2d(y, w2, padding=1), bn2) + x)


def attention(q, k, v):
    """BM_Attention_cuda's causal attention: PyTorch's fused SDPA (f32: its
    memory-efficient kernel; flash attention takes 16-bit floats only)."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def sgd_step_manual(x, labels, w, b):
    """Softmax regression step with the gradient written out (what Braze's autodiff emits)."""
    logits = x @ w + b
    p = torch.softmax(logits, dim=-1)
    loss = -(labels * torch.log_softmax(logits, dim=-1)).sum(-1).mean()
    g = (p - labels) / x.shape[0]
    w.sub_(0.1 * (x.t() @ g))
    b.sub_(0.1 * g.sum(0))
    return loss


def matmul_bias_relu_bf16(record):
    """BM_MatMulBiasReluBf16_cuda: relu(x @ w + b) at 4096^3 on bf16 tensors (cuBLASLt's
    bf16 GEMM with f32 accumulation: eager's addmm, then a ReLU kernel; torch.compile's
    Inductor picks its own GEMM and epilogue). Split-K partial sums reduced in bf16
    are turned off, as Braze's GEMM reduces them in f32 only. The compiled result is
    checked against eager's: within two bf16 ulps of the larger magnitude (each rounds
    once, from f32 sums in its own order)."""
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    a, w, bias = (t.to(torch.bfloat16) for t in (uniform(4096, 4096), uniform(4096, 4096),
                                                  uniform(4096)))
    ref = dense_relu(a, w, bias)
    record("MatMulBiasReluBf16", "torch_eager", time_ms(lambda: dense_relu(a, w, bias)))
    t0 = time.perf_counter()
    cfn = torch.compile(dense_relu)
    got = cfn(a, w, bias)
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    g, r = got.float(), ref.float()
    err = ((g - r).abs() / (torch.maximum(g.abs(), r.abs()) + 1)).max().item()
    if not err <= 2 * 2.0 ** -7:
        print(f"MISMATCH MatMulBiasReluBf16: torch.compile vs eager max rel err {err}", flush=True)
    record("MatMulBiasReluBf16", "torch_compile", time_ms(lambda: cfn(a, w, bias)),
           f"(compile {compile_s:.1f} s, max rel err {err:.2e})")


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


def attention_fwd_bwd(record):
    """BM_AttentionFwdBwd_cuda: the attention's output and the gradients of q, k and v
    for a given dO (B 8, H 8, T 2048, D 64), eager and torch.compile'd (AOTAutograd's
    backward); the compiled gradients checked against eager's."""
    q, k, v = (uniform(8, 8, 2048, 64).requires_grad_() for _ in range(3))
    dout = uniform(8, 8, 2048, 64)

    def make(fn):
        def run():
            q.grad, k.grad, v.grad = None, None, None
            out = fn(q, k, v)
            out.backward(dout)
            return out
        return run

    run = make(attention)
    run()
    ref = [t.grad.clone() for t in (q, k, v)]
    record("AttentionFwdBwd", "torch_eager", time_ms(run))
    t0 = time.perf_counter()
    crun = make(torch.compile(attention))
    crun()
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    err = max((t.grad - r).abs().max().item() for t, r in zip((q, k, v), ref))
    if not err <= 1e-3:
        print(f"MISMATCH AttentionFwdBwd: torch.compile vs eager max abs err {err}", flush=True)
    record("AttentionFwdBwd", "torch_compile", time_ms(crun),
           f"(compile {compile_s:.1f} s, max err {err:.2e})")


class GptBlock(torch.nn.Module):
    """BM_TransformerBlockStep_cuda's block (bench/gpt_models.h, the char_lm contract of
    bench/peers_torch_gpt.h): pre-LayerNorm causal attention (width 256, 4 heads) and a
    GELU (tanh) MLP of 1024, dropout 0.1 on the attention weights and both residual
    branches; SDPA with dropout_p, as nanoGPT on PyTorch 2."""

    def __init__(self, d=256, heads=4, dropout=0.1, n_layer=4):
        super().__init__()
        nn = torch.nn
        self.heads, self.dropout = heads, dropout
        self.ln1, self.ln2 = nn.LayerNorm(d, eps=1e-5), nn.LayerNorm(d, eps=1e-5)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.fc_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        for m in (self.qkv, self.proj, self.fc, self.fc_proj):
            nn.init.normal_(m.weight, 0, 0.02)
            nn.init.zeros_(m.bias)
        for m in (self.proj, self.fc_proj):
            nn.init.normal_(m.weight, 0, 0.02 / (2 * n_layer) ** 0.5)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(b, t, d)
        x = x + F.dropout(self.proj(y), p, self.training)
        h = F.gelu(self.fc(self.ln2(x)), approximate="tanh")
        return x + F.dropout(self.fc_proj(h), p, self.training)


def transformer_block_steps(record):
    """BM_TransformerBlockStep_cuda: one block's train step, batch 16 x T 128, loss
    mean((block(x) - target)^2), AdamW (lr 1e-3, betas 0.9 / 0.99, eps 1e-8, decay 0.1 on
    the rank >= 2 parameters; PyTorch's fused kernel), x and target N(0, 1) copied from
    the host each step as Braze's feeds are. Eager autograd, and the block under
    torch.compile (forward and backward compiled)."""
    xs, ts = torch.randn(16, 128, 256), torch.randn(16, 128, 256)
    xd, td = torch.empty(16, 128, 256, device=dev), torch.empty(16, 128, 256, device=dev)
    for peer, compiled in (("torch_autograd", False), ("torch_compile", True)):
        torch.manual_seed(23)
        block = GptBlock().to(dev).train()
        decay = [p for p in block.parameters() if p.dim() >= 2]
        rest = [p for p in block.parameters() if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                 {"params": rest, "weight_decay": 0.0}],
                                lr=1e-3, betas=(0.9, 0.99), eps=1e-8, fused=True)
        fwd = torch.compile(block) if compiled else block

        def step():
            xd.copy_(xs)
            td.copy_(ts)
            loss = ((fwd(xd) - td) ** 2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            return loss

        t0 = time.perf_counter()
        first = step().item()
        first_s = time.perf_counter() - t0
        if not 0.5 < first < 4:  # ~2: the block adds small residuals to x, target N(0, 1)
            print(f"MISMATCH TransformerBlockStep {peer}: first loss {first}", flush=True)
        record("TransformerBlockStep", peer, time_ms(step),
               f"(first step {first_s:.1f} s, loss {first:.3f})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default="torch_peers.json", help="JSON to write")
    parser.add_argument("--filter", default="",
                        help="regex over BM_<Workload>_cuda: the workloads to run (default all)")
    args = parser.parse_args()
    out_path = args.out
    pattern = re.compile(args.filter)
    rows = []

    def want(workload):
        return bool(pattern.search(f"BM_{workload}_cuda"))

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
    if want("Chain8"):
        both("Chain8", chain8, (x,), 1e-5)
    if want("Copy"):
        y = torch.empty_like(x)
        copy_ms = time_ms(lambda: y.copy_(x))
        record("Copy", "torch", copy_ms, gbs=2 * x.numel() * 4 / copy_ms / 1e6)
        del y
    del x

    x = uniform(16384, 1024)
    if want("Softmax"):
        both("Softmax", softmax, (x,), 1e-6)
    gamma, beta = uniform(1024), uniform(1024)
    if want("LayerNorm"):
        both("LayerNorm", layernorm, (x, gamma, beta), 1e-4)
    del x

    if want("MatMulBiasRelu"):
        a, w, bias = uniform(4096, 4096), uniform(4096, 4096), uniform(4096)
        both("MatMulBiasRelu", dense_relu, (a, w, bias), 1e-2)
        del a, w
    if want("MatMulBiasReluBf16"):
        matmul_bias_relu_bf16(record)

    # BM_ResNetBlock_cuda's block at 32x56x56x64; filters He-normal, BN parameters in
    # train_models.h's ranges.
    if want("ResNetBlock"):
        cl = torch.channels_last
        x = uniform(32, 64, 56, 56).contiguous(memory_format=cl)
        ws = [(torch.randn(64, 64, 3, 3, device=dev, generator=gen) * (2 / 576) ** 0.5)
              .contiguous(memory_format=cl) for _ in range(2)]
        bns = [(uniform(64, lo=0.5, hi=1.5), uniform(64, lo=-0.1, hi=0.1),
                uniform(64, lo=-0.1, hi=0.1), uniform(64, lo=0.5, hi=1.5)) for _ in range(2)]
        both("ResNetBlock", resnet_block, (x, ws[0], bns[0], ws[1], bns[1]), 1e-3)
        del x, ws

    if want("Attention"):
        q, k, v = (uniform(8, 8, 2048, 64) for _ in range(3))
        both("Attention", attention, (q, k, v), 1e-4)
        del q, k, v
    if want("AttentionFwdBwd"):
        attention_fwd_bwd(record)

    if want("TrainStep"):
        train_steps(record)
    if want("MlpStep"):
        mlp_steps(record)
    if want("TransformerBlockStep"):
        transformer_block_steps(record)


def train_steps(record):
    """The softmax regression step fed from the host each step, as BM_TrainStep_cuda is."""
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


if __name__ == "__main__":
    main()

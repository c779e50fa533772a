#!/usr/bin/env python3
"""The model of gpu/ (deltanet mixer) in plain PyTorch, for the speed comparison of issue 7.

Same architecture as model.hpp: embedding; per block RMSNorm -> q,k,v projections -> causal
depthwise conv (kernel 4) -> SiLU -> L2-normalised q, k -> beta = s * sigmoid(.) -> delta rule
(a Python loop over time, batched over words and heads) -> per-head RMSNorm -> output projection ->
residual; RMSNorm -> SwiGLU -> residual; final norm; head. AdamW step included. Timed eager and as
one captured CUDA graph (forward + backward + optimizer), TF32 matmuls, same shapes as
bench_train_step. Prints ms/step and, given --ours FILE (bench_train_step's JSON), the ratio.

    python3 bench/reference_torch.py [--steps N] [--ours bench.json] [--out FILE]
"""
import argparse, json, math, time
import torch
import torch.nn.functional as F


class Block(torch.nn.Module):
    def __init__(self, d, heads, m, K=4, scale=2.0):
        super().__init__()
        self.d, self.h, self.dh, self.K, self.scale = d, heads, d // heads, K, scale
        self.norm1 = torch.nn.Parameter(torch.ones(d))
        self.qkv = torch.nn.Linear(d, 3 * d, bias=False)
        self.conv = torch.nn.Parameter(torch.randn(3 * d, K) / 2)
        self.wbeta = torch.nn.Linear(d, heads, bias=False)
        self.onorm = torch.nn.Parameter(torch.ones(d))
        self.wo = torch.nn.Linear(d, d, bias=False)
        self.norm2 = torch.nn.Parameter(torch.ones(d))
        self.gu = torch.nn.Linear(d, 2 * m, bias=False)
        self.down = torch.nn.Linear(m, d, bias=False)

    @staticmethod
    def rms(x, g, group):
        shape = x.shape
        x = x.reshape(*shape[:-1], -1, group)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        return x.reshape(shape) * g

    def forward(self, x):
        B, T, d = x.shape
        xn = self.rms(x, self.norm1, d)
        p = self.qkv(xn).transpose(1, 2)  # B, 3d, T
        c = F.conv1d(F.pad(p, (self.K - 1, 0)), self.conv.unsqueeze(1), groups=3 * d)
        q, k, v = F.silu(c).transpose(1, 2).split(d, -1)
        q = F.normalize(q.reshape(B, T, self.h, self.dh), dim=-1, eps=1e-6)
        k = F.normalize(k.reshape(B, T, self.h, self.dh), dim=-1, eps=1e-6)
        v = v.reshape(B, T, self.h, self.dh)
        beta = self.scale * torch.sigmoid(self.wbeta(xn))  # B, T, H
        S = x.new_zeros(B, self.h, self.dh, self.dh)
        outs = []
        for t in range(T):
            kt, vt, bt = k[:, t], v[:, t], beta[:, t, :, None]
            u = vt - torch.einsum("bhrc,bhr->bhc", S, kt)
            S = S + torch.einsum("bhr,bhc->bhrc", bt * kt, u)
            outs.append(torch.einsum("bhrc,bhr->bhc", S, q[:, t]))
        o = torch.stack(outs, 1).reshape(B, T, d)
        x = x + self.wo(self.rms(o, self.onorm, self.dh))
        a, u = self.gu(self.rms(x, self.norm2, d)).chunk(2, -1)
        return x + self.down(F.silu(a) * u)


class Model(torch.nn.Module):
    def __init__(self, vocab=2, classes=2, d=128, heads=4, layers=2):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, d)
        self.blocks = torch.nn.ModuleList(Block(d, heads, 2 * d) for _ in range(layers))
        self.norm_f = torch.nn.Parameter(torch.ones(d))
        self.head = torch.nn.Linear(d, classes)

    def forward(self, tokens):
        x = self.embed(tokens)
        for b in self.blocks:
            x = b(x)
        return self.head(Block.rms(x, self.norm_f, x.shape[-1]))


def time_steps(step, steps):
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    times.sort()
    return 1e3 * times[len(times) // 2]


def run(T, B, steps, layers):
    torch.manual_seed(0)
    model = Model(layers=layers).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1, capturable=True)
    tokens = torch.randint(0, 2, (B, T), device="cuda")
    targets = torch.randint(0, 2, (B, T), device="cuda")

    def step():
        opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(model(tokens).reshape(-1, 2), targets.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    eager = time_steps(step, steps)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    graphed = time_steps(graph.replay, steps)
    return eager, graphed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--ours", help="bench_train_step JSON to compare with")
    ap.add_argument("--out", default="reference_torch.json")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    ours = {}
    if a.ours:
        for r in json.load(open(a.ours))["rows"]:
            if r["shape"] == "deltanet" and r["graphs"] and r["matmul"] == "tf32":
                ours[r["T"]] = r["ms_per_step"]
    rows = []
    print(f"{'PyTorch deltanet 2 layers':<28} {'T':>4} {'eager ms':>9} {'graph ms':>9} {'ours ms':>8} {'graph/ours':>10}")
    for T in (40, 256):
        eager, graphed = run(T, 1024, a.steps, 2)
        mine = ours.get(T, math.nan)
        rows.append({"T": T, "eager_ms": eager, "graph_ms": graphed, "ours_ms": mine, "ratio_graph_over_ours": graphed / mine})
        print(f"{'':<28} {T:>4} {eager:>9.3f} {graphed:>9.3f} {mine:>8.3f} {graphed / mine:>10.2f}")
    json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, open(a.out, "w"), indent=2)


if __name__ == "__main__":
    main()

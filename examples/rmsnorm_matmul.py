"""RMSNorm followed by a matmul, written with kgc's Python API.

    .venv/bin/python examples/rmsnorm_matmul.py

Builds the graph, compiles it (a norm kernel, then the product: for sm_90 a
cuBLAS call, which the tuned-defaults table measured faster there, else one
Triton kernel whose tiles make one wave over the SMs; every stage is written to kgc-out/rmsnorm_matmul), and, where a CUDA GPU is
present, runs it and compares with PyTorch.
"""

import kgc
import kgc.runtime

graph = kgc.Graph("rmsnorm_matmul")
x = graph.input("x", (16, 4096), "f16")
gamma = graph.input("gamma", (4096,), "f16")
w = graph.input("w", (4096, 6144), "f16")
graph.output(graph.matmul(graph.rms_norm(x, gamma, eps=1e-6), w))

compiled = kgc.compile(graph, output_dir="kgc-out/rmsnorm_matmul")
print(f"{len(compiled.function.launches)} kernel(s):",
      ", ".join(launch.kernel for launch in compiled.function.launches))

if kgc.runtime.cuda_available():
    import torch

    inputs = [torch.randn(16, 4096, device="cuda", dtype=torch.float16),
              torch.randn(4096, device="cuda", dtype=torch.float16),
              torch.randn(4096, 6144, device="cuda", dtype=torch.float16) * 0.02]
    got = compiled(*inputs)
    expected = torch.nn.functional.rms_norm(inputs[0], (4096,), inputs[1], eps=1e-6) @ inputs[2]
    print("max abs difference from PyTorch:", (got.float() - expected.float()).abs().max().item())
else:
    print("no CUDA GPU: compiled only")

# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Known GPU work through PyTorch, for tools/gpu/check.sh on a machine with a
real GPU: train_step() runs STEPS matrix products (2048x2048 fp32) and
evaluate() runs EVALS relu+scale passes, each in its own function so that
launch stacks can be checked for them. Usage: torch_work.py STEPS EVALS
[WAIT_S]. Waits WAIT_S (default 1) after CUDA is up, so that the profiler
knows the interpreter and libcuda before the counted work. Prints "key value"
lines: the work done and its wall time."""
import sys
import time

import torch

steps, evals = int(sys.argv[1]), int(sys.argv[2])
wait = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0

a = torch.randn(2048, 2048, device="cuda")
b = torch.randn(2048, 2048, device="cuda")
torch.cuda.synchronize()
time.sleep(wait)


def train_step(x):
    return x @ b  # one GEMM kernel per call


def evaluate(x):
    return torch.relu(x) * 0.5  # two elementwise kernels per call


t0 = time.monotonic()
x = a
for _ in range(steps):
    x = train_step(a)
torch.cuda.synchronize()
t1 = time.monotonic()
for _ in range(evals):
    y = evaluate(x)
torch.cuda.synchronize()
t2 = time.monotonic()
print(f"device {torch.cuda.get_device_name(0)}")
print(f"torch {torch.__version__}")
print(f"steps {steps}\nevals {evals}")
print(f"train_s {t1 - t0:.4f}\neval_s {t2 - t1:.4f}")
print(f"checksum {float(x.sum()) + float(y.sum()):.3e}")

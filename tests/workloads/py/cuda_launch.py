# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Known CUDA launches from Python, through ctypes, on the fake driver
(tests/workloads/cuda/fakecuda.c): train_step() launches vector_add TRAIN
times (through forward()), evaluate() launches scale_kernel EVAL times.

Usage: cuda_launch.py LIBCUDA TRAIN EVAL [WAIT_S [EXIT_WAIT_S]]. Waits WAIT_S
(default 1) after loading the driver, so that the profiler knows the
interpreter before the first launch, and EXIT_WAIT_S (default 0) before it
exits: evaluate() runs for the first time right before the exit, when
bpfprof can no longer read its code object out of the process (it drains its
ring buffer every 100 ms), so its frames are named from the snapshot BPF
sends. Prints "key value" lines of what it did."""
import ctypes
import sys
import time

ADD = b"_Z10vector_addPfPKfS1_i"
SCALE = b"_Z12scale_kernelPff"

cu = ctypes.CDLL(sys.argv[1])
for name in ("cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent",
             "cuModuleLoadData", "cuModuleGetFunction", "cuLaunchKernel"):
    getattr(cu, name).restype = ctypes.c_int
cu.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3


def check(r, what):
    if r != 0:
        sys.exit(f"cuda_launch.py: {what} failed: {r}")


def load():
    dev, ctx, mod = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p()
    add, scale = ctypes.c_void_p(), ctypes.c_void_p()
    check(cu.cuInit(0), "cuInit")
    check(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    check(cu.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(ADD + b"\n" + SCALE + b"\n")),
          "cuModuleLoadData")
    check(cu.cuModuleGetFunction(ctypes.byref(add), mod, ADD), "cuModuleGetFunction")
    check(cu.cuModuleGetFunction(ctypes.byref(scale), mod, SCALE), "cuModuleGetFunction")
    return add, scale


def launch(f):
    check(cu.cuLaunchKernel(f, 16, 1, 1, 256, 1, 1, 0, None, None, None), "cuLaunchKernel")


def forward(f, n):
    for _ in range(n):
        launch(f)  # LINE:forward


def train_step(f, n):
    forward(f, n)  # LINE:train_step


def evaluate(f, n):
    for _ in range(n):
        launch(f)  # LINE:evaluate


def main():
    train, ev = int(sys.argv[2]), int(sys.argv[3])
    wait = float(sys.argv[4]) if len(sys.argv) > 4 else 1.0
    exit_wait = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    add, scale = load()
    time.sleep(wait)
    train_step(add, train)
    evaluate(scale, ev)
    print("launches_train", train)
    print("launches_eval", ev, flush=True)
    time.sleep(exit_wait)


if __name__ == "__main__":
    main()

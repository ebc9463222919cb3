# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""torch's CUDA libraries on a host without a GPU, as far as they go
(tools/bench_realhost.sh's unwind budget part): imports torch (Debian's
python3-torch, CPU only), maps the CUDA toolkit's libraries a CUDA build of
torch maps (cudart, cuBLAS/cuBLASLt, cuFFT, cuRAND, cuSPARSE, cuSOLVER,
cuDNN, NCCL, NVRTC, nvJitLink, NVVM, CUPTI; CUDA_HOME, default
/usr/local/cuda) and, for SECONDS of wall time, alternates a training step
with work those libraries do on the CPU: NVRTC compiles a kernel to PTX and
nvJitLink links it for a GPU architecture (no device needed). Prints
"mapped N libraries (M MB)" and "ready" before its loop, the count of
compiles at the end. Without the toolkit or torch: says so and exits 0."""
import ctypes
import glob
import os
import sys
import time

CUDA = os.environ.get("CUDA_HOME", "/usr/local/cuda")
LIBS = ["libcudart.so.*", "libcublasLt.so.*", "libcublas.so.*", "libcufft.so.*",
        "libcurand.so.*", "libcusparse.so.*", "libcusolver.so.*", "libcudnn*.so.*",
        "libnccl.so.*", "libnvrtc.so.*", "libnvJitLink.so.*", "libnvvm.so.*", "libcupti.so.*"]

KERNEL = b"""
extern "C" __global__ void saxpy(float a, const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (; i < n; i += blockDim.x * gridDim.x)
        y[i] = a * x[i] + y[i];
}
"""


def load_all():
    libs, size = {}, 0
    for pat in LIBS:
        for path in sorted(glob.glob(os.path.join(CUDA, "lib64", pat)) +
                           glob.glob(os.path.join(CUDA, "nvvm", "lib64", pat))):
            if os.path.basename(path).split(".so")[0] in libs or path.endswith(".a"):
                continue
            try:
                libs[os.path.basename(path).split(".so")[0]] = ctypes.CDLL(path)
                size += os.path.getsize(path)
            except OSError:
                pass
    return libs, size


def compile_and_link(nvrtc, jit):
    prog = ctypes.c_void_p()
    if nvrtc.nvrtcCreateProgram(ctypes.byref(prog), KERNEL, b"saxpy.cu", 0, None, None):
        return False
    opts = (ctypes.c_char_p * 2)(b"--gpu-architecture=compute_80", b"-lineinfo")
    ok = nvrtc.nvrtcCompileProgram(prog, 2, opts) == 0
    n = ctypes.c_size_t()
    if ok and nvrtc.nvrtcGetPTXSize(prog, ctypes.byref(n)) == 0:
        ptx = ctypes.create_string_buffer(n.value)
        nvrtc.nvrtcGetPTX(prog, ptx)
        if jit is not None:
            h = ctypes.c_void_p()
            lopts = (ctypes.c_char_p * 1)(b"-arch=sm_80")
            if jit.nvJitLinkCreate(ctypes.byref(h), 1, lopts) == 0:
                jit.nvJitLinkAddData(h, 1, ptx, n.value, b"saxpy.ptx")  # NVJITLINK_INPUT_PTX
                jit.nvJitLinkComplete(h)
                jit.nvJitLinkDestroy(ctypes.byref(h))
    nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
    return ok


def main():
    secs = float(sys.argv[1])
    try:
        import torch
    except ImportError:
        print("no torch (python3-torch)")
        return
    libs, size = load_all()
    nvrtc, jit = libs.get("libnvrtc"), libs.get("libnvJitLink")
    if nvrtc is None:
        print(f"no NVRTC under {CUDA}")
        return
    print(f"mapped {len(libs)} libraries ({size / 1e6:.0f} MB)", flush=True)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
    print("ready", flush=True)
    end, compiles = time.time() + secs, 0
    while time.time() < end:
        for _ in range(20):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        compiles += compile_and_link(nvrtc, jit)
    print(f"compiles {compiles}")


main()

# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A PyTorch training loop for tools/bench_realhost.sh and tools/bench_pyphases.sh:
an MLP on random data, forward, loss, backward, SGD step, for SECONDS of wall
time. Importing torch maps ~315 libraries (Debian's python3-torch). Each
phase is a function of its own and the script times each with its thread's
CPU clock: every second (and at the end) it prints
  phases forward=S loss=S backward=S step=S
the CPU seconds each phase took so far, the truth a profile's split of
train_step's samples is held to."""
import sys
import time

import torch

CPU = {"forward": 0.0, "loss": 0.0, "backward": 0.0, "step": 0.0}


def timed(name, fn, *args):
    t = time.thread_time()
    r = fn(*args)
    CPU[name] += time.thread_time() - t
    return r


def forward_pass(model, x):
    return model(x)


def compute_loss(out, y):
    return torch.nn.functional.cross_entropy(out, y)


def backward_pass(loss):
    loss.backward()


def optimizer_step(opt):
    opt.step()
    opt.zero_grad()


def train_step(model, opt, x, y):
    out = timed("forward", forward_pass, model, x)
    loss = timed("loss", compute_loss, out, y)
    timed("backward", backward_pass, loss)
    timed("step", optimizer_step, opt)
    return loss


def say():
    print("phases " + " ".join(f"{k}={v:.4f}" for k, v in CPU.items()), flush=True)


def main():
    secs = float(sys.argv[1])
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 256)
    y = torch.randint(0, 10, (64,))
    print("ready", flush=True)
    end = time.time() + secs
    next_say = time.time() + 1
    while time.time() < end:
        train_step(model, opt, x, y)
        if time.time() >= next_say:
            say()
            next_say += 1
    say()


main()

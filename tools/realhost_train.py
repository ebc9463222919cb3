# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A PyTorch training loop for tools/bench_realhost.sh: an MLP on random data,
forward, loss, backward, SGD step, for SECONDS of wall time. Importing torch
maps ~315 libraries (Debian's python3-torch)."""
import sys
import time

import torch


def train_step(model, opt, x, y):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


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
    while time.time() < end:
        train_step(model, opt, x, y)


main()

# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Known wall-clock split: sleeper() sleeps 0.70 and computer() computes 0.30
of the main thread's wall time, kept exact over the run. Usage:
offcpu_split.py SECONDS. Prints the wall seconds each really took."""
import random
import sys
import time


def sleeper(budget):
    start = time.monotonic()
    time.sleep(budget)  # LINE:sleeper
    return time.monotonic() - start


def computer(budget):
    start = time.monotonic()
    x = 0
    while time.monotonic() - start < budget:
        for i in range(500):  # LINE:computer
            x += i * i
    return time.monotonic() - start


def main():
    secs = float(sys.argv[1])
    shares = [0.70, 0.30]
    fns = [sleeper, computer]
    owed = [0.0, 0.0]
    used = [0.0, 0.0]
    end = time.monotonic() + secs
    # Rounds of 5-15 ms, not a fixed 10 ms: a fixed round beats against the
    # sampler's fixed period (2 ms at 499 Hz) and the compute bursts then
    # land in phase or out of phase with it for whole seconds, which moved
    # the sampled CPU time by +-30% from run to run.
    rng = random.Random(1)
    while time.monotonic() < end:
        rnd = rng.uniform(0.005, 0.015)
        for i in range(2):
            owed[i] += shares[i] * rnd
            if owed[i] > used[i]:
                used[i] += fns[i](owed[i] - used[i])
    print("wall sleeper=%.3f computer=%.3f" % tuple(used), flush=True)


if __name__ == "__main__":
    main()

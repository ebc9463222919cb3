# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A multiprocessing.Pool of forked workers that allocate: under
`bpfprof --alloc` every task must come back (tests/e2e/test_alloc_safety.py).
Prints "mp_pool: N results, sum S". A worker that dies loses its task (the
pool starts another worker and waits for ever): after 60 s it says so and
exits 1."""
import multiprocessing as mp
import sys


def work(i):
    blocks = [bytearray(64 * 1024) for _ in range(64)]  # 4 MiB a task: sampled at any rate
    return i + len(blocks) - 64


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    keep = [bytearray(1 << 20) for _ in range(8)]  # the parent's sampled allocations first
    ctx = mp.get_context("fork")
    with ctx.Pool(4) as pool:
        try:
            res = pool.map_async(work, range(n), chunksize=1).get(timeout=60)
        except mp.TimeoutError:
            print("mp_pool: tasks lost (a worker died)", flush=True)
            return 1
    print(f"mp_pool: {len(res)} results, sum {sum(res)}", flush=True)
    return 0 if len(keep) == 8 and sum(res) == n * (n - 1) // 2 else 1


if __name__ == "__main__":
    sys.exit(main())

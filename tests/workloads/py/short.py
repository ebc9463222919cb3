# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A short command: SECS of CPU in spin() on the main thread and on a thread
started at once, then exit. Prints the CPU its start-up took (before this
line: the interpreter's own start, of which the part before its first
thread state has no Python frames to show) and the CPU spin() got."""
import time

START_CPU = time.process_time()

import sys  # noqa: E402
import threading  # noqa: E402


def spin(secs, out):
    t = time.thread_time()
    while time.thread_time() - t < secs:  # LINE:spin
        pass
    out.append(time.thread_time() - t)


def main():
    secs = float(sys.argv[1]) if len(sys.argv) > 1 else 0.1
    got = []
    th = threading.Thread(target=spin, args=(secs, got))
    th.start()
    spin(secs, got)
    th.join()
    print(f"start_cpu={START_CPU:.4f} spin_cpu={sum(got):.4f}", flush=True)


main()

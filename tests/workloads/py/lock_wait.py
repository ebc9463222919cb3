# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A hung Python program for bpfprof dump: thread "waiter" blocks on a
threading.Lock the main thread holds, inside wait_on_lock(); the main thread
sleeps in hold_and_sleep(); thread "spinner" computes in spin_forever()
(holding the GIL most of the time). Prints "ready PID" once all are in place;
runs until killed."""
import os
import threading
import time


def wait_on_lock(lock, started):
    started.set()
    lock.acquire()  # LINE:wait_on_lock


def spin_forever(started):
    started.set()
    x = 0
    while True:
        for i in range(1000):  # LINE:spin_forever
            x += i


def hold_and_sleep(lock):
    assert lock.locked()  # held since main() began: the waiter cannot get it
    print("ready %d" % os.getpid(), flush=True)
    while True:
        time.sleep(100)  # LINE:hold_and_sleep


def main():
    lock = threading.Lock()
    lock.acquire()
    a, b = threading.Event(), threading.Event()
    threading.Thread(target=wait_on_lock, args=(lock, a), name="waiter", daemon=True).start()
    threading.Thread(target=spin_forever, args=(b,), name="spinner", daemon=True).start()
    a.wait()
    b.wait()
    time.sleep(0.2)  # the waiter reaches acquire()
    # Never released: releasing and re-taking it (as this once did) let the
    # waiter win the lock now and then, and main then blocked before "ready".
    hold_and_sleep(lock)


if __name__ == "__main__":
    main()

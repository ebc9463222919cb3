# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Named threads, each spinning in its own function: worker-a in busy_a,
worker-b in busy_b, the main thread (MainThread) in busy_main, and
"wörker-ü;1" (a non-ASCII name with a ';') in busy_u, at low duty. A fifth
thread, renamed half way (first-name, then second-name), runs busy_r; a
sixth, started with _thread (no threading.Thread), runs busy_raw.
Usage: threads.py SECONDS. Prints "thread NATIVE_ID NAME" for each Thread,
"raw NATIVE_ID" for the other."""
import _thread
import sys
import threading
import time


def spin(stop, duty=1.0):
    x = 0
    while not stop.is_set():
        start = time.thread_time()
        while time.thread_time() - start < 0.01:
            for i in range(500):
                x += i
        if duty < 1.0:
            time.sleep(0.01 * (1 - duty) / duty)
    return x


def busy_a(stop):
    return spin(stop)


def busy_b(stop):
    return spin(stop)


def busy_u(stop):
    return spin(stop, 0.2)


def busy_r(stop):
    return spin(stop, 0.2)


def busy_main(stop):
    return spin(stop)


def busy_raw(stop, box, done):
    box.append(threading.get_native_id())
    spin(stop, 0.2)
    done.release()


def report(t):
    print("thread %d %s" % (t.native_id, t.name), flush=True)


def main():
    secs = float(sys.argv[1])
    stop = threading.Event()
    threads = [threading.Thread(target=busy_a, args=(stop,), name="worker-a"),
               threading.Thread(target=busy_b, args=(stop,), name="worker-b"),
               threading.Thread(target=busy_u, args=(stop,), name="wörker-ü;1"),
               threading.Thread(target=busy_r, args=(stop,), name="first-name")]
    for t in threads:
        t.start()
    raw_done = _thread.allocate_lock()
    raw_done.acquire()
    raw = []
    _thread.start_new_thread(busy_raw, (stop, raw, raw_done))
    for t in [threading.main_thread()] + threads:
        report(t)
    while not raw:
        time.sleep(0.001)
    print("raw %d" % raw[0], flush=True)
    timer = threading.Timer(secs, stop.set)
    timer.name = "stopper"
    timer.start()
    renamer = threading.Timer(secs / 2, lambda: setattr(threads[3], "name", "second-name"))
    renamer.start()
    busy_main(stop)
    for t in threads:
        t.join()
    raw_done.acquire()


if __name__ == "__main__":
    main()

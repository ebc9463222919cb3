# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""tools/bench_realhost.sh's figures from one profile of the whole machine:
bpfprof's folded stacks, or `perf script` output (folded here the way
stackcollapse-perf does). Prints one line of key=value pairs.

  unknown   share of samples with a user frame that is [unknown] or
            [missing frames] (perf: [unknown])
  root      share of samples with user frames whose outermost user frame is
            a process or thread root (_start, __libc_start_main, clone, ...)
  torch     of the samples under the training loop (bpfprof: a
            realhost_train.py frame; perf, no Python frames: the python3
            process) that have any PyTorch native frame (at::, torch::, c10::,
            libtorch*, libc10*), the share with a libtorch_cpu frame (at::,
            or libtorch_cpu+0x...)
"""
import re
import sys

ROOTS = {"_start", "__libc_start_main", "__libc_start_call_main", "clone", "clone3", "__clone",
         "__clone3", "start_thread", "__GI___clone", "__GI___clone3", "_dl_start_user"}
TORCH = re.compile(r"at::|torch::|c10::|libtorch|libc10|THP")
TORCH_CPU = re.compile(r"at::|libtorch_cpu")


def folded(path):
    for line in open(path, errors="replace"):
        stack, _, n = line.rstrip("\n").rpartition(" ")
        if stack and n.isdigit():
            yield stack.split(";"), int(n)


def perf_stacks(path):
    """perf script: a header line, then one frame per line (leaf first), blank line."""
    comm, frames = None, []
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        if not line.strip():
            if comm is not None:
                yield [comm] + frames[::-1], 1
            comm, frames = None, []
        elif not line[0].isspace():
            comm, frames = line.split()[0], []
        else:
            parts = line.split(None, 1)
            if len(parts) < 2:
                continue
            sym = re.sub(r"\+0x[0-9a-f]+ \(", " (", parts[1])
            m = re.match(r"(.*) \((.*)\)$", sym)
            name, dso = (m.group(1), m.group(2)) if m else (sym, "")
            if dso.startswith("[kernel"):
                name += "_[k]"
            elif name == "[unknown]" and dso and dso != "[unknown]":
                name = "[unknown]"
            frames.append(name)
    if comm is not None:
        yield [comm] + frames[::-1], 1


def main():
    kind, path = sys.argv[1], sys.argv[2]
    stacks = folded(path) if kind == "folded" else perf_stacks(path)
    n = user = unknown = root = loop = loop_torch = loop_cpu = 0
    for frames, c in stacks:
        n += c
        us = [f for f in frames[1:] if not f.endswith("_[k]")]
        if not us:
            continue
        user += c
        if any(f in ("[unknown]", "[missing frames]") for f in us):
            unknown += c
        if us[0] in ROOTS:
            root += c
        under = ("realhost_train.py" in ";".join(frames)) if kind == "folded" else \
            frames[0].startswith("python3")
        if under:
            loop += c
            if any(TORCH.search(f) for f in us):
                loop_torch += c
                if any(TORCH_CPU.search(f) for f in us):
                    loop_cpu += c

    def share(a, b):
        return f"{100.0 * a / b:.1f}%" if b else "n/a"

    print(f"samples={n} user={user} unknown={share(unknown, user)} root={share(root, user)} "
          f"loop={loop} torch_native={loop_torch} torch_cpu={share(loop_cpu, loop_torch)}")


main()

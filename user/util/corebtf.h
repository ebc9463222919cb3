/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * CO-RE against a small BTF. libbpf 1.1 relocates a BPF object against the
 * whole vmlinux BTF: it reads and parses 5.5 MB (14-18 ms of CPU in a fresh
 * process) and matches each struct our programs read against all of its
 * ~127k types; together ~40% of loading the CPU object, most of -a's
 * start-up. The relocations only need the structs the object names, so the
 * first run of a boot writes those (with every embedded struct, union,
 * array and enum, pointers cut to void *) into a file of ~300 types, and
 * later runs give libbpf that file (btf_custom_path). One file per build
 * (the objects' ELF bytes hashed) and boot (boot_id), in a root-only
 * directory.
 */
#ifndef BPFPROF_COREBTF_H
#define BPFPROF_COREBTF_H

#include <stdbool.h>
#include <stddef.h>

/* One BPF object's ELF (a skeleton's X__elf_bytes()). */
struct corebtf_obj {
	const void *elf;
	size_t sz;
};

/*
 * The cache file for objs[0..n) (every object the binary may load: one
 * file serves them all) into path (len bytes): true when it is there (a
 * regular file of ours), false when not (path is where corebtf__write
 * puts it; "" when there is no cache: BPFPROF_CORE_CACHE set empty, no
 * boot id).
 */
bool corebtf__cached(const struct corebtf_obj *objs, int n, char *path, size_t len);

/*
 * Write path: the types of the running kernel's BTF that the CO-RE
 * relocations of objs[0..n) can match (their BTF names them). 0 or -errno.
 */
int corebtf__write(const struct corebtf_obj *objs, int n, const char *path);

#endif

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * elfsym: the function symbols of one ELF file, loaded once per file (not per
 * process) and looked up by ELF virtual address. Looks for the best symbol
 * source, in order: the file's own .symtab; a separate debug file found by
 * build id (<debug_root>/.build-id/xx/yyyy.debug) or by .gnu_debuglink (same
 * dir, dir/.debug/, <debug_root>/dir/), CRC checked; .gnu_debugdata
 * (MiniDebugInfo, xz); and always .dynsym as well. C++ names are demangled.
 */
#ifndef BPFPROF_ELFSYM_H
#define BPFPROF_ELFSYM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct elfsym;

/* A function by the file's CFI: one FDE's range, ELF vaddrs. */
struct elfsym_func {
	uint64_t start, end;
};

/*
 * The functions of the ELF file open at fd, sorted by start, one a start
 * (unwind/cfi.h's cfi__functions); *out malloc'd. 0 or -errno.
 */
typedef int (*elfsym_functions_fn)(int fd, struct elfsym_func **out, size_t *n);

struct elfsym_opts {
	/* Directory of separate debug files; NULL means "/usr/lib/debug". */
	const char *debug_root;
	/*
	 * Prefix under which the path of the file and the debug directories are
	 * resolved, e.g. "/proc/1234/root" for a process in another mount
	 * namespace; NULL or "" means the host's root.
	 */
	const char *root;
	/*
	 * Or, with has_root_fd, a directory fd of that root (tfile__root; stays
	 * valid after the process exits). Every debug file is resolved inside
	 * the root (no symlink leads out of it) and must be a regular file.
	 */
	bool has_root_fd;
	int root_fd;
	/*
	 * With has_debug_fd, a separate debug file already found (debuginfod):
	 * tried first, taken only with the file's own build id.
	 */
	bool has_debug_fd;
	int debug_fd;
	/*
	 * Where the symbols are not the full set: what names an address no
	 * symbol covers by its function (elfsym__function). NULL: nothing.
	 * Given by the caller: the CFI parser is the unwinder's.
	 */
	elfsym_functions_fn functions;
};

/*
 * Load the symbols of the ELF file open at fd (the fd is not kept or closed:
 * the caller closes it). path is the file's path inside root (used to find
 * .gnu_debuglink companions); may be NULL. Returns 0 or -errno (-ENOEXEC for
 * a file that is not ELF).
 */
int elfsym__open(struct elfsym **out, int fd, const char *path, const struct elfsym_opts *opts);
void elfsym__free(struct elfsym *es);

/*
 * The function containing vaddr: its (demangled) name, and the distance from
 * its start in *off if off is not NULL. NULL when no symbol covers vaddr.
 * Symbols without a size cover up to the next symbol, within their section.
 * The returned string lives as long as es.
 */
const char *elfsym__lookup(const struct elfsym *es, uint64_t vaddr, uint64_t *off);

/*
 * The start of the function holding vaddr by the file's CFI (its FDE), for
 * an address no symbol names: loaded (opts.functions) only where the
 * symbols are not the full set (.dynsym alone, MiniDebugInfo, none). 0 and
 * *start, or -ENOENT.
 */
int elfsym__function(const struct elfsym *es, uint64_t vaddr, uint64_t *start);

/*
 * Convert a file offset (what /proc/PID/maps pgoff + (ip - start) gives) into
 * an ELF virtual address using the PT_LOAD program headers. Returns 0 or
 * -ENOENT when no PT_LOAD segment contains the offset.
 */
int elfsym__offset_to_vaddr(const struct elfsym *es, uint64_t file_off, uint64_t *vaddr);

/* Build id as lowercase hex ("" when the file has none). */
const char *elfsym__build_id(const struct elfsym *es);
/* Heap bytes es holds (what the memory budget is charged). */
size_t elfsym__bytes(const struct elfsym *es);
/* Number of function symbols loaded, and which source they came from (for -v). */
size_t elfsym__count(const struct elfsym *es);
const char *elfsym__source(const struct elfsym *es);
/* ET_EXEC (non-PIE executable) or ET_DYN. */
int elfsym__elf_type(const struct elfsym *es);

/* An executable (ET_EXEC, or DF_1_PIE), not a library. */
bool elfsym__executable(const struct elfsym *es);

/*
 * The file that holds the DWARF line tables of the ELF file open at fd: a
 * dup of fd when it has them, else its separate debug file by build id, then
 * by .gnu_debuglink (resolved as elfsym__open resolves them, inside the
 * root). Returns a new fd (the caller closes it) or -errno (-ENOENT: none).
 */
int elfsym__dwarf_fd(int fd, const char *path, const struct elfsym_opts *opts);

/*
 * Read just the build id of the ELF file at fd (from PT_NOTE / .note.gnu.build-id)
 * into hex (lowercase, NUL terminated). Returns the number of id bytes, 0 if the
 * file has no build id, or -errno.
 */
int elf_read_build_id(int fd, char *hex, size_t hexlen);

/*
 * Decompress MiniDebugInfo (xz) into a malloc'd *out, bounded: -EFBIG when
 * it would inflate past 1 MiB + 32 times its size (64 MiB at most), -ETIME
 * past 200 ms of CPU. Exposed for tests.
 */
int elfsym__xz_decode(const void *in, size_t in_len, void **out, size_t *out_len);

/* Demangle a C++ (Itanium ABI) name; returns a malloc'd string or NULL if not mangled. */
char *demangle(const char *name);

#endif

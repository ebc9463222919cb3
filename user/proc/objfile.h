/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * objtab: every distinct mapped file seen during a run, identified by device
 * and inode (the same library mapped by 200 processes is one objfile), with an
 * fd opened while a process that maps it was alive: through
 * /proc/PID/map_files (works for deleted files and other mount namespaces),
 * else /proc/PID/root/PATH. Symbols are loaded lazily, once per file.
 */
#ifndef BPFPROF_OBJFILE_H
#define BPFPROF_OBJFILE_H

#include <stdbool.h>
#include <stdint.h>

#include "symbolize/elfsym.h"

struct elfsym;
struct dwlines;
struct dwline;

/* Frame object ids below OBJ_FIRST are not files. */
#define OBJ_KERNEL   0 /* kernel address */
#define OBJ_UNMAPPED 1 /* user address in no known mapping */
#define OBJ_ANON     2 /* anonymous executable memory (JIT, trampolines) */
#define OBJ_PYTHON   3 /* a Python frame: addr is a pytrack code id (0: unreadable) */
#define OBJ_SYNTH    4 /* a frame a feature names (e.g. "[cuda] kernel"): build_opts.synth_name */
#define OBJ_JIT	     5 /* JIT code the process's perf map names: addr is a perfmaps name id */
#define OBJ_FIRST    16

struct objfile {
	uint32_t id;
	uint32_t dev_major, dev_minor;
	uint64_t ino;
	char *path;	  /* as in the process's maps */
	const char *name; /* basename of path */
	int root_fd;	  /* its process's root (debug files), -1: the host's */
	int fd;		  /* -1 if it could not be opened, or closed (no live user) */
	int open_err;	  /* -errno when the file could not be opened */
	int load_err;	  /* -errno when symbols could not be loaded */
	bool loaded;
	bool live;	    /* a live process maps it (objtab__mark_unused) */
	bool closed;	    /* closed by objtab__close_unused: reopened when mapped again */
	uint8_t open_tries; /* reopens after a failed open */
	struct elfsym *syms;
	uint64_t frames; /* distinct frames resolved in it (for -v) */
	/* its first executable mapping seen, as /proc/PID/maps showed it (pprof Mapping) */
	uint64_t map_start, map_end, map_pgoff;
	bool has_map;
	bool foreign;	    /* opened inside another mount namespace */
	int lines_err;	    /* -errno once its DWARF proved unreadable or absent */
	struct dwlines *dw; /* source lines, opened on first use; NULL: not now */
	uint64_t dw_used;   /* last use (LRU for the memory budget) */
	/*
	 * Symbols live in the memory budget: the least recently used are freed
	 * and read again from fd on demand. A file with no fd left (closed:
	 * its processes exited) keeps, in memo, the name of each offset the
	 * aggregated stacks hold, taken before its symbols were freed.
	 */
	struct objtab *tab;
	uint64_t last_use;
	size_t sym_bytes;     /* charged for syms */
	char *build_id;	      /* kept past an eviction (mappings name it); NULL: none */
	struct symmemo *memo; /* sorted by off */
	uint32_t nmemo;
	char *memo_pool;		 /* the memo's strings */
	size_t memo_bytes;		 /* charged for memo and memo_pool */
	const struct symmemo *memo_last; /* the last found (its line, for objtab__lines) */
	bool memo_lines;		 /* the memo holds source lines too */
	bool info_known;		 /* is_exec and build_id were read (kept past a drop) */
	bool is_exec;
	bool memo_pending; /* chosen for eviction: its frames are being collected */
	bool evicted;	   /* its symbols were freed by the budget at least once */
	bool sampled;	   /* a frame of the aggregated stacks is in it (objtab__sampled) */
	/*
	 * The fd cap (objtab__set_fd_cap): past it the least recently used
	 * fds of files live processes map are closed ("parked") and opened
	 * again on demand (objfile__fd) through the last mapping seen, with
	 * the inode checked. A pinned file's fd is named by path
	 * (/proc/self/fd/N: uprobes, USDT) and is never parked.
	 */
	bool parked;
	bool pinned;
	/*
	 * Its separate debug file from debuginfod (objtab__set_debuginfod),
	 * -1: none (yet); asked: queued once.
	 */
	int debug_fd;
	bool debuginfod_asked;
	uint64_t fd_used;  /* last use of its fd (LRU) */
	uint32_t last_pid; /* the last live mapping seen of it, for a reopen */
	uint64_t last_start, last_end;
};

struct objtab;

struct objtab_stats {
	uint64_t opened;	/* files opened (reopens included) */
	uint64_t open_failed;	/* could not be opened, or refused (see tfile's stats) */
	uint64_t by_path;	/* opened by path (map_files failed: process gone) */
	uint64_t closed;	/* closed when no live process mapped them any more */
	uint64_t syms_evicted;	/* symbol tables freed by the memory budget */
	uint64_t syms_reread;	/* ... and read again from the file */
	uint64_t syms_lost;	/* frames of an evicted, closed file the memo did not hold */
	uint64_t parked;	/* fds closed by the fd cap while a live process mapped the file */
	uint64_t reopened;	/* ... opened again on demand */
	uint64_t reopen_failed; /* ... that could not be (the mapping gone, or another inode) */
	uint32_t fds, fds_peak; /* fds held now (files and their roots), and the most held */
	uint64_t syms_loaded;	/* symbol tables read (rereads included) */
	uint64_t syms_cpu_ns;	/* the agent thread's CPU reading them: per file, not sample */
	uint32_t fd_cap;
};

struct objtab *objtab__new(void);
void objtab__free(struct objtab *t);

/*
 * Find the object for a file mapping of process pid, creating and opening it
 * on first sight. start/end is the mapping as /proc/PID/maps shows it (used
 * for map_files). Returns NULL only on allocation failure.
 */
struct objfile *objtab__get(struct objtab *t, uint32_t dev_major, uint32_t dev_minor, uint64_t ino,
			    const char *path, uint32_t pid, uint64_t start, uint64_t end);
/*
 * At most cap fds (files and container roots) held open for mapped files;
 * 0: no cap. Past it the least recently used are closed (down to 7/8 of
 * cap) and opened again when needed.
 */
void objtab__set_fd_cap(struct objtab *t, uint32_t cap);
/*
 * The file's fd for reading it now, opened again if the fd cap closed it
 * (counted when that fails); -1 if none. Counts as a use (LRU). Valid until
 * the next objtab call that opens a file.
 */
int objfile__fd(struct objfile *o);
/* o's fd is named by path (/proc/self/fd/N) for as long as we run: never closed by the cap. */
void objfile__pin(struct objfile *o);
/* Remember start-end at file offset pgoff as o's mapping, unless it has one (pprof Mapping). */
void objfile__note_mapping(struct objfile *o, uint64_t start, uint64_t end, uint64_t pgoff);
/*
 * What names a stripped file's addresses by function (elfsym_opts.functions:
 * the CFI parser, unwind/cfi.h's cfi__functions); NULL: module+0xADDR.
 */
void objtab__set_functions(struct objtab *t, elfsym_functions_fn fn);
/* Whether o is a program rather than a library (loads its symbols). */
bool objfile__executable(struct objfile *o);
/*
 * Source file and line of ELF virtual address vaddr in o, from its DWARF or
 * its separate debug file (dwlines.h). The DWARF is opened on first use and
 * kept, charged to the memory budget ("native lines"), least recently used
 * given back first; an object whose fd was closed is reopened by path (host
 * root only, same device and inode). Strings live until the next call.
 * Returns 0 or -errno.
 */
int objtab__lines(struct objtab *t, struct objfile *o, uint64_t vaddr, struct dwline *out);
/* The vdso is the same image in every process: loaded from our own. */
struct objfile *objtab__vdso(struct objtab *t);
struct objfile *objtab__by_id(const struct objtab *t, uint32_t id);
uint32_t objtab__count(const struct objtab *t);

/*
 * Symbolize a file offset in obj: *name is the function (NULL if unknown) and
 * *vaddr the ELF virtual address of the offset (file_off if it maps to no
 * segment). Loads the symbols on first use. Returns 0 or -errno when the
 * file's symbols are unavailable (then *vaddr is still set).
 */
int objfile__symbolize(struct objfile *obj, uint64_t file_off, const char **name, uint64_t *vaddr);
/*
 * For a file offset no symbol names (objfile__symbolize gave no name): the
 * ELF vaddr where its function starts by the file's CFI, so that one
 * function is one frame (module+0xSTART). 0 and *start, or -ENOENT.
 */
int objfile__function(struct objfile *obj, uint64_t file_off, uint64_t *start);
/* Build id (hex) or NULL, available once symbols are loaded. */
const char *objfile__build_id(struct objfile *obj);
/* The file's device as the kernel numbers it (s_dev: major << 20 | minor), as BPF keys files. */
static inline uint64_t objfile__kdev(const struct objfile *o)
{
	return ((uint64_t)o->dev_major << 20) | o->dev_minor;
}

/*
 * Files of exited processes: objtab__mark_unused(), then objfile__mark_used()
 * for each object a live process maps, then objtab__close_unused() loads the
 * symbols of the others that samples named (objtab__sampled) and closes their
 * fds. Returns the files closed. A later mapping reopens the file.
 */
void objtab__mark_unused(struct objtab *t);
/* A sample's frame is in object id: its symbols are loaded before its file is closed. */
void objtab__sampled(struct objtab *t, uint32_t id);
void objfile__mark_used(struct objtab *t, uint32_t id);
size_t objtab__close_unused(struct objtab *t);
const struct objtab_stats *objtab__stats(const struct objtab *t);

/*
 * Separate debug files from the servers DEBUGINFOD_URLS names, for sampled
 * files without their full symbols: fetched on a thread of their own
 * (symbolize/debuginfod.h), a file's names taken from its debug file once
 * it arrived; the end of a run (objtab__name_frames) waits for those still
 * coming at most wait_ns. No-op without DEBUGINFOD_URLS.
 */
void objtab__set_debuginfod(struct objtab *t, uint64_t wait_ns);
/* The -v line of debuginfod's work. */
void objtab__debuginfod_report(struct objtab *t);
/* Debug files still coming when the end's wait was over (the summary warns). */
uint64_t objtab__debuginfod_late(const struct objtab *t);

/*
 * Where the frames that still need names are: fn calls visit(arg, obj, off)
 * for every (object id, file offset) frame of the aggregated stacks. Called
 * before the symbols of a closed file are evicted, to keep their names.
 */
typedef void (*objtab_visit_fn)(void *arg, uint32_t obj, uint64_t off);
void objtab__set_frames(struct objtab *t, void (*fn)(void *ctx, objtab_visit_fn visit, void *arg),
			void *ctx);
/*
 * Continuous mode, between intervals (the stacks were written and emptied):
 * memos are dropped, and so are the symbols of closed files.
 */
void objtab__interval(struct objtab *t);
/*
 * The end of a run, before the profile is built: name every frame of the
 * aggregated stacks file by file, so that one file's symbols (and with
 * lines, its DWARF) are loaded at a time: each file's frames go to its memo
 * (name, and source line), then its symbols are freed. The profile is then
 * built from the memos. Returns the files named.
 */
size_t objtab__name_frames(struct objtab *t, bool lines);
/* Once the profile is built: every symbol table, memo and DWARF is freed. */
void objtab__release(struct objtab *t);
/* Free obj's symbols as the budget would (tests). Returns the bytes freed. */
size_t objtab__evict_syms(struct objtab *t, struct objfile *obj);

#endif

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * pytrack: the CPython interpreters among the profiled processes. Finds them
 * (a mapped file that defines _PyRuntime), tells BPF their layout and which
 * PyThreadState each thread has, and turns the (code object, position)
 * records of samples into stable code ids, read once per code object and
 * re-checked when an address may have been reused. With --per-thread, also
 * the names threading gave the sampled threads (threading.Thread.name).
 */
#ifndef BPFPROF_PYTRACK_H
#define BPFPROF_PYTRACK_H

#include <stdbool.h>
#include <stdint.h>

struct objtab;
struct proc;
struct pytrack;

struct pytrack_stats {
	uint64_t interpreters; /* processes found to be CPython */
	uint64_t unsupported;  /* CPython of a version we have no layout for */
	uint64_t thread_scans;
	uint64_t threads; /* thread states written to BPF */
	uint64_t codes;	  /* code objects decoded */
	uint64_t
		code_failed; /* code objects never read, live or from a snapshot (by pytrack__stats) */
	uint64_t frames_unread;	 /* frames that named them: dropped (by pytrack__stats) */
	uint64_t code_checks;	 /* reads of a cached code object's identity (REVALIDATE_NS) */
	uint64_t code_reused;	 /* addresses found reused by another code object */
	uint64_t merge_mismatch; /* stacks whose eval frames and Python frames did not pair up */
	/* code object snapshots from BPF (SAMPLE_PYCODE) */
	uint64_t snap_received;
	uint64_t snap_used;	/* code objects named from a snapshot (live read failed) */
	uint64_t snap_refused;	/* invalid, or of a process no longer known as Python */
	uint64_t snap_outdated; /* a live read found another code object at its address */
	uint64_t snap_late;	/* arrived after a sample that named its code object */
	/* thread names (pytrack__thread_seen); the thread counts are tallied by pytrack__stats */
	uint64_t name_reads;	      /* reads of threading._active */
	uint64_t name_read_failed;    /* of which found memory that was not what it should be */
	uint64_t name_read_ns;	      /* time spent in them */
	uint64_t threads_named;	      /* sampled threads named by threading.Thread */
	uint64_t threads_unnamed;     /* not threading's (no Thread, no thread state): OS name */
	uint64_t threads_name_failed; /* whose name could not be read: OS name */
	uint64_t threads_name_late;   /* sampled too late to be read before their process ended */
	/* line tables given back to the memory budget (counted in its cache) */
	uint64_t lines_reread; /* read again for an offset not seen before the eviction */
	uint64_t lines_lost;   /* could not be: the frame gets the function's first line */
	/*
	 * Interpreters whose _Py_DebugOffsets block is newer than any layout
	 * bpfprof knows, decoded with the newest (pyoffsets.c): PY_VERSION_HEX
	 * major.minor of each, and of the layout used; said once each.
	 */
	uint32_t newer_version[4], newer_layout[4];
	uint32_t nnewer;
	uint32_t unsupported_version; /* major.minor of the last unsupported one, 0: unknown */
};

int pytrack__new(struct pytrack **out, int procs_fd, int threads_fd, struct objtab *objs);
void pytrack__free(struct pytrack *t);

/* Probe p once (after exec or new mappings: again); write its layout and threads. */
void pytrack__sync(struct pytrack *t, const struct proc *p);
/* pytrack__sync now, whatever a test delay says (BPF found the interpreter first). */
void pytrack__probe(struct pytrack *t, const struct proc *p);
/* A thread of pid had no thread state in BPF: rescan the interpreter's threads. */
void pytrack__rescan(struct pytrack *t, uint32_t pid);
/* pid exited or exec'd: drop its BPF entries; after an exec, forget its interpreter. */
void pytrack__forget(struct pytrack *t, uint32_t pid, bool exited);
bool pytrack__is_python(const struct pytrack *t, uint32_t pid);
/* Whether pid was ever looked at (sync'd). */
bool pytrack__seen(const struct pytrack *t, uint32_t pid);

/*
 * BPF's pycode_seen map (the code objects whose snapshot it sent): a key is
 * dropped where a live read finds that the address now holds another code
 * object, so that BPF sends the new one's snapshot.
 */
void pytrack__set_seen_map(struct pytrack *t, int seen_fd);
/* BPF's py_files: each interpreter file's layout, written once it is known. */
void pytrack__set_files_map(struct pytrack *t, int files_fd);
/*
 * BPF's py_gen (an array of one u32): bumped after each interpreter written
 * to py_procs and each change to py_threads, so that threads BPF noted as
 * not Python, or whose thread state it kept, look again.
 */
void pytrack__set_gen_map(struct pytrack *t, int gen_fd);
/*
 * A SAMPLE_PYCODE record's payload (struct pycode_snap, len bytes) for pid:
 * validated and kept until a frame of that code object cannot be read live
 * (the process exited, or the object was freed). Counted in the stats.
 */
void pytrack__snapshot(struct pytrack *t, uint32_t pid, const void *snap, size_t len);

/*
 * A sample's Python frame: code object at addr in pid, raw position from BPF.
 * Returns a code id (> 0) and the byte offset of the instruction in *off, or
 * 0 on allocation failure. A code object that cannot be read yet still gets
 * an id: its snapshot may come after this sample; if it never does, the
 * frame is dropped at the end (pytrack__describe fails; counted in
 * frames_unread).
 */
uint64_t pytrack__code(struct pytrack *t, uint32_t pid, uint64_t addr, uint64_t raw, uint32_t *off);

/* Name a code id at an instruction offset: qualname, file, line. */
int pytrack__describe(const struct pytrack *t, uint64_t id, uint32_t off, const char **qualname,
		      const char **file, uint32_t *line);
/* The first line of a code id's function (co_firstlineno), or 0. */
uint32_t pytrack__first_line(const struct pytrack *t, uint64_t id);

/*
 * Continuous mode, between intervals (every sample so far has been named):
 * free the code objects and state of processes that exited or exec'd.
 * Returns the code objects freed.
 */
size_t pytrack__gc(struct pytrack *t);
/*
 * A sample of thread tid of pid (--per-thread): read the threading names of
 * pid when tid is new to it (at most every 20 ms) and at most every 2 s
 * otherwise (threads are renamed, start, end). Cheap when nothing is due.
 */
void pytrack__thread_seen(struct pytrack *t, uint32_t pid, uint32_t tid);
/* At the end: read the names of live processes with threads sampled since their last read. */
void pytrack__thread_names_final(struct pytrack *t);
/* The last name threading gave thread tid of pid, or NULL (not known: use the OS name). */
const char *pytrack__thread_name(const struct pytrack *t, uint32_t pid, uint32_t tid);

struct pytrack_stats *pytrack__stats(struct pytrack *t);
/* Bytes of line tables held, and how many were evicted (memory budget). */
size_t pytrack__lines_held(const struct pytrack *t, uint64_t *evicted);

#endif

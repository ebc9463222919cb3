/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * decode: one ring buffer stack record (struct prof_sample: header, kernel
 * addresses, user addresses, Python frame pairs) into a stack key (aggregate/
 * stacks.h): kernel addresses as they are, user addresses as (file, offset),
 * Python frames as code ids, flags and statistics.
 *
 * It is pure: what it needs from the rest of the recorder (the process table,
 * the side band, Python tracking) comes through struct decode_ops, and what it
 * may do comes in struct decode_cfg. record.c supplies the real ones; the unit
 * test (tests/unit/test_decode.c) feeds synthetic records to stand-ins.
 */
#ifndef BPFPROF_DECODE_H
#define BPFPROF_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct prof_sample;
struct sframe;
struct stack_key;

struct decode_cfg {
	bool kernel;	 /* keep kernel frames (not --no-kernel) */
	bool user;	 /* keep user frames (not --no-user) */
	bool python;	 /* merge Python frames (Python tracking on, not --no-python) */
	bool per_thread; /* key by thread too */
	bool cgroup;	 /* key by cgroup id */
	bool gil;	 /* --gil: keep only Python samples whose thread held the GIL */
};

struct decode_ops {
	void *ctx;
	/*
	 * The user frames of one sample: begin() once (pid as of time_ns), then
	 * resolve() each address into *f: (objfile, file offset), OBJ_ANON or
	 * OBJ_UNMAPPED with the raw address; returns false when unmapped.
	 */
	void (*user_begin)(void *ctx, uint32_t pid, uint64_t time_ns);
	bool (*user_resolve)(void *ctx, uint64_t ip, struct sframe *f);
	/* after the last user frame: the n resolved frames (e.g. their files want tables); may be NULL */
	void (*user_end)(void *ctx, const struct sframe *f, uint32_t n, uint64_t time_ns);
	/* the process needs its unwind tables / Python state (re)written; may be NULL */
	void (*want_sync)(void *ctx, uint32_t pid);
	/*
	 * Python (used only with cfg.python): the code id of (code object address,
	 * instruction) and the instruction's byte offset in *off, 0 if unreadable;
	 * seen(): the process was looked at; rescan(): its threads must be read
	 * again; thread(): a thread seen (for threading's names). May be NULL.
	 */
	uint64_t (*py_code)(void *ctx, uint32_t pid, uint64_t code, uint64_t instr, uint32_t *off);
	bool (*py_seen)(void *ctx, uint32_t pid);
	void (*py_rescan)(void *ctx, uint32_t pid);
	void (*py_thread)(void *ctx, uint32_t pid, uint32_t tid);
	/* Python frames of a process not probed yet (BPF found its interpreter): probe it now */
	void (*py_probe)(void *ctx, uint32_t pid, uint64_t time_ns);
	/* a cgroup id a key names (to be named while it still exists); may be NULL */
	void (*cgroup_seen)(void *ctx, uint64_t cgroup_id);
};

struct decode_stats {
	uint64_t bad;	 /* malformed records */
	uint64_t stacks; /* records decoded into a stack (the base of the shares below) */
	uint64_t user_frames;
	uint64_t user_unmapped; /* user addresses in no known mapping */
	uint64_t kstack_err, ustack_err, ktrunc, utrunc;
	uint64_t no_unwind_info;   /* samples taken before the process's tables were ready */
	uint64_t unwind_fp;	   /* of which were walked with frame pointers */
	uint64_t unwind_stopped;   /* table unwinding gave up before the outermost frame */
	uint64_t unwind_heuristic; /* a frame reached by a frame-pointer step (no row for a PC) */
	uint64_t missing_frames;   /* stacks given a [missing frames] marker */
	uint64_t user_samples;	   /* samples with user frames */
	/*
	 * of which a frame was walked by frame pointers where tables had none:
	 * the process not described yet (fp), no row or a partial table's gap,
	 * a table not built yet, anonymous code (see report.c's share)
	 */
	uint64_t user_fp;
	uint64_t py_samples;   /* samples with Python frames */
	uint64_t py_no_thread; /* Python process, thread state not known yet */
	uint64_t py_err, py_trunc;
	uint64_t py_frames_dropped; /* code objects that could not be read */
	uint64_t gil_held;	    /* Python samples whose thread held the GIL */
	uint64_t py_eval_marked;    /* native frames BPF found to be eval loop calls */
	uint64_t gil_none_kept;	    /* --gil: kept, no GIL known (free-threaded, unreadable) */
	uint64_t gil_known;    /* Python samples whose GIL was read (else: no GIL, free-threaded) */
	uint64_t gil_left_out; /* samples --gil did not keep */
};

/* Room a key needs for any record: pass at least this many bytes as k. */
size_t decode__key_size(void);

/*
 * Decode the record s (size bytes) into k (decode__key_size() bytes).
 * Returns 0, -EINVAL for a malformed record, -ENOENT for one --gil leaves out
 * (each counted in st).
 */
int decode__sample(const struct decode_cfg *cfg, const struct decode_ops *ops,
		   struct decode_stats *st, const struct prof_sample *s, size_t size,
		   struct stack_key *k);

#endif

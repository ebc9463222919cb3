// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What the pure decoder (collect/decode.c) asks of a recording: a user
 * address made (file, offset) with the process table, reading the side band
 * or /proc when a mapping is not known yet; the files a sample's frames are
 * in kept warm in the unwind tables; Python code ids from the tracker;
 * cgroup names noted. record.c hands these to decode__sample() through
 * struct decode_ops; rec__key() is the features' way in.
 */
#include <string.h>

#include "collect/decode_ops.h"
#include "collect/pytrack.h"
#include "collect/recorder.h"
#include "collect/sideband.h"
#include "proc/cgroup.h"
#include "proc/objfile.h"
#include "proc/proc.h"
#include "symbolize/perfmap.h"
#include "unwind/tables.h"
#include "util/clock.h"

/* Re-read a process's maps after an address missed at most this often. */
#define RELOAD_INTERVAL_NS (200 * 1000000ULL)

static void dec_user_begin(void *ctx, uint32_t pid, uint64_t time_ns)
{
	struct recorder *r = ctx;

	/* a sample newer than our last side-band read may need records after it */
	if (time_ns > sideband__consumed_until(r->sb))
		sideband__consume(r->sb);
	/* sampled: a target (moved into the cgroup, say): its records are kept from now */
	sideband__mark_target(r->sb, pid);
	r->dpid = pid;
	r->dtime_ns = time_ns;
	r->dproc = proctab__lookup(r->procs, pid, time_ns);
}

static bool dec_user_resolve(void *ctx, uint64_t ip, struct sframe *f)
{
	struct recorder *r = ctx;
	const struct mapping *m = NULL;
	struct proc *p = r->dproc;

	if (p)
		m = proc__find(p, ip);
	if (!m) {
		/* the MMAP2 record may still be in the side band: read it, retry */
		sideband__consume(r->sb);
		p = r->dproc = proctab__lookup(r->procs, r->dpid, r->dtime_ns);
		if (p)
			m = proc__find(p, ip);
	}
	if (!m && p && !p->exited && proctab__is_latest(r->procs, p)) {
		uint64_t now = mono_ns();

		if (now - p->last_reload_ns > RELOAD_INTERVAL_NS) {
			p->last_reload_ns = now;
			proctab__reload(r->procs, p);
			m = proc__find(p, ip);
		}
	}
	if (!m) {
		*f = (struct sframe){ .obj = OBJ_UNMAPPED, .addr = ip };
		return false;
	}
	if (m->obj == OBJ_ANON) {
		uint32_t id = r->jit ? perfmaps__lookup(r->jit, r->dpid, ip) : 0;

		*f = id ? (struct sframe){ .obj = OBJ_JIT, .addr = id }
			: (struct sframe){ .obj = OBJ_ANON, .addr = ip };
		if (r->unw && unwinder__trampoline(r->unw, r->dpid, ip))
			f->aux = SFRAME_TRAMPOLINE;
	} else {
		*f = (struct sframe){ .obj = m->obj, .addr = ip - m->start + m->pgoff };
		objtab__sampled(r->objs, m->obj);
	}
	return true;
}

/*
 * The files a sample's user frames are in want unwind tables (and those that
 * have one stay warm); a frame in a file refused for lack of room means the
 * walk went on by frame pointers there: counted for the end-of-run warning.
 */
static void dec_user_end(void *ctx, const struct sframe *f, uint32_t n, uint64_t time_ns)
{
	struct recorder *r = ctx;
	uint32_t last = 0;
	bool no_room = false;

	bool gap = false;

	for (uint32_t i = 0; i < n; i++) {
		/* the leaf's exact pc; a caller's call instruction */
		gap |= unwinder__hit_pc(r->unw, f[i].obj,
					i && f[i].addr ? f[i].addr - 1 : f[i].addr, time_ns);
		if (f[i].obj == last)
			continue;
		last = f[i].obj;
		no_room |= unwinder__hit(r->unw, last, time_ns);
	}
	r->st.unwind_no_room += no_room;
	r->st.unwind_partial_gap += gap;
}

static void dec_want_sync(void *ctx, uint32_t pid)
{
	rec__want_sync(ctx, pid);
}

static uint64_t dec_py_code(void *ctx, uint32_t pid, uint64_t code, uint64_t instr, uint32_t *off)
{
	return pytrack__code(((struct recorder *)ctx)->py, pid, code, instr, off);
}

static bool dec_py_seen(void *ctx, uint32_t pid)
{
	return pytrack__seen(((struct recorder *)ctx)->py, pid);
}

static void dec_py_rescan(void *ctx, uint32_t pid)
{
	pytrack__rescan(((struct recorder *)ctx)->py, pid);
}

static void dec_py_thread(void *ctx, uint32_t pid, uint32_t tid)
{
	pytrack__thread_seen(((struct recorder *)ctx)->py, pid, tid);
}

void rec__py_probe(struct recorder *r, uint32_t pid, uint64_t time_ns)
{
	struct proc *p;

	if (!r->py || pytrack__is_python(r->py, pid))
		return;
	if (time_ns > sideband__consumed_until(r->sb))
		sideband__consume(r->sb);
	p = proctab__lookup(r->procs, pid, time_ns);
	if (p)
		pytrack__probe(r->py, p);
}

static void dec_py_probe(void *ctx, uint32_t pid, uint64_t time_ns)
{
	rec__py_probe(ctx, pid, time_ns);
}

static void dec_cgroup_seen(void *ctx, uint64_t id)
{
	cgroups__get(((struct recorder *)ctx)->cg, id);
}

/* After setup: the decoder's configuration from env and the parts that exist. */
void decode_ops__init(struct recorder *r)
{
	r->dcfg = (struct decode_cfg){
		.kernel = !env.no_kernel,
		.user = !env.no_user,
		.python = r->py && !env.no_python,
		.per_thread = env.per_thread,
		.cgroup = r->cg != NULL,
		.gil = env.gil,
	};
	r->dops = (struct decode_ops){
		.ctx = r,
		.user_begin = dec_user_begin,
		.user_resolve = dec_user_resolve,
		.user_end = r->unw ? dec_user_end : NULL,
		.want_sync = dec_want_sync,
		.py_code = r->py ? dec_py_code : NULL,
		.py_seen = r->py ? dec_py_seen : NULL,
		.py_rescan = r->py ? dec_py_rescan : NULL,
		.py_thread = r->py ? dec_py_thread : NULL,
		.py_probe = r->py ? dec_py_probe : NULL,
		.cgroup_seen = r->cg ? dec_cgroup_seen : NULL,
	};
}

struct stack_key *rec__key(struct recorder *r, const struct prof_sample *s, size_t size)
{
	r->dproc = NULL;
	if (decode__sample(&r->dcfg, &r->dops, &r->st.dec, s, size, r->key))
		return NULL;
	return r->key;
}

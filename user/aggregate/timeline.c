// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate/timeline.h"
#include "util/array.h"
#include "util/htab.h"

struct gpu_key {
	uint32_t owner_pid;
	uint32_t device;
};

struct timeline_priv {
	struct htab *strings; /* interned strings (keys copied, include the NUL) */
	struct htab *gpus;    /* struct gpu_key -> pseudo pid */
	struct htab *streams; /* (pseudo pid, stream) -> 1 */
	struct arena *arena;  /* argument arrays */
	uint32_t next_gpu_pid;
	uint64_t seq;
};

struct timeline *timeline__new(void)
{
	struct timeline *tl = calloc(1, sizeof(*tl));

	if (!tl)
		return NULL;
	tl->priv = calloc(1, sizeof(*tl->priv));
	if (!tl->priv)
		goto fail;
	tl->priv->strings = htab__new(1024, HTAB_COPY_KEYS);
	tl->priv->gpus = htab__new(0, HTAB_COPY_KEYS);
	tl->priv->streams = htab__new(0, HTAB_COPY_KEYS);
	tl->priv->arena = arena__new();
	tl->priv->next_gpu_pid = TL_GPU_PID_BASE;
	if (!tl->priv->strings || !tl->priv->gpus || !tl->priv->streams || !tl->priv->arena)
		goto fail;
	return tl;
fail:
	timeline__free(tl);
	return NULL;
}

void timeline__free(struct timeline *tl)
{
	if (!tl)
		return;
	if (tl->priv) {
		htab__free(tl->priv->strings);
		htab__free(tl->priv->gpus);
		htab__free(tl->priv->streams);
		arena__free(tl->priv->arena);
		free(tl->priv);
	}
	free(tl->events);
	free(tl->procs);
	free(tl->threads);
	free(tl);
}

const char *timeline__intern(struct timeline *tl, const char *s)
{
	struct htab_entry *e;
	size_t len;

	if (!s)
		return NULL;
	len = strlen(s) + 1;
	if (htab__upsert(tl->priv->strings, s, len, htab__hash(s, len), &e) < 0)
		return NULL;
	return e->key;
}

static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
	return array_grow(arr, cap, n, elem, 64);
}

static int set_track(struct timeline *tl, struct tl_track **arr, size_t *n, size_t *cap,
		     uint32_t pid, uint32_t tid, const char *name, int32_t sort_index, int set_name)
{
	const char *iname = NULL;
	struct tl_track *t;
	size_t i;

	if (set_name) {
		iname = timeline__intern(tl, name);
		if (!iname)
			return -ENOMEM;
	}
	for (i = 0; i < *n; i++) {
		t = &(*arr)[i];
		if (t->pid == pid && t->tid == tid) {
			if (set_name)
				t->name = iname;
			else
				t->sort_index = sort_index;
			return 0;
		}
	}
	if (grow((void **)arr, cap, *n, sizeof(**arr)))
		return -ENOMEM;
	t = &(*arr)[(*n)++];
	memset(t, 0, sizeof(*t));
	t->pid = pid;
	t->tid = tid;
	t->name = iname;
	t->sort_index = set_name ? INT32_MIN : sort_index;
	return 0;
}

int timeline__set_process_name(struct timeline *tl, uint32_t pid, const char *name)
{
	return set_track(tl, &tl->procs, &tl->nprocs, &tl->cap_procs, pid, 0, name, 0, 1);
}

int timeline__set_thread_name(struct timeline *tl, uint32_t pid, uint32_t tid, const char *name)
{
	return set_track(tl, &tl->threads, &tl->nthreads, &tl->cap_threads, pid, tid, name, 0, 1);
}

int timeline__set_thread_sort(struct timeline *tl, uint32_t pid, uint32_t tid, int32_t index)
{
	return set_track(tl, &tl->threads, &tl->nthreads, &tl->cap_threads, pid, tid, NULL, index,
			 0);
}

int timeline__gpu_track(struct timeline *tl, uint32_t owner_pid, const char *owner_name,
			uint32_t device, uint32_t stream, uint32_t *pid, uint32_t *tid)
{
	struct gpu_key key = { owner_pid, device };
	uint32_t skey[2];
	struct htab_entry *e;
	char name[256];
	int ret, err;

	ret = htab__upsert(tl->priv->gpus, &key, sizeof(key), htab__hash(&key, sizeof(key)), &e);
	if (ret < 0)
		return ret;
	if (ret == 1) {
		e->val = tl->priv->next_gpu_pid++;
		snprintf(name, sizeof(name), "GPU %u (%s [%u])", device,
			 owner_name ? owner_name : "?", owner_pid);
		err = timeline__set_process_name(tl, (uint32_t)e->val, name);
		if (err)
			return err;
	}
	*pid = (uint32_t)e->val;
	/* stream ids are small; tid 0 would be the process itself in some viewers */
	*tid = stream + 1;
	skey[0] = *pid;
	skey[1] = stream;
	ret = htab__upsert(tl->priv->streams, skey, sizeof(skey), htab__hash(skey, sizeof(skey)),
			   &e);
	if (ret < 0)
		return ret;
	if (ret == 1) {
		snprintf(name, sizeof(name), "stream %u", stream);
		err = timeline__set_thread_name(tl, *pid, *tid, name);
		if (!err)
			err = timeline__set_thread_sort(tl, *pid, *tid, (int32_t)stream);
		return err;
	}
	return 0;
}

static struct tl_event *new_event(struct timeline *tl, char ph, uint32_t pid, uint32_t tid,
				  uint64_t ts, const char *name, const char *cat)
{
	struct tl_event *ev;

	if (grow((void **)&tl->events, &tl->cap_events, tl->nevents, sizeof(*ev)))
		return NULL;
	ev = &tl->events[tl->nevents];
	memset(ev, 0, sizeof(*ev));
	ev->ph = ph;
	ev->pid = pid;
	ev->tid = tid;
	ev->ts = ts;
	ev->seq = tl->priv->seq++;
	if (name && !(ev->name = timeline__intern(tl, name)))
		return NULL;
	if (cat && !(ev->cat = timeline__intern(tl, cat)))
		return NULL;
	tl->nevents++;
	return ev;
}

static int copy_args(struct timeline *tl, struct tl_event *ev, const struct tl_arg *args,
		     size_t nargs)
{
	struct tl_arg *a;

	if (!nargs)
		return 0;
	if (nargs > UINT16_MAX)
		return -E2BIG;
	a = arena__alloc(tl->priv->arena, nargs * sizeof(*a));
	if (!a)
		return -ENOMEM;
	for (size_t i = 0; i < nargs; i++) {
		a[i].key = timeline__intern(tl, args[i].key);
		a[i].str = args[i].str ? timeline__intern(tl, args[i].str) : NULL;
		a[i].num = args[i].num;
		if (!a[i].key || (args[i].str && !a[i].str))
			return -ENOMEM;
	}
	ev->args = a;
	ev->nargs = (uint16_t)nargs;
	return 0;
}

int timeline__add_slice(struct timeline *tl, uint32_t pid, uint32_t tid, uint64_t ts, uint64_t dur,
			const char *name, const char *cat, const struct tl_arg *args, size_t nargs)
{
	struct tl_event *ev = new_event(tl, TL_COMPLETE, pid, tid, ts, name, cat);

	if (!ev)
		return -ENOMEM;
	ev->dur = dur;
	return copy_args(tl, ev, args, nargs);
}

int timeline__add_flow(struct timeline *tl, uint64_t id, const char *name, const char *cat,
		       uint32_t from_pid, uint32_t from_tid, uint64_t from_ts, uint32_t to_pid,
		       uint32_t to_tid, uint64_t to_ts)
{
	struct tl_event *s, *f;

	s = new_event(tl, TL_FLOW_START, from_pid, from_tid, from_ts, name, cat);
	if (!s)
		return -ENOMEM;
	s->id = id;
	f = new_event(tl, TL_FLOW_END, to_pid, to_tid, to_ts, name, cat);
	if (!f)
		return -ENOMEM;
	f->id = id;
	return 0;
}

int timeline__add_counter(struct timeline *tl, uint32_t pid, uint64_t ts, const char *name,
			  const struct tl_arg *series, size_t nseries)
{
	struct tl_event *ev = new_event(tl, TL_COUNTER, pid, 0, ts, name, NULL);

	if (!ev)
		return -ENOMEM;
	return copy_args(tl, ev, series, nseries);
}

/* ---- CPU samples and off-CPU blocks → nested X slices ---- */

struct open_slice {
	const char *name; /* interned */
	size_t ev;	  /* index into tl->events (which moves as it grows) */
};

struct slicer {
	struct timeline *tl;
	uint32_t pid, tid;
	struct open_slice *open; /* root first */
	size_t nopen, cap;
};

static struct tl_event *new_slice(struct slicer *sl, uint64_t ts, uint64_t dur, const char *name,
				  const char *cat, size_t depth)
{
	struct tl_event *ev = new_event(sl->tl, TL_COMPLETE, sl->pid, sl->tid, ts, name, cat);

	if (!ev)
		return NULL;
	ev->dur = dur;
	ev->depth = depth > UINT16_MAX ? UINT16_MAX : (uint16_t)depth;
	return ev;
}

/* Close the open slices deeper than depth at `at`. */
static int close_to(struct slicer *sl, size_t depth, uint64_t at)
{
	while (sl->nopen > depth) {
		struct tl_event *ev = &sl->tl->events[sl->open[--sl->nopen].ev];

		ev->dur = at - ev->ts;
	}
	return 0;
}

static int add_block(struct slicer *sl, const struct tl_sample *s, uint64_t ts)
{
	if (!new_slice(sl, ts, s->dur, TL_OFFCPU_SLICE, "off_cpu", 0))
		return -ENOMEM;
	for (uint32_t d = 0; d < s->nframes; d++)
		if (!new_slice(sl, ts, s->dur, s->frames[d], "off_cpu", d + 1))
			return -ENOMEM;
	return 0;
}

/*
 * Nothing on one thread's track ends at the very time something else begins
 * there: what closes before a sample or a block closes 1 ns before it. An
 * importer that turns X slices into B/E pairs (speedscope does) must order
 * an E and a B of one timestamp, and speedscope puts the B first when its
 * name matches the E at the head of its queue, which after its own
 * reshuffling of equal-time E's can be any frame that closes there: a new
 * "g" under "A" opened on top of an old A;f;g;h and every end after it
 * was refused ("Tried to end ..."). A nanosecond apart there is one order.
 */
#define TL_GAP_NS 1

int timeline__add_sample_slices(struct timeline *tl, uint32_t pid, uint32_t tid,
				const struct tl_sample *samples, size_t n, uint64_t period_ns,
				const char *cat)
{
	static const char *const unknown[] = { "[unknown]" };
	struct slicer sl = { .tl = tl, .pid = pid, .tid = tid };
	/* the last CPU sample; the earliest time the next sample or block may begin */
	uint64_t last = 0, next_ok = 0;
	size_t i;
	int err = 0;

	for (i = 0; i < n; i++) {
		const struct tl_sample *s = &samples[i];
		const char *const *frames = s->nframes ? s->frames : unknown;
		uint32_t nframes = s->nframes ? s->nframes : 1;
		uint64_t ts = s->ts > next_ok ? s->ts : next_ok;
		size_t common = 0, d;

		if (i && s->ts < samples[i - 1].ts) {
			err = -EINVAL; /* not in time order */
			goto out;
		}
		if (s->dur) {
			/* the thread left the CPU: what ran before ends here at the latest */
			if (sl.nopen)
				err = close_to(&sl, 0,
					       last + period_ns < ts - TL_GAP_NS ? last + period_ns
										 : ts - TL_GAP_NS);
			if (!err)
				err = add_block(&sl, s, ts);
			if (err)
				goto out;
			/* a sample or block stamped inside this one counts from its end */
			next_ok = ts + s->dur + TL_GAP_NS;
			continue;
		}
		if (sl.nopen && ts - last > 2 * period_ns) {
			err = close_to(&sl, 0, last + period_ns);
			if (err)
				goto out;
		}
		while (common < sl.nopen && common < nframes &&
		       sl.open[common].name == timeline__intern(tl, frames[common]))
			common++;
		err = close_to(&sl, common, ts - TL_GAP_NS);
		if (err)
			goto out;
		for (d = common; d < nframes; d++) {
			struct tl_event *ev = new_slice(&sl, ts, 0, frames[d], cat, d);

			if (!ev || grow((void **)&sl.open, &sl.cap, sl.nopen, sizeof(*sl.open))) {
				err = -ENOMEM;
				goto out;
			}
			sl.open[sl.nopen++] =
				(struct open_slice){ ev->name, (size_t)(ev - tl->events) };
		}
		tl->cpu_samples++;
		last = ts;
		/* what opened here lasts at least 1 ns before the next thing's gap */
		next_ok = ts + 2 * TL_GAP_NS;
	}
	err = close_to(&sl, 0, last + period_ns);
out:
	free(sl.open);
	return err;
}

/* ---- output order ---- */

static int rank(char ph)
{
	switch (ph) {
	case TL_END:
		return 0;
	case TL_BEGIN:
	case TL_COMPLETE:
		return 1;
	case TL_FLOW_START:
	case TL_FLOW_END:
		return 2;
	default:
		return 3;
	}
}

int timeline__event_cmp(const struct tl_event *a, const struct tl_event *b)
{
	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	if (rank(a->ph) != rank(b->ph))
		return rank(a->ph) < rank(b->ph) ? -1 : 1;
	if (a->dur != b->dur)
		return a->dur > b->dur ? -1 : 1;
	if (a->depth != b->depth)
		return a->depth < b->depth ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

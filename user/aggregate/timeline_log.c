// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate/profile.h"
#include "aggregate/timeline_log.h"

struct tl_cpu {
	uint64_t ts;
	uint64_t dur;	/* 0: a CPU sample; else an off-CPU block from ts */
	uint64_t stack; /* stacks__intern index */
	uint32_t pid, tid;
};

struct tl_log {
	struct timeline *tl;
	struct stacks *keys;
	struct tl_cpu *cpu;
	size_t ncpu, cap;
	uint64_t period_ns;
};

struct tl_log *tl_log__new(uint64_t period_ns)
{
	struct tl_log *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->tl = timeline__new();
	l->keys = stacks__new();
	l->period_ns = period_ns;
	if (!l->tl || !l->keys) {
		tl_log__free(l);
		return NULL;
	}
	return l;
}

void tl_log__free(struct tl_log *l)
{
	if (!l)
		return;
	timeline__free(l->tl);
	stacks__free(l->keys);
	free(l->cpu);
	free(l);
}

struct timeline *tl_log__timeline(struct tl_log *l)
{
	return l->tl;
}

static int add(struct tl_log *l, const struct stack_key *key, uint64_t ts, uint64_t dur,
	       int64_t weight, uint32_t tid, const char *tcomm)
{
	char pname[17], tname[40];
	size_t idx;
	int err;

	if (l->ncpu == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 4096;
		struct tl_cpu *c = realloc(l->cpu, cap * sizeof(*c));

		if (!c)
			return -ENOMEM;
		l->cpu = c;
		l->cap = cap;
	}
	err = stacks__intern(l->keys, key, &idx);
	if (err)
		return err;
	/*
	 * value 0: the stack's own index + 1, so that the built profile says which
	 * it is; value 1: what the builder weighs frames by (CPU samples)
	 */
	stacks__vals(l->keys, idx)->v[0] = (int64_t)idx + 1;
	stacks__vals(l->keys, idx)->v[1] += weight;
	l->cpu[l->ncpu++] =
		(struct tl_cpu){ .ts = ts, .dur = dur, .stack = idx, .pid = key->pid, .tid = tid };
	memcpy(pname, key->pcomm, 16);
	pname[16] = '\0';
	memcpy(tname, tcomm, 16);
	tname[16] = '\0';
	snprintf(tname + strlen(tname), sizeof(tname) - strlen(tname), " [%u]", tid);
	if (timeline__set_process_name(l->tl, key->pid, pname) ||
	    timeline__set_thread_name(l->tl, key->pid, tid, tname))
		return -ENOMEM;
	return 0;
}

int tl_log__cpu(struct tl_log *l, const struct stack_key *key, uint64_t ts, uint32_t tid,
		const char *tcomm)
{
	return add(l, key, ts, 0, 1, tid, tcomm);
}

int tl_log__offcpu(struct tl_log *l, const struct stack_key *key, uint64_t start, uint64_t dur,
		   uint64_t weight, uint32_t tid, const char *tcomm)
{
	return add(l, key, start, dur ? dur : 1, (int64_t)weight, tid, tcomm);
}

static int cmp_cpu(const void *a, const void *b)
{
	const struct tl_cpu *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	/* a block that begins with a sample's timestamp first: the sample is after it */
	return (x->dur < y->dur) - (x->dur > y->dur);
}

int tl_log__build(struct tl_log *l, struct objtab *objs, const struct ksyms *ks,
		  const struct build_opts *o, struct build_stats *bs, uint64_t *nsamples)
{
	struct build_opts bo = *o;
	struct profile *p = NULL;
	const struct psample **by_stack = NULL;
	struct span {
		size_t off;
		uint32_t n;
	} *span = NULL;
	struct tl_sample *samples = NULL;
	const char **names = NULL;
	size_t nstacks = stacks__count(l->keys), i, j, nnames = 0;
	int err = 0;

	memset(bs, 0, sizeof(*bs));
	*nsamples = 0;
	if (l->ncpu) {
		bo.per_pid = bo.per_thread = false;
		memset(bo.value_types, 0, sizeof(bo.value_types));
		bo.value_types[0] = (struct pvaluetype){ "stack", "id" };
		bo.value_types[1] = (struct pvaluetype){ "samples", "count" };
		bo.nvalues = 2;
		bo.default_value = 0;
		bo.count_value = 1;
		bo.period_type = (struct pvaluetype){ 0 };
		err = profile__build(&p, l->keys, objs, ks, &bo, bs);
		if (err)
			goto out;
		by_stack = calloc(nstacks + 1, sizeof(*by_stack));
		span = calloc(nstacks + 1, sizeof(*span));
		samples = calloc(l->ncpu, sizeof(*samples));
		if (!by_stack || !span || !samples) {
			err = -ENOMEM;
			goto out;
		}
		for (i = 0; i < p->nsamples; i++) {
			int64_t id = p->samples[i].values[0];

			if (id >= 1 && (size_t)id <= nstacks)
				by_stack[id - 1] = &p->samples[i];
		}
		/* frame names of all samples, root (the process) left out: it is the track */
		for (i = 0; i < p->nsamples; i++)
			nnames += p->samples[i].nframes;
		names = calloc(nnames + 1, sizeof(*names));
		if (!names) {
			err = -ENOMEM;
			goto out;
		}
		nnames = 0;
		for (i = 0; i < nstacks; i++) {
			const struct psample *ps = by_stack[i];

			if (!ps)
				continue;
			for (j = 1; j < ps->nframes; j++)
				names[nnames + j - 1] = p->frames[ps->frames[j]].name;
			span[i] = (struct span){ nnames, ps->nframes - 1 };
			nnames += ps->nframes - 1;
		}
		qsort(l->cpu, l->ncpu, sizeof(*l->cpu), cmp_cpu);
		for (i = 0; i < l->ncpu; i = j) {
			size_t n = 0;

			for (j = i; j < l->ncpu && l->cpu[j].pid == l->cpu[i].pid &&
				    l->cpu[j].tid == l->cpu[i].tid;
			     j++) {
				const struct span *sp = &span[l->cpu[j].stack];

				samples[n++] = (struct tl_sample){ .ts = l->cpu[j].ts,
								   .dur = l->cpu[j].dur,
								   .frames = &names[sp->off],
								   .nframes = sp->n };
				if (!l->cpu[j].dur)
					(*nsamples)++;
			}
			err = timeline__add_sample_slices(l->tl, l->cpu[i].pid, l->cpu[i].tid,
							  samples, n, l->period_ns, "cpu");
			if (err)
				goto out;
		}
	}
out:
	free(names);
	free(span);
	free(samples);
	free(by_stack);
	profile__free(p);
	return err;
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * --cpu: on-CPU sampling as a feature like the others. The BPF program is
 * the CPU object's on_cpu_sample (bpf/cpu.bpf.c, loaded by the recorder
 * because it owns the shared maps); this feature opens its perf events
 * (sampler.c), turns SAMPLE_CPU records into samples and CPU time, and
 * starts sampling last, once every other feature is attached.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "aggregate/timeline_log.h"
#include "collect/recorder.h"
#include "collect/sampler.h"
#include "cpu.skel.h"
#include "util/log.h"

static bool cpu_wanted(void)
{
	return env.ev_cpu;
}

static int cpu_setup(struct recorder *r, void **priv)
{
	(void)priv;
	/* the recorder registered the samples and cpu values (r->cpu_samples, r->cpu_ns) */
	if (r->cpu_samples < 0 || r->cpu_ns < 0)
		return -ENOSPC;
	return sampler__new(&r->sampler, r->skel->progs.on_cpu_sample, env.freq);
}

static int cpu_start(struct recorder *r, void *priv)
{
	(void)priv;
	if (sampler__enable(r->sampler)) {
		int err = -errno;

		pr_err("cannot enable the perf events: %s", strerror(-err));
		return err;
	}
	return 0;
}

static void cpu_on_record(struct recorder *r, void *priv, const struct prof_sample_hdr *h,
			  const void *data, size_t size)
{
	int64_t v[STACK_MAX_VALUES] = { 0 };
	struct stack_key *k = rec__key(r, data, size);

	(void)priv;
	if (!k)
		return;
	if (r->tl && tl_log__cpu(r->tl, k, h->time_ns, h->tid, h->comm))
		r->st.agg_failed++;
	v[r->cpu_samples] = 1;
	v[r->cpu_ns] = (int64_t)h->weight; /* the thread's CPU since its last sample */
	if (stacks__add(r->stacks, k, v, r->nvalues))
		r->st.agg_failed++;
}

static void cpu_stop(struct recorder *r, void *priv)
{
	(void)priv;
	sampler__disable(r->sampler);
}

static void cpu_destroy(struct recorder *r, void *priv)
{
	(void)priv;
	sampler__free(r->sampler);
	r->sampler = NULL;
}

const struct rec_feature cpu_feature = {
	.name = "cpu",
	.wanted = cpu_wanted,
	.setup = cpu_setup,
	.start = cpu_start,
	.on_record = cpu_on_record,
	.stop = cpu_stop,
	.destroy = cpu_destroy,
	.kinds = { SAMPLE_CPU, 0 },
};

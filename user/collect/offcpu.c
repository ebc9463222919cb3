// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Off-CPU and wall-clock time (--off-cpu, --wall): bpf/offcpu.bpf.c times
 * every block of a target's user threads and walks the stack of the ones it
 * keeps when the thread runs again; here each becomes off_cpu nanoseconds on
 * its stack. --wall adds the CPU sampler's cpu nanoseconds to the same
 * stacks as one wall/nanoseconds value.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "aggregate/timeline_log.h"
#include "collect/offcpu.h"
#include "collect/recorder.h"
#include "offcpu.skel.h"
#include "util/bpfmap.h"
#include "util/counters.h"
#include "util/log.h"

struct offcpu {
	struct offcpu_bpf *skel;
	int v_off;    /* off_cpu/nanoseconds */
	int v_wall;   /* wall/nanoseconds, -1 without --wall */
	uint64_t bad; /* records rec__key refused */
};

static bool offcpu_wanted(void)
{
	return env.ev_off_cpu || env.ev_wall;
}

static int offcpu_open_load(struct recorder *r, struct offcpu_bpf **out, bool dump, int attempt);

int offcpu__open(struct recorder *r, struct offcpu_bpf **out, bool dump)
{
	struct offcpu_bpf *skel;
	int err;

	for (int attempt = 0;; attempt++) {
		err = offcpu_open_load(r, &skel, dump, attempt);
		if (!err || !skel || !rec__open_retry(r, attempt, err))
			break;
		offcpu_bpf__destroy(skel);
	}
	if (!skel) {
		pr_err("cannot open the off-CPU BPF object: %s", strerror(-err));
		return err;
	}
	if (err) {
		pr_err("cannot load the off-CPU BPF programs: %s (kernel needs BTF and task storage)",
		       strerror(-err));
		offcpu_bpf__destroy(skel);
		return err;
	}
	*out = skel;
	return 0;
}

/* Open, set up and load the object (*out: NULL when it did not open). 0 or -errno. */
static int offcpu_open_load(struct recorder *r, struct offcpu_bpf **out, bool dump, int attempt)
{
	struct offcpu_bpf *skel;
	int err;

	skel = *out = offcpu_bpf__open_opts(rec__open_opts(r, attempt));
	if (!skel)
		return -errno;
	err = rec__share_maps(r, skel->obj);
	if (err)
		return err;
	REC_SET_COMMON_RODATA(skel->rodata);
	skel->rodata->want_kernel = !env.no_kernel;
	skel->rodata->want_user = !env.no_user;
	skel->rodata->min_block_ns = env.min_block_ns;
	bpf_program__set_autoload(skel->progs.offcpu_switch, !dump);
	bpf_program__set_autoload(skel->progs.dump_switch, dump);
	if (log_level >= 3)
		bpf_program__set_log_level(dump ? skel->progs.dump_switch
						: skel->progs.offcpu_switch,
					   log_level >= 4 ? 1 | 4 : 4);
	return offcpu_bpf__load(skel);
}

uint64_t offcpu__counter(struct offcpu_bpf *skel, enum offcpu_counter c)
{
	return bpfmap__percpu_counter(bpf_map__fd(skel->maps.offcpu_counters), c);
}

static int offcpu_setup(struct recorder *r, void **priv)
{
	struct offcpu *o = calloc(1, sizeof(*o));
	int err;

	if (!o)
		return -ENOMEM;
	*priv = o;
	o->v_wall = -1;
	err = offcpu__open(r, &o->skel, false);
	if (err)
		return err;
	rec__add_counters(r, &counters_offcpu, bpf_map__fd(o->skel->maps.offcpu_counters));
	o->v_off = rec__value(r, "off_cpu", "nanoseconds");
	if (env.ev_wall)
		o->v_wall = rec__value(r, "wall", "nanoseconds");
	if (o->v_off < 0 || (env.ev_wall && o->v_wall < 0)) {
		pr_err("too many value types for one profile");
		return -ENOSPC;
	}
	if (env.ev_wall)
		rec__default_value(r, o->v_wall);
	else if (!env.ev_cpu)
		rec__default_value(r, o->v_off);
	return 0;
}

static int offcpu_start(struct recorder *r, void *priv)
{
	struct offcpu *o = priv;
	int err = offcpu_bpf__attach(o->skel);

	(void)r;
	if (err)
		pr_err("cannot attach the off-CPU programs: %s", strerror(-err));
	return err;
}

static void offcpu_record(struct recorder *r, void *priv, const struct prof_sample_hdr *h,
			  const void *data, size_t size)
{
	int64_t v[STACK_MAX_VALUES] = { 0 };
	struct offcpu *o = priv;
	struct stack_key *k = rec__key(r, data, size);

	if (!k) {
		o->bad++;
		return;
	}
	if (r->tl && tl_log__offcpu(r->tl, k, h->time_ns, h->aux1,
				    r->cpu_samples < 0 ? h->weight : 0, h->tid, h->comm))
		r->st.agg_failed++;
	v[o->v_off] = (int64_t)h->weight;
	if (o->v_wall >= 0)
		v[o->v_wall] = (int64_t)h->weight;
	if (stacks__add(r->stacks, k, v, r->nvalues))
		r->st.agg_failed++;
}

/* wall = cpu + off_cpu on every stack (CPU samples arrive without a wall value). */
void offcpu__wall(struct recorder *r, int v_off, int v_wall)
{
	size_t n = stacks__count(r->stacks);

	if (v_wall < 0 || r->cpu_ns < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct stack_vals *sv = stacks__vals(r->stacks, i);

		sv->v[v_wall] = sv->v[r->cpu_ns] + sv->v[v_off];
	}
}

static void offcpu_finish(struct recorder *r, void *priv)
{
	struct offcpu *o = priv;

	offcpu__wall(r, o->v_off, o->v_wall);
}

static void offcpu_stop(struct recorder *r, void *priv)
{
	struct offcpu *o = priv;

	(void)r;
	offcpu_bpf__detach(o->skel);
}

static void offcpu_summary(struct recorder *r, void *priv, FILE *f)
{
	struct offcpu *o = priv;
	uint64_t blocks = offcpu__counter(o->skel, OFFCPU_CNT_BLOCKS);
	uint64_t ns = offcpu__counter(o->skel, OFFCPU_CNT_BLOCKED_NS);
	uint64_t shrt = offcpu__counter(o->skel, OFFCPU_CNT_SHORT);
	uint64_t shrt_ns = offcpu__counter(o->skel, OFFCPU_CNT_SHORT_NS);
	uint64_t sampled = offcpu__counter(o->skel, OFFCPU_CNT_SHORT_SAMPLED);
	uint64_t lost = offcpu__counter(o->skel, OFFCPU_CNT_LOST);
	uint64_t lost_ns = offcpu__counter(o->skel, OFFCPU_CNT_LOST_NS);
	uint64_t nostore = offcpu__counter(o->skel, OFFCPU_CNT_NO_STORAGE);

	(void)r;
	if (log_level < 1)
		return;
	fprintf(f,
		"off-CPU: %llu blocks, %.3f s blocked; %llu shorter than --min-block %.3f ms "
		"(%.3f s) stand for %llu sampled stacks; lost %llu (%.3f s, ring buffer full), "
		"%llu not timed (no task storage), %llu malformed\n",
		(unsigned long long)blocks, ns / 1e9, (unsigned long long)shrt,
		env.min_block_ns / 1e6, shrt_ns / 1e9, (unsigned long long)sampled,
		(unsigned long long)lost, lost_ns / 1e9, (unsigned long long)nostore,
		(unsigned long long)o->bad);
	if (log_level >= 2 && r->stats_fd >= 0) {
		struct bpf_prog_info a = { 0 };
		uint32_t len = sizeof(a);

		if (!bpf_obj_get_info_by_fd(bpf_program__fd(o->skel->progs.offcpu_switch), &a,
					    &len) &&
		    a.run_cnt)
			fprintf(f,
				"off-CPU BPF: %.0f ns per switch (%llu switches), %llu stacks "
				"walked\n",
				(double)a.run_time_ns / a.run_cnt, (unsigned long long)a.run_cnt,
				(unsigned long long)offcpu__counter(o->skel, OFFCPU_CNT_WALKS));
	}
}

static void offcpu_destroy(struct recorder *r, void *priv)
{
	struct offcpu *o = priv;

	(void)r;
	if (!o)
		return;
	offcpu_bpf__destroy(o->skel);
	free(o);
}

const struct rec_feature offcpu_feature = {
	.name = "off-cpu",
	.wanted = offcpu_wanted,
	.setup = offcpu_setup,
	.start = offcpu_start,
	.on_record = offcpu_record,
	.stop = offcpu_stop,
	.finish = offcpu_finish,
	.summary = offcpu_summary,
	.destroy = offcpu_destroy,
	.kinds = { SAMPLE_OFF_CPU },
};

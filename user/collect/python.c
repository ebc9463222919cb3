// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * CPython frames in every stack: Python tracking (pytrack.c) as a feature.
 * It finds interpreters and their thread states for BPF's walker (through the
 * recorder's dirty set and sync), takes the code-object snapshots BPF sends
 * (SAMPLE_PYCODE, ahead of the samples that need them), forgets processes
 * that exec or exit, and reports what it could and could not read. The
 * decoder (decode.c) turns a sample's frame pairs into code ids through it.
 */
#include <stdlib.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "collect/pytrack.h"
#include "collect/recorder.h"
#include "cpu.skel.h"
#include "proc/proc.h"
#include "util/log.h"

static bool python_wanted(void)
{
	return !env.no_python && !env.no_user;
}

static int python_setup(struct recorder *r, void **priv)
{
	int err;

	(void)priv;
	err = pytrack__new(&r->py, bpf_map__fd(r->skel->maps.py_procs),
			   bpf_map__fd(r->skel->maps.py_threads), r->objs);
	if (err) {
		pr_err("cannot set up Python tracking: %s", strerror(-err));
		return err;
	}
	pytrack__set_seen_map(r->py, bpf_map__fd(r->skel->maps.pycode_seen));
	pytrack__set_files_map(r->py, bpf_map__fd(r->skel->maps.py_files));
	pytrack__set_gen_map(r->py, bpf_map__fd(r->skel->maps.py_gen));
	return 0;
}

/* SAMPLE_PYCODE: a code object as BPF saw it, for when the live read fails */
static void python_on_record(struct recorder *r, void *priv, const struct prof_sample_hdr *h,
			     const void *data, size_t size)
{
	(void)priv;
	rec__py_probe(r, h->pid, h->time_ns); /* a process BPF found before we did */
	pytrack__snapshot(r->py, h->pid, (const char *)data + sizeof(*h), size - sizeof(*h));
}

static void python_on_proc(struct recorder *r, void *priv, uint32_t pid, int change)
{
	(void)priv;
	if (change == PROC_EXECED || change == PROC_EXITED) /* a new image, or gone */
		pytrack__forget(r->py, pid, change == PROC_EXITED);
}

static void python_finish(struct recorder *r, void *priv)
{
	(void)priv;
	if (env.per_thread)
		pytrack__thread_names_final(r->py); /* threads sampled since the last read */
}

static void python_interval(struct recorder *r, void *priv, struct stacks *old)
{
	(void)priv;
	(void)old;
	pytrack__gc(r->py);
}

/*
 * What changes the answer: an interpreter newer than any layout bpfprof
 * knows (decoded with the newest: its frames may be wrong), or one whose
 * version it cannot decode at all (no Python frames).
 */
static void python_warnings(struct recorder *r, void *priv)
{
	const struct pytrack_stats *ps = pytrack__stats(r->py);

	(void)priv;
	for (uint32_t i = 0; i < ps->nnewer; i++)
		rec__warn(
			r, "check them against the script, or use a bpfprof that knows it",
			"python%u.%u: decoded with %u.%u's layout (newer than any bpfprof knows): "
			"its frames may be wrong",
			ps->newer_version[i] >> 24, (ps->newer_version[i] >> 16) & 0xff,
			ps->newer_layout[i] >> 24, (ps->newer_layout[i] >> 16) & 0xff);
	if (ps->unsupported) {
		if (ps->unsupported_version)
			rec__warn(r, "use a bpfprof that knows it",
				  "%llu processes of python%u.%u have no Python frames (a layout "
				  "bpfprof cannot read)",
				  (unsigned long long)ps->unsupported,
				  ps->unsupported_version >> 24,
				  (ps->unsupported_version >> 16) & 0xff);
		else
			rec__warn(r, "use a bpfprof that knows it",
				  "%llu CPython processes have no Python frames (a version bpfprof "
				  "cannot read)",
				  (unsigned long long)ps->unsupported);
	}
}

static void python_summary(struct recorder *r, void *priv, FILE *f)
{
	const struct decode_stats *d = &r->st.dec;
	const struct pytrack_stats *ps = pytrack__stats(r->py);

	(void)priv;
	(void)f;
	if (!ps->interpreters)
		return;

	pr_info("python: %llu interpreters, %llu samples with Python frames (%llu whose thread "
		"BPF found in the interpreter's list); %llu before the thread's state was known, "
		"%llu frame chains unreadable part way, %llu truncated at %d, %llu frames dropped "
		"(unreadable code objects)",
		(unsigned long long)ps->interpreters, (unsigned long long)d->py_samples,
		(unsigned long long)rec__counter(r, CNT_PY_TS_WALK),
		(unsigned long long)d->py_no_thread, (unsigned long long)d->py_err,
		(unsigned long long)d->py_trunc, MAX_PYSTACK,
		(unsigned long long)(d->py_frames_dropped + ps->frames_unread));
	pr_info("python: code object snapshots: %llu sent by BPF, %llu lost (ring buffer "
		"full; sent again later), %llu code objects unreadable, %llu samples left "
		"some for later; %llu received, %llu used (live read failed: process "
		"exited or object freed; %llu after the first sample naming it), %llu "
		"refused (invalid), %llu outdated (address reused)",
		(unsigned long long)rec__counter(r, CNT_PY_SNAP_SENT),
		(unsigned long long)rec__counter(r, CNT_PY_SNAP_LOST),
		(unsigned long long)rec__counter(r, CNT_PY_SNAP_UNREADABLE),
		(unsigned long long)rec__counter(r, CNT_PY_SNAP_DEFERRED),
		(unsigned long long)ps->snap_received, (unsigned long long)ps->snap_used,
		(unsigned long long)ps->snap_late, (unsigned long long)ps->snap_refused,
		(unsigned long long)ps->snap_outdated);
	pr_info("python: %llu code objects read, %llu checks that a cached one was still "
		"at its address, %llu found another there",
		(unsigned long long)ps->codes, (unsigned long long)ps->code_checks,
		(unsigned long long)ps->code_reused);
	pr_info("python: the thread held the GIL in %llu of %llu Python samples whose GIL was "
		"read (of %llu; the others' interpreter has none: free-threaded); %llu samples "
		"left out by --gil, %llu kept with no GIL to hold",
		(unsigned long long)d->gil_held, (unsigned long long)d->gil_known,
		(unsigned long long)d->py_samples, (unsigned long long)d->gil_left_out,
		(unsigned long long)d->gil_none_kept);
	if (env.per_thread && ps->name_reads)
		pr_info("python: thread names: %llu threads named by threading.Thread; OS "
			"name kept for %llu not threading's, %llu unreadable, %llu ended "
			"before a read; %llu of %llu reads failed, %.2f ms per read",
			(unsigned long long)ps->threads_named,
			(unsigned long long)ps->threads_unnamed,
			(unsigned long long)ps->threads_name_failed,
			(unsigned long long)ps->threads_name_late,
			(unsigned long long)ps->name_read_failed,
			(unsigned long long)ps->name_reads,
			ps->name_read_ns / 1e6 / (double)ps->name_reads);
}

static void python_destroy(struct recorder *r, void *priv)
{
	(void)priv;
	pytrack__free(r->py);
	r->py = NULL;
}

const struct rec_feature python_feature = {
	.name = "python",
	.wanted = python_wanted,
	.setup = python_setup,
	.on_record = python_on_record,
	.on_proc = python_on_proc,
	.finish = python_finish,
	.interval = python_interval,
	.warnings = python_warnings,
	.summary = python_summary,
	.destroy = python_destroy,
	.kinds = { SAMPLE_PYCODE, 0 },
};

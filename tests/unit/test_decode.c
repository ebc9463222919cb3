// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * collect/decode.c with synthetic records and a stand-in process table:
 * one process (pid 42) maps [0x400000, 0x401000) from file 7 at offset
 * 0x1000; Python code objects at 0xc0de.. have ids 100 + their index.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <linux/types.h>

#include "aggregate/stacks.h"
#include "bpfprof.h"
#include "collect/decode.h"
#include "proc/objfile.h"

struct fake {
	uint32_t begun_pid;
	uint64_t begun_time;
	int begins;
	uint32_t synced[8];
	int nsynced;
	int rescans, threads, cgroups;
	bool seen;
};

static void f_begin(void *ctx, uint32_t pid, uint64_t time_ns)
{
	struct fake *f = ctx;

	f->begun_pid = pid;
	f->begun_time = time_ns;
	f->begins++;
}

static bool f_resolve(void *ctx, uint64_t ip, struct sframe *fr)
{
	struct fake *f = ctx;

	if (f->begun_pid == 42 && ip >= 0x400000 && ip < 0x401000) {
		*fr = (struct sframe){ .obj = 7, .addr = ip - 0x400000 + 0x1000 };
		return true;
	}
	*fr = (struct sframe){ .obj = OBJ_UNMAPPED, .addr = ip };
	return false;
}

static void f_sync(void *ctx, uint32_t pid)
{
	struct fake *f = ctx;

	if (f->nsynced < 8)
		f->synced[f->nsynced++] = pid;
}

static uint64_t f_code(void *ctx, uint32_t pid, uint64_t code, uint64_t instr, uint32_t *off)
{
	(void)ctx;
	if (pid != 42 || code < 0xc0de00 || code >= 0xc0de10)
		return 0;
	*off = (uint32_t)instr * 2;
	return 100 + (code - 0xc0de00);
}

static bool f_seen(void *ctx, uint32_t pid)
{
	(void)pid;
	return ((struct fake *)ctx)->seen;
}

static void f_rescan(void *ctx, uint32_t pid)
{
	(void)pid;
	((struct fake *)ctx)->rescans++;
}

static void f_thread(void *ctx, uint32_t pid, uint32_t tid)
{
	(void)pid, (void)tid;
	((struct fake *)ctx)->threads++;
}

static void f_cgroup(void *ctx, uint64_t id)
{
	(void)id;
	((struct fake *)ctx)->cgroups++;
}

struct fixture {
	struct fake fake;
	struct decode_ops ops;
	struct decode_cfg cfg;
	struct decode_stats st;
	struct prof_sample s;
	struct stack_key *k;
};

static int setup(void **state)
{
	struct fixture *x = calloc(1, sizeof(*x));

	x->k = malloc(decode__key_size());
	x->ops = (struct decode_ops){ .ctx = &x->fake,
				      .user_begin = f_begin,
				      .user_resolve = f_resolve,
				      .want_sync = f_sync,
				      .py_code = f_code,
				      .py_seen = f_seen,
				      .py_rescan = f_rescan,
				      .py_thread = f_thread,
				      .cgroup_seen = f_cgroup };
	x->cfg = (struct decode_cfg){ .kernel = true, .user = true, .python = true };
	x->s.hdr =
		(struct prof_sample_hdr){ .time_ns = 5000, .pid = 42, .tid = 43, .cgroup_id = 9 };
	memcpy(x->s.hdr.pcomm, "proc", 5);
	memcpy(x->s.hdr.comm, "thread", 7);
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *x = *state;

	free(x->k);
	free(x);
	return 0;
}

/* frames: nk kernel, nu user, np Python pairs; returns the record's size */
static size_t fill(struct fixture *x, const uint64_t *kf, uint16_t nk, const uint64_t *uf,
		   uint16_t nu, const uint64_t *py, uint16_t np)
{
	x->s.hdr.kstack_len = nk;
	x->s.hdr.ustack_len = nu;
	x->s.hdr.pystack_len = np;
	memcpy(x->s.frames, kf, nk * 8);
	memcpy(x->s.frames + nk, uf, nu * 8);
	memcpy(x->s.frames + nk + nu, py, np * 16);
	return sizeof(x->s.hdr) + ((size_t)nk + nu + 2 * np) * 8;
}

static int decode(struct fixture *x, size_t size)
{
	return decode__sample(&x->cfg, &x->ops, &x->st, &x->s, size, x->k);
}

static void test_malformed_records_refused(void **state)
{
	struct fixture *x = *state;
	uint64_t k[2] = { 1, 2 };
	size_t size = fill(x, k, 2, NULL, 0, NULL, 0);

	assert_int_equal(decode(x, sizeof(x->s.hdr) - 1), -EINVAL);
	assert_int_equal(decode(x, size - 1), -EINVAL); /* frames cut */
	x->s.hdr.kstack_len = MAX_KSTACK + 1;
	assert_int_equal(decode(x, sizeof(x->s)), -EINVAL);
	x->s.hdr.kstack_len = 0;
	x->s.hdr.pystack_len = MAX_PYSTACK + 1;
	assert_int_equal(decode(x, sizeof(x->s)), -EINVAL);
	assert_int_equal(x->st.bad, 4);
	assert_int_equal(x->fake.begins, 0);
}

static void test_kernel_user_frames(void **state)
{
	struct fixture *x = *state;
	uint64_t kf[2] = { 0xffffffff81000010, 0xffffffff81000020 };
	uint64_t uf[3] = { 0x400010, 0x400fff, 0x7fff0000 };
	size_t size = fill(x, kf, 2, uf, 3, NULL, 0);

	assert_int_equal(decode(x, size), 0);
	assert_int_equal(x->k->pid, 42);
	assert_string_equal(x->k->pcomm, "proc");
	assert_int_equal(x->k->tid, 0); /* threads not told apart */
	assert_int_equal(x->k->nkernel, 2);
	assert_int_equal(x->k->nuser, 3);
	assert_int_equal(x->k->npython, 0);
	assert_int_equal(x->k->frames[0].obj, OBJ_KERNEL);
	assert_true(x->k->frames[1].addr == kf[1]);
	assert_int_equal(x->k->frames[2].obj, 7);
	assert_true(x->k->frames[2].addr == 0x1010);
	assert_true(x->k->frames[3].addr == 0x1fff);
	assert_int_equal(x->k->frames[4].obj, OBJ_UNMAPPED);
	assert_true(x->k->frames[4].addr == 0x7fff0000);
	assert_int_equal(x->fake.begins, 1);
	assert_int_equal(x->fake.begun_time, 5000);
	assert_int_equal(x->st.user_frames, 3);
	assert_int_equal(x->st.user_unmapped, 1);
	assert_int_equal(x->k->cgroup_id, 0);
}

static void test_config_leaves_out(void **state)
{
	struct fixture *x = *state;
	uint64_t kf[1] = { 0xffffffff81000010 }, uf[1] = { 0x400010 };
	uint64_t py[2] = { 0xc0de01, 4 };
	size_t size = fill(x, kf, 1, uf, 1, py, 1);

	x->cfg.kernel = false;
	assert_int_equal(decode(x, size), 0);
	assert_int_equal(x->k->nkernel, 0);
	assert_int_equal(x->k->frames[0].obj, 7);
	x->cfg = (struct decode_cfg){ .kernel = true, .user = false, .python = false };
	assert_int_equal(decode(x, size), 0);
	assert_int_equal(x->k->nkernel, 1);
	assert_int_equal(x->k->nuser, 0);
	assert_int_equal(x->k->npython, 0);
	assert_int_equal(x->fake.begins, 1); /* only the first decode resolved user frames */
}

static void test_flags(void **state)
{
	struct fixture *x = *state;
	size_t size = fill(x, NULL, 0, NULL, 0, NULL, 0);

	x->s.hdr.flags = SAMPLE_F_KSTACK_TRUNC | SAMPLE_F_USTACK_ERR | SAMPLE_F_NO_UNWIND_INFO |
			 SAMPLE_F_UNWIND_FP | SAMPLE_F_UNWIND_STOPPED;
	assert_int_equal(decode(x, size), 0);
	assert_int_equal(x->k->flags, STACK_F_KERNEL_TRUNC | STACK_F_USER_ERR);
	assert_int_equal(x->st.ktrunc, 1);
	assert_int_equal(x->st.ustack_err, 1);
	assert_int_equal(x->st.no_unwind_info, 1);
	assert_int_equal(x->st.unwind_fp, 1);
	assert_int_equal(x->st.unwind_stopped, 1);
	assert_int_equal(x->fake.nsynced, 2); /* tables wanted; not seen by Python tracking */
	assert_int_equal(x->fake.synced[0], 42);
	x->fake.seen = true;
	x->fake.nsynced = 0;
	x->s.hdr.flags = SAMPLE_F_STALE_MAPS;
	assert_int_equal(decode(x, size), 0);
	assert_int_equal(x->fake.nsynced, 1);
	assert_int_equal(x->k->flags, 0);
}

static void test_python_frames(void **state)
{
	struct fixture *x = *state;
	uint64_t uf[1] = { 0x400010 };
	uint64_t py[6] = { 0xc0de01, 10 | PYFRAME_F_ENTRY, 0xdead, 3, 0xc0de02, 7 };
	size_t size = fill(x, NULL, 0, uf, 1, py, 3);

	x->s.hdr.flags = SAMPLE_F_PY_GIL | SAMPLE_F_PY_NO_THREAD | SAMPLE_F_PY_TRUNC;
	x->s.hdr.flags2 = SAMPLE_F2_PY_GIL_KNOWN;
	assert_int_equal(decode(x, size), 0);
	assert_int_equal(x->k->nuser, 1);
	assert_int_equal(x->k->npython, 3);
	assert_int_equal(x->k->frames[1].obj, OBJ_PYTHON);
	assert_true(x->k->frames[1].addr == 101);
	assert_int_equal(x->k->frames[1].aux, 20 | SFRAME_PY_ENTRY);
	assert_true(x->k->frames[2].addr == 0); /* unreadable code object: kept, counted */
	assert_int_equal(x->k->frames[2].aux, 0);
	assert_true(x->k->frames[3].addr == 102);
	assert_int_equal(x->k->frames[3].aux, 14);
	assert_int_equal(x->k->flags, STACK_F_GIL_KNOWN | STACK_F_GIL_HELD | STACK_F_PY_TRUNC);
	assert_int_equal(x->st.py_samples, 1);
	assert_int_equal(x->st.py_frames_dropped, 1);
	assert_int_equal(x->st.gil_held, 1);
	assert_int_equal(x->st.py_no_thread, 1);
	assert_int_equal(x->fake.rescans, 1);
}

static void test_gil_filter(void **state)
{
	struct fixture *x = *state;
	uint64_t py[2] = { 0xc0de01, 1 };
	size_t native = fill(x, NULL, 0, NULL, 0, NULL, 0);

	x->cfg.gil = true;
	assert_int_equal(decode(x, native), -ENOENT); /* no Python frames */
	native = fill(x, NULL, 0, NULL, 0, py, 1);
	/* no GIL to read (a free-threaded build): kept, counted, no gil label */
	assert_int_equal(decode(x, native), 0);
	assert_int_equal(x->k->flags & (STACK_F_GIL_KNOWN | STACK_F_GIL_HELD), 0);
	assert_int_equal(x->st.gil_none_kept, 1);
	x->s.hdr.flags2 = SAMPLE_F2_PY_GIL_KNOWN;
	assert_int_equal(decode(x, native), -ENOENT); /* GIL not held */
	x->s.hdr.flags = SAMPLE_F_PY_GIL;
	assert_int_equal(decode(x, native), 0);
	assert_int_equal(x->k->flags & (STACK_F_GIL_KNOWN | STACK_F_GIL_HELD),
			 STACK_F_GIL_KNOWN | STACK_F_GIL_HELD);
	assert_int_equal(x->st.gil_left_out, 2);
}

static void test_thread_and_cgroup(void **state)
{
	struct fixture *x = *state;
	size_t size = fill(x, NULL, 0, NULL, 0, NULL, 0);

	x->cfg.per_thread = true;
	x->cfg.cgroup = true;
	assert_int_equal(decode(x, size), 0);
	assert_int_equal(x->k->tid, 43);
	assert_string_equal(x->k->tcomm, "thread");
	assert_int_equal(x->k->cgroup_id, 9);
	assert_int_equal(x->fake.threads, 1);
	assert_int_equal(x->fake.cgroups, 1);
}

/* Random headers and sizes: refused or decoded within the key, never more. */
static void test_random_records(void **state)
{
	struct fixture *x = *state;
	unsigned int seed = 12345;

	x->cfg.per_thread = x->cfg.cgroup = true;
	for (int i = 0; i < 20000; i++) {
		size_t size = (size_t)rand_r(&seed) % (sizeof(x->s) + 64);
		unsigned char *b = (unsigned char *)&x->s;

		for (size_t j = 0; j < sizeof(x->s.hdr); j++)
			b[j] = (unsigned char)rand_r(&seed);
		if (rand_r(&seed) & 1) { /* plausible lengths too */
			x->s.hdr.kstack_len %= MAX_KSTACK + 2;
			x->s.hdr.ustack_len %= MAX_USTACK + 2;
			x->s.hdr.pystack_len %= MAX_PYSTACK + 2;
		}
		if (size > sizeof(x->s))
			size = sizeof(x->s);
		if (decode(x, size) == 0)
			assert_true(x->k->nkernel + x->k->nuser + x->k->npython <=
				    MAX_KSTACK + MAX_USTACK + MAX_PYSTACK);
	}
	assert_true(x->st.bad > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_malformed_records_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kernel_user_frames, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_leaves_out, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flags, setup, teardown),
		cmocka_unit_test_setup_teardown(test_python_frames, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gil_filter, setup, teardown),
		cmocka_unit_test_setup_teardown(test_thread_and_cgroup, setup, teardown),
		cmocka_unit_test_setup_teardown(test_random_records, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What the verifier does with each program of a built BPF object, loaded
 * alone (the others' autoload off), as `bpfprof -vvv` shows it for the
 * programs it loads: `processed N insns` and the verification time, from a
 * log at level 4 (statistics). Verification is most of -a's start-up
 * (docs/design.md, "Verification is start-up"); this puts a number on each
 * program without running a profile. Run as root.
 *
 *   build/bpf_insns build/bpf/cpu.bpf.o filter_pids=0 [time_samples=1]
 *
 * NAME=VALUE sets a .rodata variable before load (what bpfprof sets for a
 * run: filter_pids=0 is -a, time_samples=1 is -vv and up). A line per
 * program: object, program, instructions processed, verification µs.
 */
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG_SIZE (1u << 20)

static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

/* NAME=VALUE into the object's .rodata, by its BTF. 0, or -1. */
static int set_rodata(struct bpf_object *obj, const char *assign)
{
	struct bpf_map *m = bpf_object__find_map_by_name(obj, ".rodata");
	const struct btf_var_secinfo *v;
	const struct btf_type *sec;
	struct btf *btf = bpf_object__btf(obj);
	const char *eq = strchr(assign, '=');
	long long val;
	size_t size;
	char *data;
	int id;

	if (!m || !btf || !eq)
		return -1;
	data = (char *)bpf_map__initial_value(m, &size); /* writable before load */
	id = btf__find_by_name_kind(btf, ".rodata", BTF_KIND_DATASEC);
	if (!data || id < 0)
		return -1;
	val = strtoll(eq + 1, NULL, 0);
	sec = btf__type_by_id(btf, id);
	v = btf_var_secinfos(sec);
	for (int i = 0; i < btf_vlen(sec); i++, v++) {
		const char *name =
			btf__name_by_offset(btf, btf__type_by_id(btf, v->type)->name_off);

		if (strlen(name) != (size_t)(eq - assign) || strncmp(name, assign, eq - assign))
			continue;
		if (v->offset + v->size > size || v->size > sizeof(val))
			return -1;
		memcpy(data + v->offset, &val, v->size); /* little-endian */
		return 0;
	}
	return -1;
}

/* Load prog alone from a fresh open of path; print its statistics. */
static int one(const char *path, const char *prog, int nset, char **sets, char *log)
{
	struct bpf_object *obj = bpf_object__open_file(path, NULL);
	struct bpf_program *p;
	const char *s;
	int err;

	if (!obj)
		return -errno;
	for (int i = 0; i < nset; i++) {
		if (set_rodata(obj, sets[i])) {
			fprintf(stderr, "bpf_insns: no .rodata variable for '%s'\n", sets[i]);
			bpf_object__close(obj);
			return -EINVAL;
		}
	}
	bpf_object__for_each_program(p, obj) {
		bool it = !strcmp(bpf_program__name(p), prog);

		bpf_program__set_autoload(p, it);
		if (it) {
			bpf_program__set_log_buf(p, log, LOG_SIZE);
			bpf_program__set_log_level(p, 4);
		}
	}
	log[0] = '\0';
	err = bpf_object__load(obj);
	s = strstr(log, "processed ");
	printf("%s %s %s", path, prog, err ? "load failed" : "");
	if (!err && s)
		printf("%ld", strtol(s + strlen("processed "), NULL, 10));
	s = strstr(log, "verification time ");
	if (!err && s)
		printf(" %ld us", strtol(s + strlen("verification time "), NULL, 10));
	printf("\n");
	bpf_object__close(obj);
	return err;
}

int main(int argc, char **argv)
{
	struct bpf_object *obj;
	struct bpf_program *p;
	char names[64][64];
	int n = 0, err = 0;
	char *log;

	if (argc < 2) {
		fprintf(stderr, "usage: bpf_insns OBJECT.bpf.o [NAME=VALUE...]\n");
		return 2;
	}
	libbpf_set_print(quiet);
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj) {
		fprintf(stderr, "bpf_insns: cannot open %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	bpf_object__for_each_program(p, obj) {
		if (n < 64)
			snprintf(names[n++], sizeof(names[0]), "%s", bpf_program__name(p));
	}
	bpf_object__close(obj);
	log = malloc(LOG_SIZE);
	if (!log)
		return 1;
	for (int i = 0; i < n; i++)
		err |= one(argv[1], names[i], argc - 2, argv + 2, log) != 0;
	free(log);
	return err;
}

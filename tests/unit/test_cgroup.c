/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Container ids and pod uids read from cgroup paths, as each engine and
 * driver names them (no root needed: pure string parsing).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <unistd.h>

#include "proc/cgroup.h"

#define ID "3f2a9c1b7d0e11223344556677889900aabbccddeeff00112233445566778899"

static void expect(const char *path, const char *id, const char *pod)
{
	struct cgroup_info ci;
	bool found = cgroup__parse(path, &ci);

	assert_int_equal(found, id[0] != '\0');
	assert_string_equal(ci.container_id, id);
	assert_string_equal(ci.pod_uid, pod);
}

static void test_engines(void **state)
{
	(void)state;
	expect("/system.slice/docker-" ID ".scope", ID, "");
	expect("/docker/" ID, ID, "");
	expect("/system.slice/cri-containerd-" ID ".scope", ID, "");
	expect("/machine.slice/libpod-" ID ".scope/container", ID, "");
	expect("/machine.slice/libpod-conmon-" ID ".scope", "", "");
	expect("/system.slice/crio-conmon-" ID ".scope", "", "");
	expect("/user.slice/user-0.slice/session-1.scope", "", "");
	expect("/", "", "");
	/* 63 digits, upper case: not an id */
	expect("/docker/" ID "x", "", "");
	expect("/docker/3F2A9C1B7D0E11223344556677889900AABBCCDDEEFF00112233445566778899", "", "");
}

static void test_kubepods(void **state)
{
	(void)state;
	expect("/kubepods.slice/kubepods-burstable.slice/"
	       "kubepods-burstable-pod0a1b2c3d_4e5f_6789_abcd_ef0123456789.slice/"
	       "cri-containerd-" ID ".scope",
	       ID, "0a1b2c3d-4e5f-6789-abcd-ef0123456789");
	expect("/kubepods.slice/kubepods-pod0a1b2c3d_4e5f_6789_abcd_ef0123456789.slice/crio-" ID
	       ".scope",
	       ID, "0a1b2c3d-4e5f-6789-abcd-ef0123456789");
	expect("/kubepods/besteffort/pod0a1b2c3d-4e5f-6789-abcd-ef0123456789/" ID, ID,
	       "0a1b2c3d-4e5f-6789-abcd-ef0123456789");
	/* the pod's own cgroup (pause container not entered): a pod, no container */
	expect("/kubepods/burstable/pod0a1b2c3d-4e5f-6789-abcd-ef0123456789", "",
	       "0a1b2c3d-4e5f-6789-abcd-ef0123456789");
	expect("/kubepods.slice/kubepods-besteffort.slice", "", "");
}

static void test_name(void **state)
{
	char id[CGROUP_ID_HEX + 1];

	(void)state;
	assert_true(cgroup__name_container("docker-" ID ".scope", id));
	assert_string_equal(id, ID);
	assert_true(cgroup__name_container(ID, id));
	assert_false(cgroup__name_container("docker-.scope", id));
	assert_false(cgroup__name_container("init.scope", id));
}

/* The side band's --cgroup filter: a process's cgroup path at or below the target's. */
static void test_path_under(void **state)
{
	(void)state;
	assert_true(cgroup__path_under("/a/b", "/a/b"));
	assert_true(cgroup__path_under("/a/b/c", "/a/b"));
	assert_true(cgroup__path_under("/a/b/c", "/a/b/"));
	assert_false(cgroup__path_under("/a/bc", "/a/b"));
	assert_false(cgroup__path_under("/a", "/a/b"));
	assert_true(cgroup__path_under("/anything", "/"));
	assert_true(cgroup__path_under("/", "/"));
	/* this process is in its own cgroup, which is below the root; a pid never used is not */
	assert_int_equal(cgroup__pid_under((uint32_t)getpid(), "/"), 1);
	assert_true(cgroup__pid_under(UINT32_MAX, "/") < 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_engines),
		cmocka_unit_test(test_kubepods),
		cmocka_unit_test(test_name),
		cmocka_unit_test(test_path_under),
	};

	return cmocka_run_group_tests_name("cgroup", tests, NULL, NULL);
}

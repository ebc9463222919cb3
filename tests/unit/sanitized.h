/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * SANITIZED: 1 in an ASan build (make unit SANITIZE=1). Such a build is
 * several times slower and is no measure of speed: tests skip their time
 * bounds there, and keep every other check.
 */
#ifndef BPFPROF_TEST_SANITIZED_H
#define BPFPROF_TEST_SANITIZED_H

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

#endif

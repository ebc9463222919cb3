// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* libsplit.so: the known split inside a shared library without frame pointers. */
#include "split.h"

void split_run(double secs)
{
	split_run_for(secs);
	BARRIER();
}

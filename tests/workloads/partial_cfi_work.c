// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* partial_cfi's work_X: built with frame pointers and without any CFI. */
#define SPLIT_WORK_ONLY
#include "split.h"

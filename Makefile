# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# make            build build/bpfprof
# make deps       install the Debian packages building and running need (tools/install-deps.sh)
# make test       test-deps, then unit tests, end-to-end tests (root, real BPF) and the fuzz
#                 smoke, each run whatever the one before did; one line of results at the end
# make bench      bench-deps, then the overhead benchmark against perf (not part of make test)
# make test-deps / make bench-deps   what make test / make bench need, installed by them
# make check-readme   the README's first command in a fresh minbase Debian 12 root
#                 (tools/minbase.sh; TEST=1: its second command too)
# make verifier-stats   instructions the verifier processes per BPF program (root)
# make fuzz       FUZZ_SECS=N: each libFuzzer harness (tests/fuzz) for N seconds
# make test SANITIZE=1   the same tests against an ASan+UBSan build in build-san/
# make install    PREFIX=/usr/local DESTDIR= (binary, man page, systemd unit)
# make V=1        show commands

# SANITIZE=1: ASan+UBSan build of everything (clang) in its own build dir.
ifeq ($(SANITIZE),1)
BUILD    ?= build-san
CC       := clang
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
endif
BUILD    ?= build
ARCH     ?= x86
CC       ?= cc
CLANG    ?= clang
BPFTOOL  ?= bpftool
PROTOC_C ?= protoc-c
PREFIX   ?= /usr/local
MANDIR   ?= $(PREFIX)/share/man
UNITDIR  ?= /etc/systemd/system
PYTHON   ?= /usr/bin/python3
VERSION  := 0.1.0
PPROF_PROTO ?= /usr/share/gocode/src/github.com/google/pprof/proto/profile.proto

ifeq ($(V),1)
Q :=
msg :=
else
Q := @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

WARN     := -Wall -Wextra -Werror
CFLAGS   ?= -O2 -g
CFLAGS   += $(WARN) -std=gnu11 -D_GNU_SOURCE -DBPFPROF_VERSION='"$(VERSION)"' \
	    -Iinclude -Iuser -I$(BUILD) -I$(BUILD)/pprof $(SAN_FLAGS)
LDLIBS   := -lbpf -ldw -ldebuginfod -lelf -lz -llzma -lprotobuf-c -lnettle -lstdc++ -lpthread -lm
BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) $(WARN) -Wno-unused-parameter \
	      -Ivmlinux/$(ARCH) -Iinclude -Ibpf

BPF_SRCS  := $(wildcard bpf/*.bpf.c)
BPF_OBJS  := $(patsubst bpf/%.bpf.c,$(BUILD)/bpf/%.bpf.o,$(BPF_SRCS))
BPF_SKELS := $(patsubst bpf/%.bpf.c,$(BUILD)/%.skel.h,$(BPF_SRCS))

USER_SRCS := $(shell find user -name '*.c' | sort)
LIB_SRCS  := $(filter-out user/main.c,$(USER_SRCS))
LIB_OBJS  := $(patsubst %.c,$(BUILD)/obj/%.o,$(LIB_SRCS)) $(BUILD)/obj/pprof/profile.pb-c.o
MAIN_OBJ  := $(BUILD)/obj/user/main.o
HDRS      := $(shell find include user bpf -name '*.h') $(BPF_SKELS) $(BUILD)/pprof/profile.pb-c.h

UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))

.PHONY: all test unit e2e bench deps test-deps test-roots bench-deps install clean format format-check fuzz \
	fuzz-build verifier-stats fuzz-smoke fuzz-seeds check-readme
.SECONDARY:
all: $(BUILD)/bpfprof

$(BUILD)/bpf/%.bpf.o: bpf/%.bpf.c $(wildcard bpf/*.h) include/bpfprof.h
	$(call msg,BPF,$@)
	@mkdir -p $(@D)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(BUILD)/%.skel.h: $(BUILD)/bpf/%.bpf.o
	$(call msg,SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< > $@.tmp && mv $@.tmp $@

$(BUILD)/pprof/profile.pb-c.c $(BUILD)/pprof/profile.pb-c.h: $(PPROF_PROTO)
	$(call msg,PROTOC,$@)
	@mkdir -p $(BUILD)/pprof
	$(Q)$(PROTOC_C) --c_out=$(BUILD)/pprof -I$(dir $(PPROF_PROTO)) $(PPROF_PROTO)

$(BUILD)/obj/pprof/profile.pb-c.o: $(BUILD)/pprof/profile.pb-c.c
	$(call msg,CC,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -Wall $(SAN_FLAGS) -I$(BUILD)/pprof -c $< -o $@

$(BUILD)/obj/%.o: %.c $(HDRS)
	$(call msg,CC,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libbpfprof.a: $(LIB_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/bpfprof: $(MAIN_OBJ) $(BUILD)/libbpfprof.a
	$(call msg,LD,$@)
	$(Q)$(CC) $(CFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libbpfprof.a $(HDRS) $(wildcard tests/unit/*.h)
	$(call msg,CC,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) -Itests/unit $< $(BUILD)/libbpfprof.a $(LDLIBS) -lcmocka -o $@

# --alloc -- CMD: the in-process heap sampler bpfprof preloads (tools/heap)
all: $(BUILD)/libbpfprof_heap.so
$(BUILD)/libbpfprof_heap.so: tools/heap/preload.c tools/heap/exec.c tools/heap/inject.c tools/heap/heap.h tools/heap/Makefile
	$(call msg,HEAP,$@)
	$(Q)$(MAKE) -s -C tools/heap BUILD=$(abspath $(BUILD))

# CUDA: the CUPTI injection library (tools/cupti) and its unit test need the
# toolkit's headers and libcupti, and <sys/sdt.h>; without them they are skipped.
CUDA_HOME ?= /usr/local/cuda
HAVE_CUPTI := $(if $(wildcard $(CUDA_HOME)/include/cupti.h),$(shell echo '\#include <sys/sdt.h>' | \
	$(CC) -E -x c - >/dev/null 2>&1 && echo 1))
ifeq ($(HAVE_CUPTI),1)
all: $(BUILD)/libbpfprof_cupti.so
$(BUILD)/libbpfprof_cupti.so: $(wildcard tools/cupti/*.[ch]) tools/cupti/Makefile
	$(call msg,CUPTI,$@)
	$(Q)$(MAKE) -s -C tools/cupti BUILD=$(abspath $(BUILD)) CUDA_HOME=$(CUDA_HOME)
$(BUILD)/tests/test_cupti: CFLAGS += -I$(CUDA_HOME)/include
$(BUILD)/tests/test_cupti: $(wildcard tools/cupti/*.[ch])
else
UNIT_BINS := $(filter-out $(BUILD)/tests/test_cupti,$(UNIT_BINS))
all: cupti-skipped
cupti-skipped:
	@echo "  SKIP     libbpfprof_cupti.so: no CUDA toolkit (cupti.h) at $(CUDA_HOME) or no <sys/sdt.h>"
.PHONY: cupti-skipped
endif

# Unit tests need no root; each binary is a cmocka group. Every binary runs,
# whatever the ones before it did; a skipped test says why ("[  SKIP    ]"
# line, tests/unit/skip.h). Fixtures (small ELF files with known symbols) are
# built by tests/unit/fixtures/Makefile.
unit: $(UNIT_BINS)
	$(Q)$(MAKE) -s -C tests/unit/fixtures BUILD=$(abspath $(BUILD))/fixtures
	$(Q)$(MAKE) -s -C tests/unit/fixtures/cfi BUILD=$(abspath $(BUILD))/fixtures/cfi
	$(Q)$(MAKE) -s -C tests/unit/fixtures/python BUILD=$(abspath $(BUILD))/fixtures/python
	$(Q)failed=; for t in $(UNIT_BINS); do \
		FIXTURES=$(abspath $(BUILD))/fixtures $$t || failed="$$failed $${t##*/}"; \
	done; \
	if [ -n "$$failed" ]; then echo "unit: FAILED:$$failed"; exit 1; fi; \
	echo "unit: $(words $(UNIT_BINS)) groups passed"

# End-to-end: real BPF, real processes, as root. pytest's summary line ends the run,
# after the reason of every skipped test (-rs).
# Under SANITIZE=1 the default is a subset through every stage of a record
# run (CLI, BPF, side band, symbols, CFI, Python, writers, dump), without the
# tests that assert sample counts, or signal the agent after a fixed delay, which
# an ASan-slowed agent misses on a loaded host (E2E_SELECT); E2E_TESTS=tests/e2e
# E2E_SELECT= for all.
ifeq ($(SANITIZE),1)
E2E_TESTS ?= $(addprefix tests/e2e/,test_cli.py test_cpu.py test_python.py test_pprof.py \
	test_dump.py test_unwind.py)
E2E_SELECT ?= -k 'not whole_machine and not pyenv_cpython and not split_lines and \
	not c_extension and not gil_filter and not command_split and not pid_split and \
	not deep_recursion and not sigint_writes and not sigterm_with_command'
# leaks are reported at exit (and fail the run): every path must free what it took
export ASAN_OPTIONS ?= abort_on_error=0:detect_leaks=1
export UBSAN_OPTIONS ?= print_stacktrace=1:halt_on_error=1
endif
E2E_TESTS ?= tests/e2e
e2e: $(BUILD)/bpfprof
	$(Q)$(MAKE) -s -C tests/workloads BUILD=$(abspath $(BUILD))/workloads
	$(Q)BPFPROF=$(abspath $(BUILD))/bpfprof WORKLOADS=$(abspath $(BUILD))/workloads \
		$(PYTHON) -m pytest -q -rs -p no:cacheprovider --durations=15 $(E2E_TESTS) $(E2E_SELECT) $(PYTEST_ARGS)

# Fuzzing: one libFuzzer harness per parser of untrusted bytes (tests/fuzz/fuzz_NAME.c),
# linked with the library built by clang under ASan+UBSan in $(FUZZ_BUILD). Seeds are in
# tests/fuzz/corpus/NAME (read only); what the fuzzer adds goes to $(FUZZ_BUILD)/corpus/NAME,
# crashes to $(FUZZ_BUILD)/crashes/. Every input that once crashed is kept in
# tests/fuzz/regress/NAME and run by fuzz-smoke (part of make test).
FUZZ_BUILD ?= build-fuzz
FUZZ_CC    ?= clang
FUZZ_SECS  ?= 60
FUZZ_SMOKE_SECS ?= 10
FUZZ_SAN   := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS := -O1 -g $(WARN) -std=gnu11 -D_GNU_SOURCE -DBPFPROF_VERSION='"$(VERSION)"' \
	       -Iinclude -Iuser -I$(BUILD) -I$(BUILD)/pprof $(FUZZ_SAN)
# one harness per parser; a run never stops at a slow input for longer than this
FUZZ_ARGS  ?= -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
FUZZ_NAMES := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BINS  := $(addprefix $(FUZZ_BUILD)/fuzz_,$(FUZZ_NAMES))
FUZZ_OBJS  := $(patsubst %.c,$(FUZZ_BUILD)/obj/%.o,$(LIB_SRCS)) $(FUZZ_BUILD)/obj/pprof/profile.pb-c.o
# harnesses that can write their own seeds (built with -DFUZZ_MKSEED)
FUZZ_MKSEED := pycode pysnap

$(FUZZ_BUILD)/obj/pprof/profile.pb-c.o: $(BUILD)/pprof/profile.pb-c.c
	$(call msg,FUZZCC,$@)
	@mkdir -p $(@D)
	$(Q)$(FUZZ_CC) -O1 -g -Wall $(FUZZ_SAN) -fsanitize=fuzzer-no-link -I$(BUILD)/pprof -c $< -o $@

$(FUZZ_BUILD)/obj/%.o: %.c $(HDRS)
	$(call msg,FUZZCC,$@)
	@mkdir -p $(@D)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_BUILD)/libbpfprof.a: $(FUZZ_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(FUZZ_BUILD)/libbpfprof.a
	$(call msg,FUZZLD,$@)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -Itests/fuzz $< $(FUZZ_BUILD)/libbpfprof.a \
		$(LDLIBS) -o $@

$(FUZZ_BUILD)/mkseed_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(FUZZ_BUILD)/libbpfprof.a
	$(call msg,FUZZLD,$@)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -DFUZZ_MKSEED -Itests/fuzz $< $(FUZZ_BUILD)/libbpfprof.a \
		$(LDLIBS) -o $@

fuzz-build: $(FUZZ_BINS)

# Rewrite the generated seeds (checked in) after a layout change.
fuzz-seeds: $(addprefix $(FUZZ_BUILD)/mkseed_,$(FUZZ_MKSEED))
	$(Q)set -e; for n in $(FUZZ_MKSEED); do mkdir -p tests/fuzz/corpus/$$n; \
		$(FUZZ_BUILD)/mkseed_$$n tests/fuzz/corpus/$$n; done

# Every checked-in input once (seeds and regressions), then each harness for $(1) seconds.
define fuzz_run
	$(Q)set -e; for n in $(FUZZ_NAMES); do \
		mkdir -p $(FUZZ_BUILD)/corpus/$$n $(FUZZ_BUILD)/crashes; \
		inputs=$$(find tests/fuzz/corpus/$$n tests/fuzz/regress/$$n -type f 2>/dev/null || true); \
		echo "  FUZZ     $$n: $$(echo "$$inputs" | grep -c .) checked-in inputs"; \
		[ -z "$$inputs" ] || $(FUZZ_BUILD)/fuzz_$$n $(FUZZ_ARGS) $$inputs \
			>$(FUZZ_BUILD)/$$n.replay.log 2>&1 || \
			{ tail -40 $(FUZZ_BUILD)/$$n.replay.log; exit 1; }; \
		echo "  FUZZ     $$n: $(1) s"; \
		$(FUZZ_BUILD)/fuzz_$$n $(FUZZ_ARGS) -max_total_time=$(1) \
			-artifact_prefix=$(FUZZ_BUILD)/crashes/$$n- $(FUZZ_BUILD)/corpus/$$n \
			tests/fuzz/corpus/$$n >$(FUZZ_BUILD)/$$n.log 2>&1 || \
			{ tail -60 $(FUZZ_BUILD)/$$n.log; exit 1; }; \
		grep -E '^(#[0-9]+.*(DONE|pulse)|stat::number_of_executed_units|stat::average_exec_per_sec)' \
			$(FUZZ_BUILD)/$$n.log | tail -3 | sed 's/^/           /'; \
	done
endef

fuzz: fuzz-build
	$(call fuzz_run,$(FUZZ_SECS))

# make test's share: every checked-in input, then a short run of each harness.
fuzz-smoke: fuzz-build
	$(call fuzz_run,$(FUZZ_SMOKE_SECS))

# make test: each step runs whatever the one before did (a failing e2e test
# still leaves the fuzzers their run), and the last line gives all results;
# the status is non-zero if any step failed. The sanitized build's own test
# run is unit + e2e; the fuzzers are sanitized anyway.
ifeq ($(SANITIZE),1)
TEST_STEPS ?= unit e2e
else
TEST_STEPS ?= unit e2e fuzz-smoke
endif
test: test-deps
	$(Q)st=0; res=; for s in $(TEST_STEPS); do \
		echo "  TEST     $$s"; t0=$$(date +%s); \
		if $(MAKE) --no-print-directory $$s; then r=passed; else r=FAILED; st=1; fi; \
		res="$$res, $$s $$r ($$(( $$(date +%s) - t0 )) s)"; \
	done; echo "make test: $${res#, }"; exit $$st

bench: bench-deps
	$(Q)$(MAKE) --no-print-directory $(BUILD)/bpfprof
	$(Q)$(MAKE) -s -C tests/workloads BUILD=$(abspath $(BUILD))/workloads
	$(Q)BPFPROF=$(abspath $(BUILD))/bpfprof WORKLOADS=$(abspath $(BUILD))/workloads tools/bench.sh

# Instructions the verifier processes per BPF program, each loaded alone as
# for -a (root; docs/design.md "Verification is start-up").
$(BUILD)/bpf_insns: tools/bpf_insns.c
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) $< -lbpf -o $@

verifier-stats: $(BUILD)/bpf_insns $(BPF_OBJS)
	$(Q)for o in $(BPF_OBJS); do $(BUILD)/bpf_insns $$o filter_pids=0 || exit 1; done

# Debian packages (tools/install-deps.sh): building and running; test; bench.
# Each installs only what is missing, and touches no network when nothing is.
deps:
	tools/install-deps.sh
test-deps:
	tools/install-deps.sh test

# What the Python tests run besides pyenv's interpreters, built once and cached
# under /var/cache/bpfprof: the Debian sid root (python3.13/3.14/3.15, torch;
# ~6 min) and free-threaded interpreters built from Debian's sources in it
# (~10 min each where the mirror has the source). One that cannot be made is
# skipped by the tests with one line saying why: this step does not fail.
# .ci/run runs it before make test, which it would otherwise slow by as much.
test-roots:
	tools/sidroot.sh
	-tools/pyft.sh
bench-deps:
	tools/install-deps.sh bench

# The README's first command (TEST=1: and its second) in a fresh minbase
# Debian 12 root with a copy of this tree at HEAD (root; docs/testing.md).
check-readme:
	tools/minbase.sh $(if $(filter 1,$(TEST)),--test)

install: $(BUILD)/bpfprof $(BUILD)/libbpfprof_heap.so
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(UNITDIR) \
		$(DESTDIR)$(PREFIX)/lib/bpfprof
	install -m 0755 $(BUILD)/bpfprof $(DESTDIR)$(PREFIX)/bin/bpfprof
	install -m 0644 $(BUILD)/libbpfprof_heap.so $(DESTDIR)$(PREFIX)/lib/bpfprof/libbpfprof_heap.so
	if [ -f $(BUILD)/libbpfprof_cupti.so ]; then install -m 0644 $(BUILD)/libbpfprof_cupti.so \
		$(DESTDIR)$(PREFIX)/lib/bpfprof/libbpfprof_cupti.so; fi
	install -m 0644 man/bpfprof.8 $(DESTDIR)$(MANDIR)/man8/bpfprof.8
	sed 's|/usr/local/bin/bpfprof|$(PREFIX)/bin/bpfprof|' packaging/bpfprof.service > \
		$(DESTDIR)$(UNITDIR)/bpfprof.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/bpfprof.service

# Kernel style at 100 columns (.clang-format); format-check fails on any difference.
FORMAT_SRCS = $(shell git ls-files 'bpf/*.[ch]' 'include/*.h' 'user/*.[ch]' 'tests/unit/*.[ch]' \
	'tests/workloads/*.[ch]' 'tests/fuzz/*.[ch]' 'tools/*.[ch]')
format:
	clang-format -i $(FORMAT_SRCS)
format-check:
	$(Q)clang-format --dry-run --Werror $(FORMAT_SRCS)

clean:
	rm -rf $(BUILD) $(FUZZ_BUILD)

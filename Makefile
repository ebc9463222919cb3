# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# make            build build/bpfprof
# make test       unit tests (no root) then end-to-end tests (root, real BPF)
# make bench      overhead benchmark against perf (not part of make test)
# make deps       install every Debian package the build, tests and bench need
# make install    PREFIX=/usr/local DESTDIR= (binary, man page, systemd unit)
# make V=1        show commands

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
	    -Iinclude -Iuser -I$(BUILD) -I$(BUILD)/pprof
LDLIBS   := -lbpf -lelf -lz -llzma -lprotobuf-c -lcurl -lstdc++ -lpthread -lm
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

.PHONY: all test unit e2e bench deps install clean format format-check
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
	$(Q)$(CC) -O2 -g -Wall -I$(BUILD)/pprof -c $< -o $@

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

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libbpfprof.a $(HDRS)
	$(call msg,CC,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) -Itests/unit $< $(BUILD)/libbpfprof.a $(LDLIBS) -lcmocka -o $@

# --alloc -- CMD: the in-process heap sampler bpfprof preloads (tools/heap)
all: $(BUILD)/libbpfprof_heap.so
$(BUILD)/libbpfprof_heap.so: tools/heap/preload.c tools/heap/Makefile
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

# Unit tests need no root; each binary is a cmocka group.
# Fixtures (small ELF files with known symbols) are built by tests/unit/fixtures/Makefile.
unit: $(UNIT_BINS)
	$(Q)$(MAKE) -s -C tests/unit/fixtures BUILD=$(abspath $(BUILD))/fixtures
	$(Q)$(MAKE) -s -C tests/unit/fixtures/cfi BUILD=$(abspath $(BUILD))/fixtures/cfi
	$(Q)$(MAKE) -s -C tests/unit/fixtures/python BUILD=$(abspath $(BUILD))/fixtures/python
	$(Q)set -e; for t in $(UNIT_BINS); do FIXTURES=$(abspath $(BUILD))/fixtures $$t; done

# End-to-end: real BPF, real processes, as root. pytest's summary line ends the run.
e2e: $(BUILD)/bpfprof
	$(Q)$(MAKE) -s -C tests/workloads BUILD=$(abspath $(BUILD))/workloads
	$(Q)BPFPROF=$(abspath $(BUILD))/bpfprof WORKLOADS=$(abspath $(BUILD))/workloads \
		$(PYTHON) -m pytest -q -p no:cacheprovider tests/e2e $(PYTEST_ARGS)

test: unit e2e

bench: $(BUILD)/bpfprof
	$(Q)$(MAKE) -s -C tests/workloads BUILD=$(abspath $(BUILD))/workloads
	$(Q)BPFPROF=$(abspath $(BUILD))/bpfprof WORKLOADS=$(abspath $(BUILD))/workloads tools/bench.sh

deps:
	tools/install-deps.sh

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
	'tests/workloads/*.[ch]' 'tools/*.[ch]')
format:
	clang-format -i $(FORMAT_SRCS)
format-check:
	$(Q)clang-format --dry-run --Werror $(FORMAT_SRCS)

clean:
	rm -rf $(BUILD)

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbolize/dwlines.h"

struct dwlines {
	int fd;
	Elf *elf;
	Dwarf *dw;
	size_t bytes;
};

void dwlines__free(struct dwlines *d)
{
	if (!d)
		return;
	if (d->dw)
		dwarf_end(d->dw);
	if (d->elf)
		elf_end(d->elf);
	if (d->fd >= 0)
		close(d->fd);
	free(d);
}

/*
 * What the debug sections will take once read, decompressed sizes from
 * their compression headers: a small file may claim gigabytes.
 */
static uint64_t debug_size(Elf *elf)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	uint64_t n = 0;
	const char *name;
	GElf_Chdr ch;
	GElf_Shdr sh;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return 0;
	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || (strncmp(name, ".debug_", 7) && strncmp(name, ".zdebug_", 8)))
			continue;
		if ((sh.sh_flags & SHF_COMPRESSED) && gelf_getchdr(scn, &ch))
			n += ch.ch_size;
		else
			n += sh.sh_size;
	}
	return n;
}

int dwlines__open(struct dwlines **out, int fd, uint64_t max)
{
	struct dwlines *d;
	uint64_t size;

	*out = NULL;
	if (elf_version(EV_CURRENT) == EV_NONE) {
		close(fd);
		return -ENOSYS;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		close(fd);
		return -ENOMEM;
	}
	d->fd = fd;
	/* read, not mmap: the file's owner could truncate it under us (SIGBUS) */
	d->elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!d->elf || elf_kind(d->elf) != ELF_K_ELF) {
		dwlines__free(d);
		return -ENOEXEC;
	}
	/* refused before libdw reads (and inflates) anything: held, it would count twice */
	size = debug_size(d->elf);
	if (max && 2 * size > max) {
		dwlines__free(d);
		return -EFBIG;
	}
	d->dw = dwarf_begin_elf(d->elf, DWARF_C_READ, NULL);
	if (!d->dw) {
		dwlines__free(d);
		return -ENOENT;
	}
	/*
	 * What it holds is about twice the debug sections: libdw's CU, abbrev
	 * and line tables come on top (a Python pprof run, libc + libpython +
	 * ld.so: 28 MB of sections, peak RSS 48 MB above the folded run's).
	 */
	d->bytes = sizeof(*d) + 2 * size;
	*out = d;
	return 0;
}

size_t dwlines__bytes(const struct dwlines *d)
{
	return d ? d->bytes : 0;
}

static uint32_t decl_line(Dwarf_Die *die)
{
	int line = 0;

	return dwarf_decl_line(die, &line) == 0 && line > 0 ? (uint32_t)line : 0;
}

/* The file of the call that inlined die (DW_AT_call_file, an index in the CU's file table). */
static const char *call_file(Dwarf_Die *cu, Dwarf_Die *die)
{
	Dwarf_Attribute attr;
	Dwarf_Files *files;
	Dwarf_Word idx;
	size_t nfiles;

	if (!dwarf_attr(die, DW_AT_call_file, &attr) || dwarf_formudata(&attr, &idx) ||
	    dwarf_getsrcfiles(cu, &files, &nfiles) || idx >= nfiles)
		return NULL;
	return dwarf_filesrc(files, idx, NULL, NULL);
}

/*
 * The first DIE tagged want under parent that contains pc, descending into
 * the DIEs that can hold it (namespaces and classes for functions, lexical
 * blocks for inlined calls).
 */
static bool find_pc(Dwarf_Die *parent, Dwarf_Addr pc, int want, int depth, Dwarf_Die *out)
{
	Dwarf_Die child;
	int tag;

	if (depth > 32 || dwarf_child(parent, &child) != 0)
		return false;
	do {
		tag = dwarf_tag(&child);
		if (tag == want) {
			if (dwarf_haspc(&child, pc) == 1) {
				*out = child;
				return true;
			}
			continue;
		}
		switch (tag) {
		case DW_TAG_lexical_block:
			if (want != DW_TAG_inlined_subroutine || dwarf_haspc(&child, pc) != 1)
				break;
			/* fall through */
		case DW_TAG_namespace:
		case DW_TAG_class_type:
		case DW_TAG_structure_type:
		case DW_TAG_union_type:
		case DW_TAG_module:
			if (find_pc(&child, pc, want, depth + 1, out))
				return true;
			break;
		}
	} while (dwarf_siblingof(&child, &child) == 0);
	return false;
}

int dwlines__lookup(struct dwlines *d, uint64_t vaddr, struct dwline *out)
{
	Dwarf_Die cu, fn, inl;
	Dwarf_Attribute attr;
	Dwarf_Word cline;
	const char *cf;
	Dwarf_Line *l;
	int line = 0;

	memset(out, 0, sizeof(*out));
	if (!d || !dwarf_addrdie(d->dw, vaddr, &cu))
		return -ENOENT;
	l = dwarf_getsrc_die(&cu, vaddr);
	if (!l || dwarf_lineno(l, &line) || line <= 0)
		return -ENOENT;
	out->file = dwarf_linesrc(l, NULL, NULL);
	out->line = (uint32_t)line;
	if (!find_pc(&cu, vaddr, DW_TAG_subprogram, 0, &fn))
		return out->file ? 0 : -ENOENT;
	out->start_line = decl_line(&fn);
	/* inlined code: the line of the outermost inlined call, in the function named */
	if (find_pc(&fn, vaddr, DW_TAG_inlined_subroutine, 0, &inl) &&
	    dwarf_attr(&inl, DW_AT_call_line, &attr) && !dwarf_formudata(&attr, &cline) && cline) {
		cf = call_file(&cu, &inl);
		out->line = (uint32_t)cline;
		if (cf)
			out->file = cf;
	} else if (dwarf_decl_file(&fn)) {
		out->file = dwarf_decl_file(&fn);
	}
	return out->file ? 0 : -ENOENT;
}

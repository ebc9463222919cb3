// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <nettle/sha2.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unwind/cfidigest.h"

_Static_assert(CFI_DIGEST_SIZE == SHA256_DIGEST_SIZE, "digest size");

/* Read in pieces this big: a huge .eh_frame is never held whole. */
#define CHUNK (64u << 10)

static void put_u64(struct sha256_ctx *c, uint64_t v)
{
	uint8_t b[8];

	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	sha256_update(c, sizeof(b), b);
}

/* len bytes of the file at off, as they are now; each range prefixed by where and how long. */
static int put_bytes(struct sha256_ctx *c, int fd, uint64_t off, uint64_t len, uint8_t *buf)
{
	put_u64(c, off);
	put_u64(c, len);
	while (len) {
		size_t n = len < CHUNK ? (size_t)len : CHUNK;
		ssize_t r = pread(fd, buf, n, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO; /* truncated: no digest, no sharing */
		sha256_update(c, (size_t)r, buf);
		off += (uint64_t)r;
		len -= (uint64_t)r;
	}
	return 0;
}

static bool cfi_section(const char *name, bool *contents)
{
	*contents = !strcmp(name, ".eh_frame") || !strcmp(name, ".debug_frame") ||
		    !strcmp(name, ".zdebug_frame");
	return *contents || !strcmp(name, ".got") || !strcmp(name, ".got.plt");
}

int cfi__digest(int fd, uint8_t out[CFI_DIGEST_SIZE])
{
	static const char tag[] = "bpfprof cfi digest 1";
	struct sha256_ctx c;
	Elf_Scn *scn = NULL;
	uint8_t *buf = NULL;
	size_t nph, shstrndx;
	GElf_Ehdr eh;
	Elf *elf;
	int err = -ENOEXEC;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOEXEC;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) ||
	    elf_getphdrnum(elf, &nph) || elf_getshdrstrndx(elf, &shstrndx))
		goto out;
	buf = malloc(CHUNK);
	if (!buf) {
		err = -ENOMEM;
		goto out;
	}
	sha256_init(&c);
	sha256_update(&c, sizeof(tag), (const uint8_t *)tag);
	sha256_update(&c, EI_NIDENT, eh.e_ident);
	put_u64(&c, eh.e_machine);
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph))
			goto out;
		if (ph.p_type != PT_LOAD && ph.p_type != PT_GNU_EH_FRAME)
			continue;
		put_u64(&c, ph.p_type);
		put_u64(&c, ph.p_flags);
		put_u64(&c, ph.p_vaddr);
		put_u64(&c, ph.p_memsz);
		if (ph.p_type == PT_GNU_EH_FRAME) {
			err = put_bytes(&c, fd, ph.p_offset, ph.p_filesz, buf);
			if (err)
				goto out;
		} else {
			put_u64(&c, ph.p_offset);
			put_u64(&c, ph.p_filesz);
		}
	}
	while ((scn = elf_nextscn(elf, scn))) {
		const char *name;
		GElf_Shdr sh;
		bool contents;

		if (!gelf_getshdr(scn, &sh)) {
			err = -ENOEXEC;
			goto out;
		}
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || !cfi_section(name, &contents))
			continue;
		sha256_update(&c, strlen(name) + 1, (const uint8_t *)name);
		put_u64(&c, sh.sh_type);
		put_u64(&c, sh.sh_flags);
		put_u64(&c, sh.sh_addr);
		if (contents && sh.sh_type != SHT_NOBITS) {
			err = put_bytes(&c, fd, sh.sh_offset, sh.sh_size, buf);
			if (err)
				goto out;
		} else {
			put_u64(&c, sh.sh_size);
		}
	}
	sha256_digest(&c, CFI_DIGEST_SIZE, out);
	err = 0;
out:
	free(buf);
	if (elf)
		elf_end(elf);
	return err;
}

bool cfi__digest_trusted(const struct stat *st)
{
	return (st->st_uid == 0 || st->st_uid == geteuid()) && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

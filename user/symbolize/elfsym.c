/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * elfsym: function symbols of one ELF file.
 *
 * Loading keeps every Elf it reads open until the end, so that candidate
 * symbols can point straight into their string tables; only the symbols that
 * survive alias merging get their (demangled) names copied, into one pool.
 * What stays in memory is 16 bytes per symbol plus that pool.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <lzma.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "symbolize/elfsym.h"
#include "util/tfile.h"

#define DEFAULT_DEBUG_ROOT "/usr/lib/debug"
/* GNU ld makes 20 byte ids (sha1); leave room for anything sane. */
#define BUILD_ID_MAX 64
/*
 * MiniDebugInfo holds only symbols: a few MiB for the biggest programs, and
 * xz gives it about 4:1. A stream that inflates past MINIDEBUG_RATIO times
 * its size (or MINIDEBUG_MAX_SIZE) is not one, or is a bomb (a 46 KB stream
 * of zeros inflates to 300 MB); so is one that takes more than
 * MINIDEBUG_CPU_NS of CPU to decode.
 */
#define MINIDEBUG_MAX_SIZE (64UL << 20)
#define MINIDEBUG_RATIO	   32
#define MINIDEBUG_MIN_CAP  (1UL << 20)
#define MINIDEBUG_MEMLIMIT (64ULL << 20)
#define MINIDEBUG_CPU_NS   (200ULL * 1000 * 1000)
#define MINIDEBUG_CHUNK	   (256UL << 10)
/* The CRC of a debuglink candidate is read in full: no more than this. */
#define CRC_MAX_SIZE (2ULL << 30)
/*
 * glibc's string functions have sized entry points inside sized functions;
 * an address past the inner one belongs to the outer one a few entries back.
 */
#define NEST_SCAN 16

struct sym {
	uint64_t start;
	uint32_t len;  /* never 0: symbols that cover nothing are dropped */
	uint32_t name; /* offset in es->pool */
};

struct seg {
	uint64_t off;
	uint64_t filesz;
	uint64_t vaddr;
};

/* A function by its FDE, as an offset from funcs_base: 8 bytes a function. */
struct func {
	uint32_t off, len;
};

struct elfsym {
	struct sym *syms;
	size_t nsyms;
	struct func *funcs; /* sorted; only where the symbols are not the full set */
	size_t nfuncs;
	uint64_t funcs_base;
	char *pool;
	size_t pool_len;
	struct seg *segs;
	size_t nsegs;
	const char *source;
	int elf_type;
	bool executable;
	char build_id[BUILD_ID_MAX * 2 + 1];
};

/* A symbol while loading; name points into an Elf that is still open. */
struct cand {
	uint64_t start;
	uint64_t size;
	uint64_t sec_end; /* bounds a symbol without size */
	const char *name;
	uint32_t order; /* keeps alias choice deterministic */
	uint8_t rank;	/* higher is the better name among aliases */
};

struct cands {
	struct cand *v;
	size_t n;
	size_t cap;
};

/* An ELF image being read: a file, or decompressed MiniDebugInfo in mem. */
struct elfimg {
	Elf *elf;
	int fd;	   /* ours to close, or -1 */
	void *mem; /* ours to free, or NULL */
	size_t size;
};

#define ELFIMG_INIT                                           \
	{                                                     \
		.elf = NULL, .fd = -1, .mem = NULL, .size = 0 \
	}

struct secinfo {
	uint64_t addr;
	uint64_t size;
	uint64_t flags;
};

static void img_close(struct elfimg *img)
{
	if (img->elf)
		elf_end(img->elf);
	if (img->fd >= 0)
		close(img->fd);
	free(img->mem);
	img->elf = NULL;
	img->fd = -1;
	img->mem = NULL;
	img->size = 0;
}

static bool table_fits(uint64_t off, size_t num, size_t entsize, size_t size)
{
	return off <= size && num <= (size - off) / entsize;
}

/*
 * libelf quietly treats a section header table that runs past the end of the
 * file as absent, which would make a truncated file look like a stripped one;
 * check both tables against the header's own counts, so it is refused.
 */
static int elf_check(Elf *elf, size_t size)
{
	size_t shnum, phnum, shent, phent;
	GElf_Ehdr eh;

	if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh))
		return -ENOEXEC;
	if (elf_getshdrnum(elf, &shnum) || elf_getphdrnum(elf, &phnum))
		return -ENOEXEC;
	shent = gelf_fsize(elf, ELF_T_SHDR, 1, EV_CURRENT);
	phent = gelf_fsize(elf, ELF_T_PHDR, 1, EV_CURRENT);
	if (!shent || !phent)
		return -ENOEXEC;
	/* e_shnum 0 with e_shoff set: the count is in section 0, which must fit too. */
	if (eh.e_shnum > shnum)
		shnum = eh.e_shnum;
	if (!shnum && eh.e_shoff)
		shnum = 1;
	if (eh.e_phnum != PN_XNUM && eh.e_phnum > phnum)
		phnum = eh.e_phnum;
	if (shnum && (eh.e_shentsize != shent || !table_fits(eh.e_shoff, shnum, shent, size)))
		return -ENOEXEC;
	if (phnum && (eh.e_phentsize != phent || !table_fits(eh.e_phoff, phnum, phent, size)))
		return -ENOEXEC;
	return 0;
}

/* own_fd: the image closes fd when done. */
static int img_from_fd(struct elfimg *img, int fd, bool own_fd)
{
	struct stat st;

	if (own_fd)
		img->fd = fd;
	if (fstat(fd, &st))
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_size <= 0)
		return -ENOEXEC;
	img->size = st.st_size;
	/*
	 * Read, not mmap: the file's owner can truncate it while we parse, and a
	 * mapped page past the new end is SIGBUS. libelf pread()s the headers
	 * and each section asked for; a short read is an error it returns.
	 */
	img->elf = elf_begin(fd, ELF_C_READ, NULL);
	return elf_check(img->elf, img->size);
}

/*
 * Open path, resolved inside root_fd (see tfile), as an image unless it is
 * the file main_st describes.
 */
static int img_open(struct elfimg *img, int root_fd, const char *path, const struct stat *main_st)
{
	struct stat st;
	int fd;

	fd = tfile__open(root_fd, path, &st);
	if (fd < 0)
		return fd;
	if (main_st && st.st_dev == main_st->st_dev && st.st_ino == main_st->st_ino) {
		close(fd);
		return -ELOOP;
	}
	return img_from_fd(img, fd, true);
}

static int load_sections(Elf *elf, struct secinfo **out, size_t *n)
{
	struct secinfo *secs;
	Elf_Scn *scn = NULL;
	size_t shnum, i;
	GElf_Shdr sh;

	*out = NULL;
	*n = 0;
	if (elf_getshdrnum(elf, &shnum))
		return -ENOEXEC;
	secs = calloc(shnum ? shnum : 1, sizeof(*secs));
	if (!secs)
		return -ENOMEM;
	while ((scn = elf_nextscn(elf, scn))) {
		i = elf_ndxscn(scn);
		if (i >= shnum || !gelf_getshdr(scn, &sh))
			continue;
		secs[i].addr = sh.sh_addr;
		secs[i].size = sh.sh_size;
		secs[i].flags = sh.sh_flags;
	}
	*out = secs;
	*n = shnum;
	return 0;
}

/* The SHT_SYMTAB_SHNDX data of the symbol table at index symtab, if any. */
static Elf_Data *shndx_data(Elf *elf, size_t symtab)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(elf, scn))) {
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_SYMTAB_SHNDX &&
		    sh.sh_link == symtab)
			return elf_getdata(scn, NULL);
	}
	return NULL;
}

static int cands_push(struct cands *cs, const struct cand *c)
{
	struct cand *tmp;
	size_t cap;

	if (cs->n == cs->cap) {
		cap = cs->cap ? cs->cap * 2 : 256;
		tmp = realloc(cs->v, cap * sizeof(*tmp));
		if (!tmp)
			return -ENOMEM;
		cs->v = tmp;
		cs->cap = cap;
	}
	cs->v[cs->n++] = *c;
	return 0;
}

static int bind_rank(int bind)
{
	switch (bind) {
	case STB_GLOBAL:
	case STB_GNU_UNIQUE:
		return 3;
	case STB_WEAK:
		return 2;
	case STB_LOCAL:
		return 1;
	default:
		return 0;
	}
}

/*
 * Turn sym into a candidate if it is code: functions, ifunc resolvers, and
 * hand-written assembly that has a size but no type. Returns false otherwise.
 */
static bool sym_to_cand(Elf *elf, const GElf_Sym *sym, size_t shndx, const struct secinfo *secs,
			size_t nsecs, size_t strtab, bool thumb, struct cand *c)
{
	int type = GELF_ST_TYPE(sym->st_info);
	const struct secinfo *sec;
	const char *name;

	if (shndx == SHN_UNDEF || shndx >= nsecs)
		return false;
	sec = &secs[shndx];
	if (!(sec->flags & SHF_ALLOC))
		return false;
	if (type != STT_FUNC && type != STT_GNU_IFUNC &&
	    !(type == STT_NOTYPE && sym->st_size && (sec->flags & SHF_EXECINSTR)))
		return false;
	name = elf_strptr(elf, strtab, sym->st_name);
	if (!name || !*name)
		return false;

	c->start = sym->st_value;
	/* Bit 0 of an ARM function address selects Thumb, it is not an address bit. */
	if (thumb && type != STT_NOTYPE)
		c->start &= ~1ULL;
	c->size = sym->st_size;
	c->sec_end = sec->addr + sec->size;
	if (c->sec_end < sec->addr)
		c->sec_end = UINT64_MAX;
	c->name = name;
	c->rank = bind_rank(GELF_ST_BIND(sym->st_info)) << 1 | (type != STT_NOTYPE);
	return true;
}

/* Add the code symbols of every sh_type table in elf. Returns how many, or -errno. */
static int collect(struct cands *cs, Elf *elf, Elf64_Word sh_type)
{
	size_t nsecs, nsyms, symsz, i, shndx;
	struct secinfo *secs = NULL;
	Elf_Data *data, *xdata;
	Elf_Scn *scn = NULL;
	Elf32_Word xndx;
	GElf_Ehdr eh;
	GElf_Shdr sh;
	GElf_Sym sym;
	struct cand c;
	int added = 0, err;
	bool thumb;

	if (!gelf_getehdr(elf, &eh))
		return 0;
	thumb = eh.e_machine == EM_ARM;
	symsz = gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT);
	err = load_sections(elf, &secs, &nsecs);
	if (err)
		return err == -ENOMEM ? err : 0;

	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != sh_type)
			continue;
		data = elf_getdata(scn, NULL);
		/* A debug file may keep a table's header but not its contents. */
		if (!data || !data->d_buf || !symsz)
			continue;
		xdata = shndx_data(elf, elf_ndxscn(scn));
		nsyms = data->d_size / symsz;
		for (i = 1; i < nsyms; i++) {
			xndx = 0;
			if (!gelf_getsymshndx(data, xdata, i, &sym, &xndx))
				continue;
			shndx = sym.st_shndx;
			if (shndx == SHN_XINDEX)
				shndx = xdata ? xndx : SHN_UNDEF;
			else if (shndx >= SHN_LORESERVE)
				continue;
			if (!sym_to_cand(elf, &sym, shndx, secs, nsecs, sh.sh_link, thumb, &c))
				continue;
			c.order = cs->n;
			err = cands_push(cs, &c);
			if (err)
				goto out;
			added++;
		}
	}
	err = added;
out:
	free(secs);
	return err;
}

static int leading_underscores(const char *s)
{
	int n = 0;

	while (s[n] == '_')
		n++;
	return n;
}

static int cand_cmp(const void *pa, const void *pb)
{
	const struct cand *a = pa, *b = pb;
	int ua, ub;

	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	if (a->rank != b->rank)
		return a->rank > b->rank ? -1 : 1;
	ua = leading_underscores(a->name);
	ub = leading_underscores(b->name);
	if (ua != ub)
		return ua < ub ? -1 : 1;
	return a->order < b->order ? -1 : a->order > b->order;
}

/* Keep the best named candidate of each address; it inherits the others' extent. */
static void merge_aliases(struct cands *cs)
{
	struct cand *v = cs->v, *keep;
	size_t i, n = 0;

	if (!cs->n)
		return;
	qsort(v, cs->n, sizeof(*v), cand_cmp);
	for (i = 0; i < cs->n; i++) {
		if (n && v[n - 1].start == v[i].start) {
			keep = &v[n - 1];
			if (v[i].size > keep->size)
				keep->size = v[i].size;
			if (v[i].sec_end > keep->sec_end)
				keep->sec_end = v[i].sec_end;
			continue;
		}
		v[n++] = v[i];
	}
	cs->n = n;
}

static int pool_add(char **pool, size_t *len, size_t *cap, const char *s, uint32_t *off)
{
	size_t slen = strlen(s) + 1, ncap;
	char *tmp;

	if (*len + slen > UINT32_MAX)
		return -EFBIG;
	if (*len + slen > *cap) {
		ncap = *cap ? *cap : 4096;
		while (ncap < *len + slen)
			ncap *= 2;
		tmp = realloc(*pool, ncap);
		if (!tmp)
			return -ENOMEM;
		*pool = tmp;
		*cap = ncap;
	}
	memcpy(*pool + *len, s, slen);
	*off = *len;
	*len += slen;
	return 0;
}

/* Size-less symbols run to the next symbol, but never out of their section. */
static uint64_t cand_end(const struct cands *cs, size_t i)
{
	const struct cand *c = &cs->v[i];
	uint64_t end;

	if (c->size) {
		end = c->start + c->size;
		return end < c->start ? UINT64_MAX : end;
	}
	end = c->sec_end;
	if (i + 1 < cs->n && cs->v[i + 1].start < end)
		end = cs->v[i + 1].start;
	return end;
}

static int finalize(struct elfsym *es, struct cands *cs)
{
	size_t i, n = 0, pool_len = 0, pool_cap = 0;
	uint64_t end, len;
	char *dm;
	void *tmp;
	int err;

	merge_aliases(cs);
	es->syms = malloc((cs->n ? cs->n : 1) * sizeof(*es->syms));
	if (!es->syms)
		return -ENOMEM;
	for (i = 0; i < cs->n; i++) {
		end = cand_end(cs, i);
		if (end <= cs->v[i].start)
			continue;
		len = end - cs->v[i].start;
		es->syms[n].start = cs->v[i].start;
		es->syms[n].len = len > UINT32_MAX ? UINT32_MAX : len;
		dm = demangle(cs->v[i].name);
		/*
		 * "__libc_start_main@@GLIBC_2.34" names the same function in every
		 * glibc: drop the symbol version so that profiles compare and merge.
		 */
		if (!dm && strchr(cs->v[i].name, '@'))
			dm = strndup(cs->v[i].name, strchr(cs->v[i].name, '@') - cs->v[i].name);
		else if (dm && strchr(dm, '@'))
			*strchr(dm, '@') = '\0';
		err = pool_add(&es->pool, &pool_len, &pool_cap, dm ? dm : cs->v[i].name,
			       &es->syms[n].name);
		free(dm);
		if (err)
			return err;
		n++;
	}
	es->nsyms = n;
	es->pool_len = pool_len;
	if (n) {
		tmp = realloc(es->syms, n * sizeof(*es->syms));
		if (tmp)
			es->syms = (struct sym *)tmp;
		tmp = realloc(es->pool, pool_len);
		if (tmp)
			es->pool = tmp;
	}
	return 0;
}

/*
 * A position-independent executable says so in DT_FLAGS_1 (DF_1_PIE); an
 * interpreter alone does not tell, libc.so.6 has one too.
 */
static bool is_pie(Elf *elf)
{
	Elf_Scn *scn = NULL;
	Elf_Data *data;
	GElf_Shdr sh;
	GElf_Dyn dyn;

	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC || !sh.sh_entsize)
			continue;
		data = elf_getdata(scn, NULL);
		for (size_t i = 0; data && i < data->d_size / sh.sh_entsize; i++) {
			if (!gelf_getdyn(data, (int)i, &dyn))
				break;
			if (dyn.d_tag == DT_FLAGS_1)
				return dyn.d_un.d_val & DF_1_PIE;
		}
	}
	return false;
}

static int load_segments(struct elfsym *es, Elf *elf)
{
	size_t phnum, i;
	GElf_Phdr ph;

	if (elf_getphdrnum(elf, &phnum))
		return -ENOEXEC;
	es->segs = calloc(phnum ? phnum : 1, sizeof(*es->segs));
	if (!es->segs)
		return -ENOMEM;
	for (i = 0; i < phnum; i++) {
		if (!gelf_getphdr(elf, i, &ph) || ph.p_type != PT_LOAD || !ph.p_filesz)
			continue;
		es->segs[es->nsegs].off = ph.p_offset;
		es->segs[es->nsegs].filesz = ph.p_filesz;
		es->segs[es->nsegs].vaddr = ph.p_vaddr;
		es->nsegs++;
	}
	return 0;
}

static int note_build_id(const Elf_Data *data, uint8_t *id, size_t max)
{
	size_t off = 0, next, name_off, desc_off;
	GElf_Nhdr nh;

	if (!data || !data->d_buf)
		return 0;
	while ((next = gelf_getnote((Elf_Data *)data, off, &nh, &name_off, &desc_off)) > 0) {
		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == sizeof(ELF_NOTE_GNU) &&
		    !memcmp((const char *)data->d_buf + name_off, ELF_NOTE_GNU,
			    sizeof(ELF_NOTE_GNU)) &&
		    nh.n_descsz && nh.n_descsz <= max) {
			memcpy(id, (const char *)data->d_buf + desc_off, nh.n_descsz);
			return nh.n_descsz;
		}
		off = next;
	}
	return 0;
}

/*
 * Sections first: separate debug files keep the program headers of the
 * original, whose PT_NOTE offsets point at nothing in them.
 */
static int find_build_id(Elf *elf, uint8_t *id, size_t max)
{
	Elf_Scn *scn = NULL;
	size_t phnum, i;
	GElf_Shdr sh;
	GElf_Phdr ph;
	int n;

	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		n = note_build_id(elf_getdata(scn, NULL), id, max);
		if (n > 0)
			return n;
	}
	if (elf_getphdrnum(elf, &phnum))
		return 0;
	for (i = 0; i < phnum; i++) {
		if (!gelf_getphdr(elf, i, &ph) || ph.p_type != PT_NOTE)
			continue;
		n = note_build_id(elf_getdata_rawchunk(elf, ph.p_offset, ph.p_filesz,
						       ph.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR),
				  id, max);
		if (n > 0)
			return n;
	}
	return 0;
}

static void to_hex(const uint8_t *id, int n, char *hex)
{
	static const char digits[] = "0123456789abcdef";
	int i;

	for (i = 0; i < n; i++) {
		hex[2 * i] = digits[id[i] >> 4];
		hex[2 * i + 1] = digits[id[i] & 15];
	}
	hex[2 * n] = '\0';
}

/* The contents of the first section called name that has any. */
static Elf_Data *section_data(Elf *elf, const char *name)
{
	Elf_Scn *scn = NULL;
	Elf_Data *data;
	size_t shstrndx;
	const char *sname;
	GElf_Shdr sh;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		sname = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!sname || strcmp(sname, name))
			continue;
		data = elf_getdata(scn, NULL);
		if (data && data->d_buf && data->d_size)
			return data;
	}
	return NULL;
}

static const char *opt_debug_root(const struct elfsym_opts *opts)
{
	return opts && opts->debug_root ? opts->debug_root : DEFAULT_DEBUG_ROOT;
}

/* The debug file the caller found (opts->debug_fd), if its build id is the file's. */
static int open_given(struct elfimg *dbg, const uint8_t *id, int idlen,
		      const struct elfsym_opts *opts)
{
	uint8_t dbg_id[BUILD_ID_MAX];
	int err;

	if (!opts || !opts->has_debug_fd || idlen <= 0)
		return -ENOENT;
	err = img_from_fd(dbg, opts->debug_fd, false);
	if (err)
		return err;
	if (find_build_id(dbg->elf, dbg_id, sizeof(dbg_id)) != idlen || memcmp(dbg_id, id, idlen)) {
		img_close(dbg);
		return -ESTALE;
	}
	return 0;
}

static int open_by_build_id(struct elfimg *dbg, const uint8_t *id, int idlen, int root_fd,
			    const struct elfsym_opts *opts, const struct stat *main_st)
{
	char hex[BUILD_ID_MAX * 2 + 1], path[PATH_MAX];
	uint8_t dbg_id[BUILD_ID_MAX];
	int n, err;

	/* The first byte names the directory, so a one byte id has no file. */
	if (idlen < 2)
		return -ENOENT;
	to_hex(id, idlen, hex);
	n = snprintf(path, sizeof(path), "%s/.build-id/%.2s/%s.debug", opt_debug_root(opts), hex,
		     hex + 2);
	if (n < 0 || (size_t)n >= sizeof(path))
		return -ENAMETOOLONG;
	err = img_open(dbg, root_fd, path, main_st);
	if (err && err != -ENOMEM && root_fd >= 0) {
		/*
		 * The process's root is gone (it exited) or has no debug files:
		 * the host's are just as good, the build id match below proves it.
		 */
		err = img_open(dbg, -1, path, main_st);
	}
	if (err)
		goto fail;
	/* A stale debug file from an older build would name the wrong code. */
	if (find_build_id(dbg->elf, dbg_id, sizeof(dbg_id)) != idlen || memcmp(dbg_id, id, idlen)) {
		err = -ESTALE;
		goto fail;
	}
	return 0;
fail:
	img_close(dbg);
	return err;
}

/* The CRC of the file's first size bytes (its size when opened); a short read is -ESTALE. */
static int file_crc32(int fd, uint64_t size, uint32_t *crc)
{
	static const size_t bufsz = 1 << 16;
	unsigned char *buf;
	uLong c = crc32(0L, Z_NULL, 0);
	off_t off = 0;
	ssize_t n;
	int err = 0;

	if (size > CRC_MAX_SIZE)
		return -EFBIG;
	buf = malloc(bufsz);
	if (!buf)
		return -ENOMEM;
	while ((uint64_t)off < size) {
		n = pread(fd, buf, size - off < bufsz ? size - off : bufsz, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = -errno;
			break;
		}
		if (!n) {
			/* truncated since it was opened */
			tfile__changed();
			err = -ESTALE;
			break;
		}
		c = crc32(c, buf, n);
		off += n;
	}
	free(buf);
	*crc = c;
	return err;
}

/*
 * Try the .gnu_debuglink companion in GDB's order: next to the file, in its
 * .debug/ subdirectory, then under the debug root. Only a file whose CRC
 * matches the one recorded in the link is taken.
 */
static int open_by_debuglink(struct elfimg *dbg, Elf *elf, const char *path, int root_fd,
			     const struct elfsym_opts *opts, const struct stat *main_st)
{
	char dir[PATH_MAX], cand[PATH_MAX];
	const char *name, *slash;
	size_t nlen, crc_off, dlen, k;
	uint32_t want, got;
	Elf_Data *data;
	GElf_Ehdr eh;
	bool swap;
	int n, err;

	if (!path || !*path)
		return -ENOENT;
	data = section_data(elf, ".gnu_debuglink");
	if (!data || !gelf_getehdr(elf, &eh))
		return -ENOENT;
	name = data->d_buf;
	nlen = strnlen(name, data->d_size);
	crc_off = (nlen + 4) & ~(size_t)3;
	/* The link is a file name, not a path, and is followed by its CRC. */
	if (!nlen || memchr(name, '/', nlen) || crc_off + 4 > data->d_size)
		return -ENOENT;
	memcpy(&want, (const char *)data->d_buf + crc_off, sizeof(want));
	swap = (eh.e_ident[EI_DATA] == ELFDATA2MSB) != (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__);
	if (swap)
		want = __builtin_bswap32(want);

	slash = strrchr(path, '/');
	dlen = slash ? (size_t)(slash - path) : 1;
	if (dlen >= sizeof(dir))
		return -ENAMETOOLONG;
	memcpy(dir, slash ? path : ".", dlen);
	dir[dlen] = '\0';

	for (k = 0; k < 3; k++) {
		if (k == 0)
			n = snprintf(cand, sizeof(cand), "%s/%s", dir, name);
		else if (k == 1)
			n = snprintf(cand, sizeof(cand), "%s/.debug/%s", dir, name);
		else
			n = snprintf(cand, sizeof(cand), "%s/%s/%s", opt_debug_root(opts), dir,
				     name);
		if (n < 0 || (size_t)n >= sizeof(cand))
			continue;
		err = img_open(dbg, root_fd, cand, main_st);
		if (!err)
			err = file_crc32(dbg->fd, dbg->size, &got);
		if (!err && got == want)
			return 0;
		img_close(dbg);
	}
	return -ENOENT;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/*
 * Decode xz into a buffer of at most max bytes, in chunks so that CPU time
 * is checked as it goes. -EFBIG past max, -ETIME past MINIDEBUG_CPU_NS.
 */
static int xz_decode(const uint8_t *in, size_t in_len, size_t max, uint8_t **outp, size_t *out_len)
{
	lzma_stream strm = LZMA_STREAM_INIT;
	uint64_t t0 = thread_cpu_ns();
	uint8_t *out, *tmp;
	size_t cap, ncap, step;
	lzma_ret ret;
	int err = 0;

	cap = in_len < max / 4 ? in_len * 4 : max;
	if (cap < 65536)
		cap = 65536;
	out = malloc(cap);
	if (!out)
		return -ENOMEM;
	if (lzma_stream_decoder(&strm, MINIDEBUG_MEMLIMIT, 0) != LZMA_OK) {
		free(out);
		return -ENOMEM;
	}
	strm.next_in = in;
	strm.avail_in = in_len;
	strm.next_out = out;
	for (;;) {
		step = cap - strm.total_out < MINIDEBUG_CHUNK ? cap - strm.total_out
							      : MINIDEBUG_CHUNK;
		strm.avail_out = step;
		ret = lzma_code(&strm, LZMA_FINISH);
		if (ret == LZMA_STREAM_END)
			break;
		if (ret == LZMA_MEM_ERROR || ret == LZMA_MEMLIMIT_ERROR) {
			err = -ENOMEM;
			goto out;
		}
		if (ret != LZMA_OK) {
			err = -EBADMSG;
			goto out;
		}
		if (thread_cpu_ns() - t0 > MINIDEBUG_CPU_NS) {
			err = -ETIME;
			goto out;
		}
		if (strm.total_out < cap)
			continue;
		if (cap >= max) {
			err = -EFBIG;
			goto out;
		}
		ncap = cap * 2 < max ? cap * 2 : max;
		tmp = realloc(out, ncap);
		if (!tmp) {
			err = -ENOMEM;
			goto out;
		}
		out = tmp;
		strm.next_out = out + strm.total_out;
		cap = ncap;
	}
	*outp = out;
	*out_len = strm.total_out;
	out = NULL;
out:
	lzma_end(&strm);
	free(out);
	return err;
}

int elfsym__xz_decode(const void *in, size_t in_len, void **out, size_t *out_len)
{
	size_t max = in_len < (MINIDEBUG_MAX_SIZE - MINIDEBUG_MIN_CAP) / MINIDEBUG_RATIO
			     ? MINIDEBUG_MIN_CAP + in_len * MINIDEBUG_RATIO
			     : MINIDEBUG_MAX_SIZE;

	return xz_decode(in, in_len, max, (uint8_t **)out, out_len);
}

/* MiniDebugInfo: an xz-compressed ELF file holding a .symtab, see GDB's manual. */
static int open_minidebug(struct elfimg *img, Elf *elf)
{
	Elf_Data *data;
	uint8_t *buf;
	size_t len;
	int err;

	data = section_data(elf, ".gnu_debugdata");
	if (!data)
		return -ENOENT;
	err = elfsym__xz_decode(data->d_buf, data->d_size, (void **)&buf, &len);
	if (err)
		return err;
	img->mem = buf;
	img->size = len;
	img->elf = elf_memory((char *)buf, len);
	err = elf_check(img->elf, len);
	if (err)
		img_close(img);
	return err;
}

/*
 * Fill cs from the best full symbol table available other than the file's
 * own: build id, debuglink, then MiniDebugInfo. dbg keeps the one used open.
 */
static int collect_separate(struct elfsym *es, struct cands *cs, struct elfimg *dbg, Elf *elf,
			    const uint8_t *id, int idlen, const char *path, int root_fd,
			    const struct elfsym_opts *opts, const struct stat *main_st)
{
	static const char *const sources[] = {
		"debuginfod",
		"build-id debug file",
		".gnu_debuglink",
		".gnu_debugdata",
	};
	size_t k;
	int n, err;

	for (k = 0; k < 4; k++) {
		if (k == 0)
			err = open_given(dbg, id, idlen, opts);
		else if (k == 1)
			err = open_by_build_id(dbg, id, idlen, root_fd, opts, main_st);
		else if (k == 2)
			err = open_by_debuglink(dbg, elf, path, root_fd, opts, main_st);
		else
			err = open_minidebug(dbg, elf);
		if (err == -ENOMEM)
			return err;
		if (err)
			continue;
		n = collect(cs, dbg->elf, SHT_SYMTAB);
		if (n < 0)
			return n;
		if (n > 0) {
			es->source = sources[k];
			return 0;
		}
		img_close(dbg);
	}
	return 0;
}

static bool changed_since(int fd, const struct stat *before)
{
	struct stat now;

	if (!before->st_ino || fstat(fd, &now))
		return false;
	return now.st_size != before->st_size || now.st_mtim.tv_sec != before->st_mtim.tv_sec ||
	       now.st_mtim.tv_nsec != before->st_mtim.tv_nsec;
}

/* The directory debug files are resolved in (-1: the host's "/"); ours to close unless given. */
static int root_open(const struct elfsym_opts *opts, int *root_fd)
{
	*root_fd = -1;
	if (opts && opts->has_root_fd) {
		*root_fd = opts->root_fd;
	} else if (opts && opts->root && *opts->root) {
		*root_fd = open(opts->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (*root_fd < 0)
			return errno == ENOMEM ? -ENOMEM : 0; /* no root: no debug files */
	}
	return 0;
}

/* The file's functions by its CFI, into es->funcs; no CFI is no error. -ENOMEM only. */
static int load_funcs(struct elfsym *es, int fd, elfsym_functions_fn functions)
{
	struct elfsym_func *v;
	size_t n, k = 0;

	if (!functions || functions(fd, &v, &n))
		return 0;
	if (n) {
		es->funcs_base = v[0].start;
		es->funcs = malloc(n * sizeof(*es->funcs));
		if (!es->funcs) {
			free(v);
			return -ENOMEM;
		}
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t off = v[i].start - es->funcs_base, len = v[i].end - v[i].start;

		if (off > UINT32_MAX || len > UINT32_MAX)
			break; /* a text over 4 GiB: the rest stays module+0xADDR */
		es->funcs[k++] = (struct func){ (uint32_t)off, (uint32_t)len };
	}
	es->nfuncs = k;
	free(v);
	return 0;
}

int elfsym__open(struct elfsym **out, int fd, const char *path, const struct elfsym_opts *opts)
{
	struct elfimg main_img = ELFIMG_INIT, dbg = ELFIMG_INIT;
	struct cands cs = { 0 };
	uint8_t id[BUILD_ID_MAX];
	struct elfsym *es;
	struct stat st = { 0 };
	GElf_Ehdr eh;
	int err, n, idlen, root_fd = -1;

	*out = NULL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOSYS;
	es = calloc(1, sizeof(*es));
	if (!es)
		return -ENOMEM;

	if (fstat(fd, &st)) {
		err = -errno;
		goto cleanup;
	}
	err = img_from_fd(&main_img, fd, false);
	if (err)
		goto cleanup;
	gelf_getehdr(main_img.elf, &eh);
	if (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) {
		err = -ENOEXEC;
		goto cleanup;
	}
	es->elf_type = eh.e_type;
	es->executable = eh.e_type == ET_EXEC || is_pie(main_img.elf);
	err = load_segments(es, main_img.elf);
	if (err)
		goto cleanup;
	idlen = find_build_id(main_img.elf, id, sizeof(id));
	if (idlen > 0)
		to_hex(id, idlen, es->build_id);

	n = collect(&cs, main_img.elf, SHT_SYMTAB);
	if (n < 0) {
		err = n;
		goto cleanup;
	}
	if (n > 0) {
		es->source = ".symtab";
	} else {
		err = root_open(opts, &root_fd);
		if (!err)
			err = collect_separate(es, &cs, &dbg, main_img.elf, id, idlen, path,
					       root_fd, opts, &st);
		if (err)
			goto cleanup;
	}
	/* .dynsym can name what a separate symbol table leaves out (MiniDebugInfo does). */
	n = collect(&cs, main_img.elf, SHT_DYNSYM);
	if (n < 0) {
		err = n;
		goto cleanup;
	}
	if (!es->source)
		es->source = n > 0 ? ".dynsym" : "none";
	err = finalize(es, &cs);
	/*
	 * Without the full symbol table, name what no symbol covers by the
	 * function its FDE says it is in (module+0xSTART): one frame per
	 * function, not per return address (Debian's python3.11: 399 distinct
	 * frames of a json/sort loop's stripped functions, one per address).
	 */
	if (!err && (!strcmp(es->source, ".dynsym") || !strcmp(es->source, "none") ||
		     !strcmp(es->source, ".gnu_debugdata")))
		err = load_funcs(es, fd, opts ? opts->functions : NULL);
cleanup:
	if (changed_since(fd, &st)) {
		/* truncated or rewritten while we read it: what we read may be torn */
		tfile__changed();
		err = -ESTALE;
	}
	free(cs.v);
	img_close(&dbg);
	img_close(&main_img);
	if (root_fd >= 0 && !(opts && opts->has_root_fd))
		close(root_fd);
	if (err) {
		elfsym__free(es);
		return err;
	}
	*out = es;
	return 0;
}

void elfsym__free(struct elfsym *es)
{
	if (!es)
		return;
	free(es->syms);
	free(es->pool);
	free(es->segs);
	free(es->funcs);
	free(es);
}

int elfsym__function(const struct elfsym *es, uint64_t vaddr, uint64_t *start)
{
	size_t lo = 0, hi = es ? es->nfuncs : 0, i;
	uint64_t off;

	if (!hi || vaddr < es->funcs_base)
		return -ENOENT;
	off = vaddr - es->funcs_base;
	while (lo < hi) { /* lo: the functions starting at or before vaddr */
		i = lo + (hi - lo) / 2;
		if (es->funcs[i].off <= off)
			lo = i + 1;
		else
			hi = i;
	}
	if (!lo || off - es->funcs[lo - 1].off >= es->funcs[lo - 1].len)
		return -ENOENT;
	*start = es->funcs_base + es->funcs[lo - 1].off;
	return 0;
}

const char *elfsym__lookup(const struct elfsym *es, uint64_t vaddr, uint64_t *off)
{
	size_t lo = 0, hi, i;
	const struct sym *s;

	if (!es || !es->nsyms)
		return NULL;
	hi = es->nsyms;
	/* lo ends as the number of symbols starting at or before vaddr. */
	while (lo < hi) {
		i = lo + (hi - lo) / 2;
		if (es->syms[i].start <= vaddr)
			lo = i + 1;
		else
			hi = i;
	}
	for (i = lo; i > 0 && lo - i < NEST_SCAN; i--) {
		s = &es->syms[i - 1];
		if (vaddr - s->start < s->len) {
			if (off)
				*off = vaddr - s->start;
			return es->pool + s->name;
		}
	}
	return NULL;
}

int elfsym__offset_to_vaddr(const struct elfsym *es, uint64_t file_off, uint64_t *vaddr)
{
	uint64_t page = sysconf(_SC_PAGESIZE), lo;
	const struct seg *s;
	size_t i;

	if (!es)
		return -EINVAL;
	for (i = 0; i < es->nsegs; i++) {
		s = &es->segs[i];
		if (file_off >= s->off && file_off - s->off < s->filesz) {
			*vaddr = s->vaddr + (file_off - s->off);
			return 0;
		}
	}
	/*
	 * A mapping starts on a page boundary, which may be below the segment's
	 * p_offset: maps' pgoff itself is such an offset.
	 */
	for (i = 0; i < es->nsegs; i++) {
		s = &es->segs[i];
		lo = s->off & ~(page - 1);
		if (file_off >= lo && file_off < s->off && s->vaddr >= s->off - file_off) {
			*vaddr = s->vaddr - (s->off - file_off);
			return 0;
		}
	}
	return -ENOENT;
}

const char *elfsym__build_id(const struct elfsym *es)
{
	return es ? es->build_id : "";
}

size_t elfsym__bytes(const struct elfsym *es)
{
	return es ? sizeof(*es) + es->nsyms * sizeof(*es->syms) + es->pool_len +
			       es->nsegs * sizeof(*es->segs) + es->nfuncs * sizeof(*es->funcs)
		  : 0;
}

size_t elfsym__count(const struct elfsym *es)
{
	return es ? es->nsyms : 0;
}

const char *elfsym__source(const struct elfsym *es)
{
	return es ? es->source : "none";
}

int elfsym__elf_type(const struct elfsym *es)
{
	return es ? es->elf_type : 0;
}

bool elfsym__executable(const struct elfsym *es)
{
	return es && es->executable;
}

/* Whether a section called name has contents, without reading them. */
static bool has_section(Elf *elf, const char *name)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	const char *sname;
	GElf_Shdr sh;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return false;
	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS || !sh.sh_size)
			continue;
		sname = elf_strptr(elf, shstrndx, sh.sh_name);
		if (sname && !strcmp(sname, name))
			return true;
	}
	return false;
}

int elfsym__dwarf_fd(int fd, const char *path, const struct elfsym_opts *opts)
{
	struct elfimg main_img = ELFIMG_INIT, dbg = ELFIMG_INIT;
	uint8_t id[BUILD_ID_MAX];
	struct stat st;
	int idlen, root_fd = -1, err, ret = -1;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOSYS;
	if (fstat(fd, &st))
		return -errno;
	err = img_from_fd(&main_img, fd, false);
	if (err)
		goto out;
	if (has_section(main_img.elf, ".debug_info") && has_section(main_img.elf, ".debug_line")) {
		ret = fcntl(fd, F_DUPFD_CLOEXEC, 0);
		err = ret < 0 ? -errno : 0;
		goto out;
	}
	err = root_open(opts, &root_fd);
	if (err)
		goto out;
	idlen = find_build_id(main_img.elf, id, sizeof(id));
	err = open_given(&dbg, id, idlen, opts);
	if (!err && !has_section(dbg.elf, ".debug_line")) {
		img_close(&dbg);
		err = -ENOENT;
	}
	if (!err) {
		ret = fcntl(opts->debug_fd, F_DUPFD_CLOEXEC, 0);
		err = ret < 0 ? -errno : 0;
		goto out;
	}
	err = idlen > 0 ? open_by_build_id(&dbg, id, idlen, root_fd, opts, &st) : -ENOENT;
	if (err == -ENOMEM)
		goto out;
	if (err || !has_section(dbg.elf, ".debug_line")) {
		img_close(&dbg);
		err = open_by_debuglink(&dbg, main_img.elf, path, root_fd, opts, &st);
		if (!err && !has_section(dbg.elf, ".debug_line"))
			err = -ENOENT;
	}
	if (!err) {
		ret = dbg.fd;
		dbg.fd = -1;
	}
out:
	img_close(&dbg);
	img_close(&main_img);
	if (root_fd >= 0 && !(opts && opts->has_root_fd))
		close(root_fd);
	return err ? err : ret;
}

int elf_read_build_id(int fd, char *hex, size_t hexlen)
{
	struct elfimg img = ELFIMG_INIT;
	uint8_t id[BUILD_ID_MAX];
	int n;

	if (!hex || !hexlen)
		return -EINVAL;
	hex[0] = '\0';
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOSYS;
	n = img_from_fd(&img, fd, false);
	if (!n) {
		n = find_build_id(img.elf, id, sizeof(id));
		if (n > 0 && hexlen < (size_t)n * 2 + 1)
			n = -ENOSPC;
		else if (n > 0)
			to_hex(id, n, hex);
	}
	img_close(&img);
	return n;
}

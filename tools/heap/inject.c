// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * In-process sampling for a process already running (`bpfprof --alloc -p`).
 *
 * bpfprof loads this library into the process (a dlopen it makes the
 * process call, user/collect/inject.c), then calls bpfprof_heap_inject().
 * A library loaded late interposes nothing: the process's calls are bound
 * already, through each object's PLT slots (GOT entries). So those slots of
 * the malloc family are pointed at this library's wrappers, in every loaded
 * object but this one, and the wrappers forward to what the slots held: the
 * definition the lookup order found (glibc's, or the jemalloc the program
 * links). dlopen's slots are pointed at a wrapper that hooks the libraries
 * loaded later. bpfprof_heap_eject() puts every slot back at the end of the
 * run: the process runs at full speed again (the library stays loaded:
 * another thread may still be in one of its wrappers).
 *
 * Only PLT calls are hooked (R_X86_64_JUMP_SLOT): a function pointer a
 * program took (GLOB_DAT) keeps its value, so that comparisons with it
 * still hold; the dynamic loader's own calls (through a pointer it set at
 * start-up) are not seen.
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "heap.h"

#define API __attribute__((visibility("default")))

/* A patched slot and what it held. */
struct patch {
	uintptr_t *slot;
	uintptr_t old;
	int relro; /* in the object's read-only-after-relocation part */
};

static struct patch *patches;
static size_t npatches, cap_patches;
/* patches[]: a dlopen in one thread, the eject in another (never the loader's lock held by it) */
static int patch_lock;

static void lock(void)
{
	while (__atomic_exchange_n(&patch_lock, 1, __ATOMIC_ACQUIRE))
		while (__atomic_load_n(&patch_lock, __ATOMIC_RELAXED))
			__builtin_ia32_pause();
}

static void unlock(void)
{
	__atomic_store_n(&patch_lock, 0, __ATOMIC_RELEASE);
}
static int injected;
static void *(*real_dlopen)(const char *, int);

/* What an object's dynamic section says, its pointers made absolute. */
struct dyn {
	uintptr_t base;
	const ElfW(Sym) * symtab;
	const char *strtab;
	const uint32_t *gnu_hash, *sysv_hash;
	const ElfW(Rela) * jmprel, *rela;
	size_t jmprel_size, rela_size;
	uintptr_t relro_lo, relro_hi;
};

static uintptr_t dyn_ptr(const struct dl_phdr_info *info, ElfW(Addr) p)
{
	/* glibc relocates these in place; the vDSO and some loaders do not */
	return p < info->dlpi_addr ? info->dlpi_addr + p : p;
}

static int dyn_read(const struct dl_phdr_info *info, struct dyn *d)
{
	const ElfW(Dyn) *dyn = NULL;

	memset(d, 0, sizeof(*d));
	d->base = info->dlpi_addr;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)(info->dlpi_addr + ph->p_vaddr);
		if (ph->p_type == PT_GNU_RELRO) {
			d->relro_lo = info->dlpi_addr + ph->p_vaddr;
			d->relro_hi = d->relro_lo + ph->p_memsz;
		}
	}
	if (!dyn)
		return -ENOENT;
	for (; dyn->d_tag != DT_NULL; dyn++) {
		switch (dyn->d_tag) {
		case DT_SYMTAB:
			d->symtab = (const ElfW(Sym) *)dyn_ptr(info, dyn->d_un.d_ptr);
			break;
		case DT_STRTAB:
			d->strtab = (const char *)dyn_ptr(info, dyn->d_un.d_ptr);
			break;
		case DT_GNU_HASH:
			d->gnu_hash = (const uint32_t *)dyn_ptr(info, dyn->d_un.d_ptr);
			break;
		case DT_HASH:
			d->sysv_hash = (const uint32_t *)dyn_ptr(info, dyn->d_un.d_ptr);
			break;
		case DT_JMPREL:
			d->jmprel = (const ElfW(Rela) *)dyn_ptr(info, dyn->d_un.d_ptr);
			break;
		case DT_PLTRELSZ:
			d->jmprel_size = dyn->d_un.d_val;
			break;
		case DT_RELA:
			d->rela = (const ElfW(Rela) *)dyn_ptr(info, dyn->d_un.d_ptr);
			break;
		case DT_RELASZ:
			d->rela_size = dyn->d_un.d_val;
			break;
		}
	}
	if (!d->jmprel)
		d->jmprel_size = 0;
	if (!d->rela)
		d->rela_size = 0;
	return d->symtab && d->strtab ? 0 : -ENOENT;
}

static uint32_t gnu_hash(const char *s)
{
	uint32_t h = 5381;

	for (; *s; s++)
		h = h * 33 + (unsigned char)*s;
	return h;
}

static uint32_t sysv_hash(const char *s)
{
	uint32_t h = 0, g;

	for (; *s; s++) {
		h = (h << 4) + (unsigned char)*s;
		g = h & 0xf0000000;
		if (g)
			h ^= g >> 24;
		h &= ~g;
	}
	return h;
}

static int defined_func(const ElfW(Sym) * s)
{
	int t = ELF64_ST_TYPE(s->st_info);

	return s->st_shndx != SHN_UNDEF && s->st_value && (t == STT_FUNC || t == STT_GNU_IFUNC);
}

/* name's definition in the object, as an address; 0 if it defines none. */
static uintptr_t lookup(const struct dyn *d, const char *name)
{
	const ElfW(Sym) *s = NULL;

	if (d->gnu_hash) {
		const uint32_t *gh = d->gnu_hash;
		uint32_t nbuckets = gh[0], symoffset = gh[1], bloom_size = gh[2],
			 h = gnu_hash(name);
		const ElfW(Addr) *bloom = (const ElfW(Addr) *)&gh[4];
		const uint32_t *buckets = (const uint32_t *)&bloom[bloom_size];
		const uint32_t *chain = &buckets[nbuckets];
		uint32_t i = nbuckets ? buckets[h % nbuckets] : 0;

		for (; i >= symoffset && i; i++) {
			uint32_t h2 = chain[i - symoffset];

			if ((h | 1) == (h2 | 1) &&
			    !strcmp(d->strtab + d->symtab[i].st_name, name) &&
			    defined_func(&d->symtab[i])) {
				s = &d->symtab[i];
				break;
			}
			if (h2 & 1)
				break;
		}
	} else if (d->sysv_hash) {
		uint32_t nbucket = d->sysv_hash[0], h = sysv_hash(name);
		const uint32_t *bucket = &d->sysv_hash[2], *chain = &bucket[nbucket];

		for (uint32_t i = nbucket ? bucket[h % nbucket] : 0; i; i = chain[i])
			if (!strcmp(d->strtab + d->symtab[i].st_name, name) &&
			    defined_func(&d->symtab[i])) {
				s = &d->symtab[i];
				break;
			}
	}
	if (!s)
		return 0;
	if (ELF64_ST_TYPE(s->st_info) == STT_GNU_IFUNC) /* the resolver picks the function */
		return ((uintptr_t(*)(void))(d->base + s->st_value))();
	return d->base + s->st_value;
}

static int is_libc(const struct dl_phdr_info *info)
{
	const char *b = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;

	b = b ? b + 1 : info->dlpi_name;
	return b && (!strncmp(b, "libc.so", 7) || !strncmp(b, "libc-", 5));
}

static int is_self(const struct dl_phdr_info *info)
{
	uintptr_t at = (uintptr_t)&is_self;

	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && at >= lo && at - lo < ph->p_memsz)
			return 1;
	}
	return 0;
}

/* The first definitions, in the lookup order (the loader's list: executable first). */
struct first_ctx {
	uintptr_t addr[32];
	uintptr_t dlopen;
};

static int find_first(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct first_ctx *c = arg;
	struct dyn d;

	(void)size;
	if (is_self(info) || dyn_read(info, &d))
		return 0;
	for (int i = 0; i < heap_nfns; i++)
		if (!c->addr[i])
			c->addr[i] = lookup(&d, heap_fns[i].name);
	if (!c->dlopen)
		c->dlopen = lookup(&d, "dlopen");
	return 0;
}

static int in_relro(uintptr_t *slot, const struct dyn *d)
{
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t page = (uintptr_t)slot & ~(uintptr_t)(pg - 1);

	/*
	 * What the loader made read-only (_dl_protect_relro): from the page the
	 * part starts in (rounded down: a GOT in the part's first page is
	 * read-only too) to the page its end is in, that one excluded.
	 */
	return d->relro_hi > d->relro_lo && page >= (d->relro_lo & ~(uintptr_t)(pg - 1)) &&
	       page < (d->relro_hi & ~(uintptr_t)(pg - 1));
}

static int slot_write(uintptr_t *slot, uintptr_t v, int relro)
{
	long pg = sysconf(_SC_PAGESIZE);
	void *page = (void *)((uintptr_t)slot & ~(uintptr_t)(pg - 1));

	if (relro && mprotect(page, pg, PROT_READ | PROT_WRITE))
		return -errno;
	__atomic_store_n(slot, v, __ATOMIC_RELEASE);
	if (relro)
		mprotect(page, pg, PROT_READ);
	return 0;
}

static int remember(uintptr_t *slot, uintptr_t old, int relro)
{
	if (npatches == cap_patches) {
		size_t cap = cap_patches ? cap_patches * 2 : 256;
		void *p = heap_real_mmap(NULL, cap * sizeof(*patches), PROT_READ | PROT_WRITE,
					 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			return -ENOMEM;
		if (patches) {
			memcpy(p, patches, npatches * sizeof(*patches));
			heap_real_munmap(patches, cap_patches * sizeof(*patches));
		}
		patches = p;
		cap_patches = cap;
	}
	patches[npatches++] = (struct patch){ .slot = slot, .old = old, .relro = relro };
	return 0;
}

static void *hooked_dlopen(const char *file, int flags);

/* Point one object's PLT slots of the hooked names at this library. */
static int patch_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	size_t *n = arg;
	struct dyn d;
	int libc;

	(void)size;
	if (is_self(info) || dyn_read(info, &d))
		return 0;
	libc = is_libc(info);
	lock();
	if (!__atomic_load_n(&injected, __ATOMIC_ACQUIRE)) { /* ejected meanwhile */
		unlock();
		return 1;
	}
	for (size_t k = 0;
	     k < d.jmprel_size / sizeof(ElfW(Rela)) + d.rela_size / sizeof(ElfW(Rela)); k++) {
		size_t nj = d.jmprel_size / sizeof(ElfW(Rela));
		const ElfW(Rela) *r = k < nj ? &d.jmprel[k] : &d.rela[k - nj];
		const char *name;
		uintptr_t *slot, want = 0;

		/*
		 * PLT calls; and libc's own calls through its GOT (glibc calls
		 * malloc and free so, from strdup, getline, fopen: a preload
		 * library gets them at load time). Not other objects' GLOB_DAT:
		 * a pointer to free a program took keeps its value, so that it
		 * still compares equal to the ones it stored before.
		 */
		if (ELF64_R_TYPE(r->r_info) != R_X86_64_JUMP_SLOT &&
		    !(libc && ELF64_R_TYPE(r->r_info) == R_X86_64_GLOB_DAT))
			continue;
		name = d.strtab + d.symtab[ELF64_R_SYM(r->r_info)].st_name;
		for (int i = 0; i < heap_nfns && !want; i++)
			if (!strcmp(name, heap_fns[i].name))
				want = (uintptr_t)heap_fns[i].ours;
		if (!want && !strcmp(name, "dlopen"))
			want = (uintptr_t)hooked_dlopen;
		if (!want)
			continue;
		slot = (uintptr_t *)(d.base + r->r_offset);
		if (*slot == want || remember(slot, *slot, in_relro(slot, &d)))
			continue;
		if (slot_write(slot, want, patches[npatches - 1].relro)) {
			npatches--;
			continue;
		}
		(*n)++;
	}
	unlock();
	return 0;
}

static void *hooked_dlopen(const char *file, int flags)
{
	void *h = real_dlopen(file, flags);
	size_t n = 0;

	if (h && __atomic_load_n(&injected, __ATOMIC_ACQUIRE))
		dl_iterate_phdr(patch_object, &n); /* the objects it loaded */
	return h;
}

/*
 * Hook the running process's calls of the malloc family; rate: bpfprof's.
 * Returns the slots pointed at this library (> 0), or -errno.
 */
API long bpfprof_heap_inject(uint64_t rate)
{
	struct first_ctx c = { 0 };
	size_t n = 0;

	if (__atomic_load_n(&injected, __ATOMIC_ACQUIRE))
		return -EALREADY;
	dl_iterate_phdr(find_first, &c);
	if (!c.addr[0] || !c.dlopen)
		return -ENOENT; /* no malloc, or no dlopen (a glibc before 2.34: in libdl) */
	for (int i = 0; i < heap_nfns; i++)
		if (heap_fns[i].real && c.addr[i])
			__atomic_store_n(heap_fns[i].real, (void *)c.addr[i], __ATOMIC_RELEASE);
	real_dlopen = (void *(*)(const char *, int))c.dlopen;
	heap_injected(rate);
	__atomic_store_n(&injected, 1, __ATOMIC_RELEASE);
	dl_iterate_phdr(patch_object, &n);
	return n ? (long)n : -ENOENT;
}

/*
 * Every slot back as it was; the wrappers stay for a thread still in one.
 * The slots put back (>= 0), or -EAGAIN.
 */
API long bpfprof_heap_eject(void)
{
	long n = 0;

	/*
	 * Not lock(): the thread bpfprof stopped to make this call may be the
	 * one holding it (in a dlopen's patch_object): bpfprof tries again.
	 */
	if (__atomic_exchange_n(&patch_lock, 1, __ATOMIC_ACQUIRE))
		return -EAGAIN;
	__atomic_store_n(&injected, 0, __ATOMIC_RELEASE);
	for (size_t i = npatches; i-- > 0;)
		if (!slot_write(patches[i].slot, patches[i].old, patches[i].relro))
			n++;
	npatches = 0;
	unlock();
	return n;
}

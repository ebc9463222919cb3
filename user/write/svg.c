// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * svg__write: a self-contained interactive flame graph (or icicle graph) of
 * a struct profile, in the spirit of flamegraph.pl but laid out here in C:
 * the stacks are merged into a tree, each node gets its offset and width in
 * value units, nodes narrower than a fraction of the width are folded into
 * their parent (counted in the header), and what is left becomes one <g> per
 * frame. The small script at the end only moves rectangles (zoom) and
 * recolours them (search); it needs no network and no other file.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/array.h"
#include "util/htab.h"
#include "write/writers.h"

#define SVG_WIDTH	  1200
#define SVG_PAD		  10
#define FRAME_H		  16	/* row pitch; the rectangle is one less */
#define CHAR_W		  7.2	/* 12px monospace advance; the script uses the same */
#define MIN_FRAC_DEFAULT  0.001 /* 0.1% of the width: 1.2 px at 1200 px */
#define MAX_COMMENT_LINES 4

/* One distinct (name, kind): the unit that merges in the tree. */
struct sname {
	const char *s;
	uint32_t kind;
	uint32_t pad; /* hashed as a key: no uninitialized bytes */
};

struct node {
	uint32_t name; /* index into names */
	uint32_t parent;
	uint32_t depth; /* 0: the "all" root */
	uint32_t nchild;
	uint32_t first; /* first child in ctx.children */
	uint32_t visible;
	uint64_t value;
	uint64_t offset; /* value units from the left edge */
};

struct svg_ctx {
	const struct profile *p;
	bool inverted;
	uint32_t vi; /* value index shown */
	double min_frac;
	struct htab *name_ids; /* struct sname -> name id */
	struct sname *names;
	size_t nnames, cap_names;
	uint32_t *frame_name; /* profile frame index -> name id */
	struct htab *edges;   /* (parent, name) -> node */
	struct node *nodes;
	size_t nnodes, cap_nodes;
	uint32_t *children; /* CSR: children of node i at [first, first + nchild) */
	uint64_t total;
	uint64_t hidden;       /* nodes folded into their parents */
	uint64_t hidden_value; /* value of the outermost of them */
	uint32_t max_depth;    /* of drawn nodes (a zoom that draws deeper ones grows the SVG) */
	uint32_t *ref;	       /* node -> index among the drawn frames, or among the merged */
	FILE *out;
};

static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
	return array_grow(arr, cap, n, elem, 256);
}

static int name_id(struct svg_ctx *c, const char *s, uint32_t kind, uint32_t *id)
{
	struct sname key = { .s = s, .kind = kind };
	struct htab_entry *e;
	int ret;

	/* profile strings are interned: the pointer stands for the text */
	ret = htab__upsert(c->name_ids, &key, sizeof(key), htab__hash(&key, sizeof(key)), &e);
	if (ret < 0)
		return ret;
	if (ret == 1) {
		if (grow((void **)&c->names, &c->cap_names, c->nnames, sizeof(*c->names)))
			return -ENOMEM;
		e->val = c->nnames;
		c->names[c->nnames++] = key;
	}
	*id = (uint32_t)e->val;
	return 0;
}

static int add_node(struct svg_ctx *c, uint32_t parent, uint32_t name, uint32_t *out)
{
	uint32_t key[2] = { parent, name };
	struct htab_entry *e;
	struct node *n;
	int ret;

	ret = htab__upsert(c->edges, key, sizeof(key), htab__hash(key, sizeof(key)), &e);
	if (ret < 0)
		return ret;
	if (ret == 0) {
		*out = (uint32_t)e->val;
		return 0;
	}
	if (c->nnodes >= UINT32_MAX ||
	    grow((void **)&c->nodes, &c->cap_nodes, c->nnodes, sizeof(*c->nodes)))
		return -ENOMEM;
	e->val = c->nnodes;
	n = &c->nodes[c->nnodes];
	memset(n, 0, sizeof(*n));
	n->name = name;
	n->parent = parent;
	n->depth = c->nodes[parent].depth + 1;
	*out = (uint32_t)c->nnodes++;
	return 0;
}

/* Merge every sample into the tree: root first, or leaf first when inverted. */
static int build_tree(struct svg_ctx *c)
{
	const struct profile *p = c->p;
	uint32_t root_name, unknown, node;
	size_t i, k;
	int err;

	c->name_ids = htab__new(p->nframes + 2, HTAB_COPY_KEYS);
	/* a few new nodes per distinct stack; the table grows past the hint */
	c->edges = htab__new(p->nsamples < (1u << 18) ? p->nsamples * 4 + 16 : 1u << 20,
			     HTAB_COPY_KEYS);
	c->frame_name = malloc((p->nframes + 1) * sizeof(*c->frame_name));
	if (!c->name_ids || !c->edges || !c->frame_name)
		return -ENOMEM;
	if ((err = name_id(c, "all", FRAME_ROOT, &root_name)) ||
	    (err = name_id(c, "[unknown]", FRAME_NATIVE, &unknown)))
		return err;
	for (i = 0; i < p->nframes; i++) {
		err = name_id(c, p->frames[i].name ? p->frames[i].name : "[unknown]",
			      p->frames[i].kind, &c->frame_name[i]);
		if (err)
			return err;
	}
	if (grow((void **)&c->nodes, &c->cap_nodes, 0, sizeof(*c->nodes)))
		return -ENOMEM;
	memset(&c->nodes[0], 0, sizeof(c->nodes[0]));
	c->nodes[0].name = root_name;
	c->nnodes = 1;

	for (i = 0; i < p->nsamples; i++) {
		const struct psample *s = &p->samples[i];
		int64_t v = s->values[c->vi];

		/* a tree of widths has no room for negative weights */
		if (v <= 0)
			continue;
		c->total += (uint64_t)v;
		c->nodes[0].value += (uint64_t)v;
		node = 0;
		if (!s->nframes) { /* counted, as in folded: it must not vanish */
			if ((err = add_node(c, 0, unknown, &node)))
				return err;
			c->nodes[node].value += (uint64_t)v;
			continue;
		}
		for (k = 0; k < s->nframes; k++) {
			uint32_t f = s->frames[c->inverted ? s->nframes - 1 - k : k];

			if (f >= p->nframes)
				return -EINVAL;
			if ((err = add_node(c, node, c->frame_name[f], &node)))
				return err;
			c->nodes[node].value += (uint64_t)v;
		}
	}
	return 0;
}

static int cmp_children(const void *a, const void *b, void *arg)
{
	const struct svg_ctx *c = arg;
	const struct sname *x = &c->names[c->nodes[*(const uint32_t *)a].name];
	const struct sname *y = &c->names[c->nodes[*(const uint32_t *)b].name];
	int r = strcmp(x->s, y->s);

	return r ? r : (x->kind > y->kind) - (x->kind < y->kind);
}

/*
 * Children in name order (as flamegraph.pl: the picture does not depend on
 * sample order), offsets from the parent's left edge, and which nodes are
 * wide enough to draw. Parents always have lower indexes than their children,
 * so one pass in index order sees every parent before its children.
 */
static int layout(struct svg_ctx *c)
{
	uint32_t *pos, i, k;
	double thr = (double)c->total * c->min_frac;

	c->children = malloc(c->nnodes * sizeof(*c->children));
	pos = calloc(c->nnodes, sizeof(*pos));
	if (!c->children || !pos) {
		free(pos);
		return -ENOMEM;
	}
	for (i = 1; i < c->nnodes; i++)
		c->nodes[c->nodes[i].parent].nchild++;
	for (i = 0, k = 0; i < c->nnodes; i++) {
		c->nodes[i].first = k;
		pos[i] = k;
		k += c->nodes[i].nchild;
	}
	for (i = 1; i < c->nnodes; i++)
		c->children[pos[c->nodes[i].parent]++] = i;
	free(pos);

	c->nodes[0].visible = c->total > 0;
	for (i = 0; i < c->nnodes; i++) {
		struct node *n = &c->nodes[i];
		uint64_t off = n->offset;

		qsort_r(c->children + n->first, n->nchild, sizeof(*c->children), cmp_children, c);
		for (k = 0; k < n->nchild; k++) {
			struct node *ch = &c->nodes[c->children[n->first + k]];

			ch->offset = off;
			off += ch->value;
			ch->visible = n->visible && (double)ch->value >= thr;
			if (ch->visible && ch->depth > c->max_depth)
				c->max_depth = ch->depth;
			if (!ch->visible) {
				c->hidden++;
				if (n->visible)
					c->hidden_value += ch->value;
			}
		}
	}
	return 0;
}

/*
 * Length of a valid UTF-8 sequence at s (NUL-terminated), or 0. XML must be
 * well-formed or the browser shows an error instead of the graph, so besides
 * invalid bytes this refuses surrogates and U+FFFE/U+FFFF.
 */
static size_t utf8_seq(const unsigned char *s)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xbf;
	size_t n, i;

	if (c < 0x80)
		return 1;
	if (c < 0xc2 || c > 0xf4)
		return 0;
	n = c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	if (c == 0xef && s[1] == 0xbf && (s[2] == 0xbe || s[2] == 0xbf))
		return 0;
	return n;
}

/*
 * Write at most maxch characters of s, XML-escaped: markup characters as
 * entities, control characters as spaces (XML 1.0 forbids them even as
 * references), bytes that are not UTF-8 as U+FFFD. Returns the number of
 * characters of s that were not written.
 */
static size_t put_text(FILE *f, const char *str, size_t maxch)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t n, ch = 0;

	while (*s && ch < maxch) {
		switch (*s) {
		case '&':
			fputs("&amp;", f);
			break;
		case '<':
			fputs("&lt;", f);
			break;
		case '>':
			fputs("&gt;", f);
			break;
		case '"':
			fputs("&quot;", f);
			break;
		case '\'':
			fputs("&#39;", f);
			break;
		default:
			n = utf8_seq(s);
			if (!n) {
				fputs("\xef\xbf\xbd", f);
				n = 1;
			} else if (*s < 0x20) {
				fputc(' ', f);
			} else {
				fwrite(s, 1, n, f);
			}
			s += n;
			ch++;
			continue;
		}
		s++;
		ch++;
	}
	for (n = 0; *s; n++)
		s += utf8_seq(s) ? utf8_seq(s) : 1;
	return n;
}

static size_t utf8_chars(const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t n, len = 0;

	for (; *s; len++) {
		n = utf8_seq(s);
		s += n ? n : 1;
	}
	return len;
}

void svg__escape(FILE *f, const char *s)
{
	put_text(f, s, SIZE_MAX);
}

/* "1,234,567" */
static void fmt_int(char *buf, size_t size, uint64_t v)
{
	char tmp[32];
	int n = snprintf(tmp, sizeof(tmp), "%" PRIu64, v), i, j = 0;

	for (i = 0; i < n && (size_t)j + 2 < size; i++) {
		if (i && (n - i) % 3 == 0)
			buf[j++] = ',';
		buf[j++] = tmp[i];
	}
	buf[j] = '\0';
}

/* Three significant digits: "1.50", "15.3", "153". */
static void fmt_sig(char *buf, size_t size, double v, const char *unit)
{
	snprintf(buf, size, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, unit);
}

static double ns_per_unit(const char *unit)
{
	if (!strcmp(unit, "nanoseconds"))
		return 1;
	if (!strcmp(unit, "microseconds"))
		return 1e3;
	if (!strcmp(unit, "milliseconds"))
		return 1e6;
	if (!strcmp(unit, "seconds"))
		return 1e9;
	return 0;
}

static void fmt_duration(char *buf, size_t size, double ns)
{
	if (ns < 1e3)
		snprintf(buf, size, "%.0f ns", ns);
	else if (ns < 1e6)
		fmt_sig(buf, size, ns / 1e3, "\xc2\xb5s");
	else if (ns < 1e9)
		fmt_sig(buf, size, ns / 1e6, "ms");
	else if (ns < 600e9)
		fmt_sig(buf, size, ns / 1e9, "s");
	else
		snprintf(buf, size, "%.1f min", ns / 60e9);
}

/*
 * A value in the profile's unit, for people: counts with thousands
 * separators and their noun (the value type: samples, launches), bytes in
 * binary multiples, times in the largest unit that keeps a digit before the
 * point. with_type adds the value type where the unit does not name it.
 */
static void fmt_value(char *buf, size_t size, const struct pvaluetype *vt, uint64_t v,
		      bool with_type)
{
	static const char *const bin[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	const char *unit = vt->unit ? vt->unit : "count";
	const char *type = vt->type ? vt->type : "samples";
	char num[64], body[96];
	double d = (double)v, mult;
	int i;

	if (!strcmp(unit, "count") || !*unit) {
		size_t tl = strlen(type);

		fmt_int(num, sizeof(num), v);
		/* "1 sample", not "1 samples" */
		snprintf(buf, size, "%s %.*s", num,
			 (int)(v == 1 && tl > 1 && type[tl - 1] == 's' ? tl - 1 : tl), type);
		return;
	}
	if (!strcmp(unit, "bytes")) {
		if (v < 1024) {
			snprintf(body, sizeof(body), "%" PRIu64 " B", v);
		} else {
			for (i = 0, d /= 1024; d >= 1024 && i < 5; i++)
				d /= 1024;
			fmt_sig(body, sizeof(body), d, bin[i]);
		}
	} else if ((mult = ns_per_unit(unit)) > 0) {
		fmt_duration(body, sizeof(body), d * mult);
	} else {
		fmt_int(num, sizeof(num), v);
		snprintf(body, sizeof(body), "%s %s", num, unit);
	}
	/* a long value type name is cut, which is fine for a label */
	if (snprintf(buf, size, "%s%s%s", body, with_type ? " " : "", with_type ? type : "") < 0)
		buf[0] = '\0';
}

/* A stable colour per name within its kind's family: similar frames look alike. */
static void frame_colour(const struct sname *n, uint32_t depth, int rgb[3])
{
	uint32_t h = 2166136261u;
	const unsigned char *s;
	double a, b;

	for (s = (const unsigned char *)n->s; *s; s++)
		h = (h ^ *s) * 16777619u;
	a = (double)(h & 0xff) / 255.0;
	b = (double)((h >> 8) & 0xff) / 255.0;
	switch (depth ? n->kind : FRAME_ROOT) {
	case FRAME_KERNEL: /* orange */
		rgb[0] = 230 + (int)(25 * a), rgb[1] = 140 + (int)(50 * b);
		rgb[2] = (int)(40 * a);
		break;
	case FRAME_PYTHON: /* green */
		rgb[0] = 50 + (int)(60 * a), rgb[1] = 170 + (int)(60 * b);
		rgb[2] = 50 + (int)(50 * a);
		break;
	case FRAME_CUDA: /* blue-violet */
		rgb[0] = 110 + (int)(40 * a), rgb[1] = 90 + (int)(40 * b);
		rgb[2] = 220 + (int)(35 * a);
		break;
	case FRAME_ROOT: /* grey */
		rgb[0] = 180 + (int)(30 * a), rgb[1] = rgb[0], rgb[2] = rgb[0] + 15;
		break;
	default: /* native: red */
		rgb[0] = 205 + (int)(50 * a), rgb[1] = 40 + (int)(50 * b);
		rgb[2] = 40 + (int)(30 * a);
		break;
	}
}

static const char *const kind_class[] = {
	[FRAME_ROOT] = "r",   [FRAME_KERNEL] = "k", [FRAME_NATIVE] = "n",
	[FRAME_PYTHON] = "p", [FRAME_CUDA] = "c",
};

static const char svg_style[] =
	"text{font-family:monospace;font-size:12px;fill:#000}\n"
	"#title{font-size:17px;text-anchor:middle}\n"
	".sum{text-anchor:middle;fill:#333}\n"
	".btn{cursor:pointer;fill:#124}.btn:hover{text-decoration:underline}\n"
	".hide,#frames.zv>g:not(.v),#frames.zh>g.h{display:none}\n"
	"#frames g{cursor:pointer}#frames g:hover rect{stroke:#000;stroke-width:.5}\n"
	".p rect{opacity:.5}\n";

/*
 * Zoom: every frame carries its offset, width (value units) and depth, so a
 * click rescales the frames above the clicked one (below when inverted),
 * stretches the ones on its path to the root and hides the rest; frames
 * merged for being narrow (the "merged" JSON) that the zoom makes wide
 * enough are drawn for as long as it lasts, and can be clicked in turn
 * (the picture grows when they are deeper than the drawn frames).
 * Search: regex (substring if the regex does not compile), matched frames
 * turn magenta and the matched share is the union of their ranges over the
 * total, merged frames included (each name tested once).
 */
static const char svg_script[] =
	"(function(){\n"
	"var svg=document.getElementById('bpfprof-fg'),ds=svg.dataset,W=+ds.w,PAD=+ds.pad,CW=+ds.cw,FW=W-2*PAD,\n"
	"INV=ds.inv=='1',TOP=+ds.top,FH=+ds.fh,MAXD=+ds.maxd,MINW=+ds.minw,TY=ds.vtype,UN=ds.vunit,\n"
	"SVGNS='http://www.w3.org/2000/svg',\n"
	"box=document.getElementById('frames'),F=Array.prototype.slice.call(box.children),N=F.length,N0=N,\n"
	"O=[],V=[],D=[],NM=[],MK=[],MODE='',PAR=[],root=0,term=null,\n"
	"det=document.getElementById('details'),mat=document.getElementById('matched'),\n"
	"unz=document.getElementById('unzoom'),sb=document.getElementById('search');\n"
	"for(var i=0;i<N;i++){var g=F[i],d=g.dataset;O[i]=+d.o;V[i]=+d.v;D[i]=+d.d;\n"
	"NM[i]=g.firstElementChild.textContent.split('\\n')[0];g._i=i;if(!D[i])root=i;}\n"
	"var T=N?V[root]:0,XS=[],WS=[],LB=[];\n"
	"for(i=0;i<N;i++){XS[i]=PAD+O[i]*FW/T;WS[i]=V[i]*FW/T;LB[i]=null;}\n"
	"var MJ=document.getElementById('merged'),M=MJ?JSON.parse(MJ.textContent):{names:[],n:[]},\n"
	"MN=M.names,HM=M.n.length/4,HP=[],HN=[],HO=[],HV=[],HD=[];\n"
	"for(i=0;i<HM;i++){var p=M.n[4*i],po,pd;if(p<0){po=O[-1-p];pd=D[-1-p];}else{po=HO[p];pd=HD[p];}\n"
	"HP[i]=p;HN[i]=M.n[4*i+1];HO[i]=po+M.n[4*i+2];HV[i]=M.n[4*i+3];HD[i]=pd+1;}\n"
	"M=null;\n"
	"function sig(v,u){return(v<10?v.toFixed(2):v<100?v.toFixed(1):v.toFixed(0))+' '+u;}\n"
	"function dur(ns){return ns<1e3?ns.toFixed(0)+' ns':ns<1e6?sig(ns/1e3,'\\u00b5s'):ns<1e9?sig(ns/1e6,'ms'):\n"
	"ns<600e9?sig(ns/1e9,'s'):(ns/60e9).toFixed(1)+' min';}\n"
	"function fmt(v){var k={nanoseconds:1,microseconds:1e3,milliseconds:1e6,seconds:1e9}[UN],d,j;\n"
	"if(UN=='count'||!UN)return v.toLocaleString('en-US')+' '+(v==1&&TY.length>1&&TY.slice(-1)=='s'?TY.slice(0,-1):TY);\n"
	"if(UN=='bytes'){if(v<1024)return v+' B';for(d=v/1024,j=0;d>=1024&&j<5;j++)d/=1024;\n"
	"return sig(d,['KiB','MiB','GiB','TiB','PiB','EiB'][j]);}\n"
	"if(k)return dur(v*k);return v.toLocaleString('en-US')+' '+UN;}\n"
	"function fit(n,w){var k=Math.floor((w-6)/CW);if(k<3)return '';\n"
	"return n.length<=k?n:n.slice(0,k-2)+'..';}\n"
	"function place(i,x,w){if(Math.abs(x-XS[i])<.005&&Math.abs(w-WS[i])<.005)return;\n"
	" var g=F[i],r=g.children[1],t=g.children[2],s=fit(NM[i],w);XS[i]=x;WS[i]=w;\n"
	" r.setAttribute('x',x.toFixed(2));r.setAttribute('width',w.toFixed(2));\n"
	" if(!t){if(!s)return;t=document.createElementNS(SVGNS,'text');\n"
	"t.setAttribute('y',(+r.getAttribute('y')+11).toFixed(0));g.appendChild(t);}\n"
	" t.setAttribute('x',(x+3).toFixed(2));if(s!==LB[i]){t.textContent=s;LB[i]=s;}}\n"
	"var H0=+svg.getAttribute('height'),BOT=[det,mat].map(function(e){return +e.getAttribute('y');});\n"
	"function grow(dm){var ex=Math.max(0,dm-MAXD)*FH;if(!INV)box.setAttribute('transform','translate(0,'+ex+')');\n"
	" svg.setAttribute('height',H0+ex);svg.setAttribute('viewBox','0 0 '+W+' '+(H0+ex));\n"
	" det.setAttribute('y',BOT[0]+ex);mat.setAttribute('y',BOT[1]+ex);}\n"
	"function drop(){for(var j=N0;j<N;j++)box.removeChild(F[j]);F.length=O.length=V.length=D.length=NM.length=\n"
	"XS.length=WS.length=LB.length=N=N0;}\n"
	"function reveal(zo,zv,zd){var s=FW/zv,j,g,r,nm,dm=0;\n"
	" for(j=0;j<HM;j++){if(HO[j]+HV[j]<=zo||HO[j]>=zo+zv||HV[j]*s<MINW)continue;\n"
	"  nm=MN[HN[j]];g=document.createElementNS(SVGNS,'g');g.setAttribute('class',nm[1]);\n"
	"  g.dataset.o=HO[j];g.dataset.v=HV[j];g.dataset.d=HD[j];g._h=j;\n"
	"  var tt=document.createElementNS(SVGNS,'title');\n"
	"  tt.textContent=nm[0]+'\\n'+fmt(HV[j])+' ('+(T?100*HV[j]/T:0).toFixed(2)+'%)';g.appendChild(tt);\n"
	"  r=document.createElementNS(SVGNS,'rect');\n"
	"  r.setAttribute('y',(INV?TOP+HD[j]*FH:TOP+(MAXD-HD[j])*FH).toFixed(0));\n"
	"  r.setAttribute('height',FH-1);r.setAttribute('fill',nm[2]);g.appendChild(r);\n"
	"  box.appendChild(g);g._i=N;F[N]=g;O[N]=HO[j];V[N]=HV[j];D[N]=HD[j];NM[N]=nm[0];XS[N]=WS[N]=-1;LB[N]=null;N++;\n"
	"  if(HD[j]>dm)dm=HD[j];}\n"
	" return dm;}\n"
	"function zoom(z){var zo=O[z],zv=V[z],zd=D[z],zh=F[z]._h,s=FW/zv,all=z==root,IN=[],n=0,j;\n"
	" drop();grow(all?0:reveal(zo,zv,zd));\n"
	" if(zh!==undefined)for(j=N0;j<N;j++)if(F[j]._h===zh)z=j;\n"
	" for(j=0;j<N;j++){IN[j]=!(O[j]+V[j]<=zo||O[j]>=zo+zv);if(IN[j])n++;}\n"
	" MK.forEach(function(j){if(j<N0)F[j].classList.remove(MODE);});\n"
	"PAR.forEach(function(j){if(j<N0)F[j].classList.remove('p');});MK=[];PAR=[];\n"
	" box.classList.remove('zv','zh');MODE=all?'':2*n<N?'v':'h';\n"
	" if(MODE)box.classList.add('z'+MODE);\n"
	" for(j=0;j<N;j++){\n"
	"  if(MODE&&IN[j]==(MODE=='v')){F[j].classList.add(MODE);MK.push(j);}\n"
	"  if(!IN[j])continue;\n"
	"  if(D[j]>zd)place(j,PAD+(O[j]-zo)*s,V[j]*s);\n"
	"  else{place(j,PAD,FW);if(D[j]<zd){F[j].classList.add('p');PAR.push(j);}}}\n"
	" if(z==root)unz.classList.add('hide');else unz.classList.remove('hide');\n"
	" svg.dataset.zoom=NM[z];if(term!==null)search(term);}\n"
	"function unzoom(){zoom(root);}\n"
	"function search(t){var re=null,iv=[],sum=0,end=-Infinity,mn=[],j;\n"
	" if(t!==null&&t!==''){try{re=new RegExp(t);}catch(e){re=null;}}else t=null;\n"
	" term=t;\n"
	" function hit(n){return t!==null&&(re?re.test(n):n.indexOf(t)>=0);}\n"
	" for(j=0;j<N;j++){var r=F[j].children[1],m=D[j]>0&&hit(NM[j]);\n"
	"  if(m){if(!r.dataset.c)r.dataset.c=r.getAttribute('fill');\n"
	"r.setAttribute('fill','rgb(230,0,230)');if(j<N0)iv.push([O[j],O[j]+V[j]]);}\n"
	"  else if(r.dataset.c){r.setAttribute('fill',r.dataset.c);delete r.dataset.c;}}\n"
	" if(t!==null){for(j=0;j<MN.length;j++)mn[j]=hit(MN[j][0]);\n"
	"  for(j=0;j<HM;j++)if(mn[HN[j]])iv.push([HO[j],HO[j]+HV[j]]);}\n"
	" iv.sort(function(a,b){return a[0]-b[0];});\n"
	" iv.forEach(function(e){if(e[0]>=end){sum+=e[1]-e[0];end=e[1];}\n"
	"else if(e[1]>end){sum+=e[1]-end;end=e[1];}});\n"
	" var pct=T?100*sum/T:0;\n"
	" mat.textContent=t===null?'':'Matched: '+pct.toFixed(1)+'%';\n"
	" mat.dataset.pct=t===null?'':pct;sb.textContent=t===null?'Search':'Reset Search';\n"
	" return pct;}\n"
	"function ask(){var t=prompt('Search frames (regular expression, or substring):',term||'');if(t!==null)search(t);}\n"
	"function frameOf(e){var g=e.target;while(g&&g.parentNode!==box)g=g.parentNode;return g;}\n"
	"box.addEventListener('click',function(e){var g=frameOf(e);if(g)zoom(g._i);});\n"
	"box.addEventListener('mouseover',function(e){var g=frameOf(e);if(g)det.textContent=\n"
	"g.firstElementChild.textContent.replace('\\n',' \\u2014 ');});\n"
	"box.addEventListener('mouseout',function(){det.textContent=' ';});\n"
	"unz.addEventListener('click',unzoom);\n"
	"sb.addEventListener('click',function(){if(term!==null)search(null);else ask();});\n"
	"document.addEventListener('keydown',function(e){\n"
	" if((e.ctrlKey||e.metaKey)&&e.key=='f'){e.preventDefault();ask();}\n"
	" else if(e.key=='Escape'){search(null);unzoom();}});\n"
	"window.bpfprofFlame={zoom:function(i){zoom(i);},unzoom:unzoom,search:search,\n"
	"frames:F,total:T,merged:HM};\n"
	"})();\n";

struct header {
	char line[MAX_COMMENT_LINES + 3][512];
	int n;
};

static void header_lines(struct svg_ctx *c, struct header *h)
{
	const struct profile *p = c->p;
	const struct pvaluetype *vt = &p->value_types[c->vi];
	char tot[96], extra[128] = "", when[64] = "", dur[64] = "";
	size_t i;

	fmt_value(tot, sizeof(tot), vt, c->total, true);
	/*
	 * a count of samples also stands for time (or bytes): the profile's value
	 * of the period's type where it has one (bpfprof's cpu: each sample
	 * weighs its thread's CPU time), else the count times the period
	 */
	if (p->period > 0 && p->period_type.unit && vt->unit && !strcmp(vt->unit, "count") &&
	    ns_per_unit(p->period_type.unit) > 0) {
		double v = (double)c->total * (double)p->period;
		char t[64];

		for (uint32_t j = 0; j < p->nvalues; j++) {
			const struct pvaluetype *pt = &p->value_types[j];

			if (!pt->type || !pt->unit || !p->period_type.type ||
			    strcmp(pt->type, p->period_type.type) ||
			    strcmp(pt->unit, p->period_type.unit))
				continue;
			v = 0;
			for (size_t i = 0; i < p->nsamples; i++)
				if (p->samples[i].values[j] > 0)
					v += (double)p->samples[i].values[j];
			break;
		}
		fmt_duration(t, sizeof(t), v * ns_per_unit(p->period_type.unit));
		snprintf(extra, sizeof(extra), " (\xe2\x89\x88 %s %s)", t,
			 p->period_type.type ? p->period_type.type : "");
	}
	if (p->duration_ns > 0) {
		char t[48];

		fmt_duration(t, sizeof(t), (double)p->duration_ns);
		snprintf(dur, sizeof(dur), " \xc2\xb7 over %s", t);
	}
	if (p->time_ns > 0) {
		time_t t = (time_t)(p->time_ns / 1000000000LL);
		struct tm tm;

		if (gmtime_r(&t, &tm))
			strftime(when, sizeof(when), " \xc2\xb7 %Y-%m-%d %H:%M:%S UTC", &tm);
	}
	h->n = 0;
	snprintf(h->line[h->n++], sizeof(h->line[0]), "Total: %s%s%s%s", tot, extra, dur, when);
	for (i = 0; i < p->ncomments && i < MAX_COMMENT_LINES; i++)
		snprintf(h->line[h->n++], sizeof(h->line[0]), "%s", p->comments[i]);
	if (p->ncomments > MAX_COMMENT_LINES)
		snprintf(h->line[h->n - 1], sizeof(h->line[0]), "(%zu more comment lines)",
			 p->ncomments - MAX_COMMENT_LINES + 1);
	if (c->hidden) {
		char nh[32];

		fmt_int(nh, sizeof(nh), c->hidden);
		snprintf(h->line[h->n++], sizeof(h->line[0]),
			 "%s frame%s narrower than %.3g%% of the width (%.2g px) merged into "
			 "their parents: %.2f%% of the total (zoom in to see them)",
			 nh, c->hidden == 1 ? "" : "s", c->min_frac * 100,
			 c->min_frac * (SVG_WIDTH - 2 * SVG_PAD),
			 c->total ? 100.0 * (double)c->hidden_value / (double)c->total : 0.0);
	}
}

static void emit_frame(struct svg_ctx *c, uint32_t i, double top, double scale)
{
	const struct node *n = &c->nodes[i];
	const struct sname *nm = &c->names[n->name];
	const struct pvaluetype *vt = &c->p->value_types[c->vi];
	double x = SVG_PAD + (double)n->offset * scale, w = (double)n->value * scale;
	double y = c->inverted ? top + n->depth * FRAME_H
			       : top + (double)(c->max_depth - n->depth) * FRAME_H;
	char val[96];
	int rgb[3];
	long maxch;
	size_t len;

	frame_colour(nm, n->depth, rgb);
	fmt_value(val, sizeof(val), vt, n->value, false);
	fprintf(c->out,
		"<g class=\"%s\" data-o=\"%" PRIu64 "\" data-v=\"%" PRIu64
		"\" data-d=\"%u\"><title>",
		n->depth && nm->kind < sizeof(kind_class) / sizeof(kind_class[0])
			? kind_class[nm->kind]
			: "r",
		n->offset, n->value, n->depth);
	put_text(c->out, nm->s, SIZE_MAX);
	fprintf(c->out,
		"\n%s (%.2f%%)</title><rect x=\"%.2f\" y=\"%.0f\" width=\"%.2f\" "
		"height=\"%d\" fill=\"rgb(%d,%d,%d)\"/>",
		val, c->total ? 100.0 * (double)n->value / (double)c->total : 0.0, x, y, w,
		FRAME_H - 1, rgb[0], rgb[1], rgb[2]);
	/* the same fit as the script's: whole name, or cut with "..", or nothing */
	maxch = (long)((w - 6) / CHAR_W);
	if (maxch >= 3) {
		len = utf8_chars(nm->s);
		fprintf(c->out, "<text x=\"%.2f\" y=\"%.0f\">", x + 3, y + 11);
		if (len <= (size_t)maxch) {
			put_text(c->out, nm->s, SIZE_MAX);
		} else {
			put_text(c->out, nm->s, (size_t)maxch - 2);
			fputs("..", c->out);
		}
		fputs("</text>", c->out);
	}
	fputs("</g>\n", c->out);
}

/* Depth-first, children in name order: the document reads like the folded file. */
static int emit_frames(struct svg_ctx *c, double top)
{
	double scale = c->total ? (double)(SVG_WIDTH - 2 * SVG_PAD) / (double)c->total : 0;
	uint32_t *stack, sp = 0, i, k, drawn = 0;

	if (!c->nodes[0].visible)
		return 0;
	stack = malloc(c->nnodes * sizeof(*stack));
	if (!stack)
		return -ENOMEM;
	stack[sp++] = 0;
	while (sp) {
		const struct node *n;

		i = stack[--sp];
		n = &c->nodes[i];
		c->ref[i] = drawn++;
		emit_frame(c, i, top, scale);
		for (k = n->nchild; k-- > 0;) {
			uint32_t ch = c->children[n->first + k];

			if (c->nodes[ch].visible)
				stack[sp++] = ch;
		}
	}
	free(stack);
	return 0;
}

/* A JSON string (the name of a merged frame), inside CDATA: "]]>" must not appear. */
static void put_json_str(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t n;

	fputc('"', f);
	while (*s) {
		if (*s == '"' || *s == '\\') {
			fprintf(f, "\\%c", *s++);
		} else if (*s < 0x20 || *s == '>' || *s == '<' || *s == '&') {
			fprintf(f, "\\u%04x", *s++);
		} else if ((n = utf8_seq(s))) {
			fwrite(s, 1, n, f);
			s += n;
		} else {
			fputs("\\ufffd", f);
			s++;
		}
	}
	fputc('"', f);
}

/*
 * The frames merged for being narrow, so that a search counts them and a
 * zoom draws those that become wide enough: {"names": [[name, class,
 * colour]...], "n": [parent, name, offset, value, ...]}, four numbers a
 * frame, parents before children; parent >= 0 is a merged frame, -1 - i
 * the i-th drawn one; offset is from the parent's left edge.
 */
static int emit_merged(struct svg_ctx *c)
{
	uint32_t *stack, *name_ref, sp = 0, i, k, nmerged = 0, nnames = 0;
	bool first = true;
	int rgb[3];

	stack = malloc(c->nnodes * sizeof(*stack));
	name_ref = malloc((c->nnames + 1) * sizeof(*name_ref));
	if (!stack || !name_ref) {
		free(stack);
		free(name_ref);
		return -ENOMEM;
	}
	for (i = 0; i < c->nnames; i++)
		name_ref[i] = UINT32_MAX;
	/* names first: one entry per name merged frames use */
	fputs("<script type=\"application/json\" id=\"merged\"><![CDATA[\n{\"names\":[", c->out);
	for (i = 1; i < c->nnodes; i++) {
		const struct sname *nm = &c->names[c->nodes[i].name];

		if (c->nodes[i].visible || name_ref[c->nodes[i].name] != UINT32_MAX)
			continue;
		name_ref[c->nodes[i].name] = nnames++;
		frame_colour(nm, 1, rgb);
		fputs(first ? "\n[" : ",\n[", c->out);
		first = false;
		put_json_str(c->out, nm->s);
		fprintf(c->out, ",\"%s\",\"rgb(%d,%d,%d)\"]",
			nm->kind < sizeof(kind_class) / sizeof(kind_class[0]) ? kind_class[nm->kind]
									      : "r",
			rgb[0], rgb[1], rgb[2]);
	}
	fputs("],\n\"n\":[", c->out);
	/* depth first from the root, children in name order: parents come first */
	first = true;
	if (c->nodes[0].visible)
		stack[sp++] = 0;
	while (sp) {
		const struct node *n = &c->nodes[stack[--sp]];

		for (k = n->nchild; k-- > 0;)
			stack[sp++] = c->children[n->first + k];
		if (n == c->nodes || n->visible)
			continue;
		i = (uint32_t)(n - c->nodes);
		c->ref[i] = nmerged++;
		fprintf(c->out, "%s%" PRId64 ",%u,%" PRIu64 ",%" PRIu64, first ? "" : ",",
			c->nodes[n->parent].visible ? -1 - (int64_t)c->ref[n->parent]
						    : (int64_t)c->ref[n->parent],
			name_ref[n->name], n->offset - c->nodes[n->parent].offset, n->value);
		if (nmerged % 8 == 0)
			fputc('\n', c->out);
		first = false;
	}
	fputs("]}\n]]></script>\n", c->out);
	free(stack);
	free(name_ref);
	return 0;
}

/* One swatch per kind drawn, centred on one row: what the colours mean. */
static void emit_legend(struct svg_ctx *c, double y)
{
	static const char *const label[] = {
		[FRAME_ROOT] = "process/thread", [FRAME_KERNEL] = "kernel",
		[FRAME_NATIVE] = "native",	 [FRAME_PYTHON] = "Python",
		[FRAME_CUDA] = "CUDA",
	};
	static const uint32_t order[] = { FRAME_ROOT, FRAME_NATIVE, FRAME_PYTHON, FRAME_KERNEL,
					  FRAME_CUDA };
	bool seen[FRAME_CUDA + 1] = { false };
	double width = 0, x;
	size_t i;
	int rgb[3];

	for (i = 1; i < c->nnodes; i++)
		if (c->nodes[i].visible && c->names[c->nodes[i].name].kind <= FRAME_CUDA)
			seen[c->names[c->nodes[i].name].kind] = true;
	for (i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		if (seen[order[i]])
			width += 16 + strlen(label[order[i]]) * CHAR_W + 14;
	x = (SVG_WIDTH - width) / 2;
	fputs("<g id=\"legend\">", c->out);
	for (i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		struct sname n = { .s = "", .kind = order[i] };

		if (!seen[order[i]])
			continue;
		frame_colour(&n, 1, rgb);
		fprintf(c->out,
			"<rect x=\"%.1f\" y=\"%.0f\" width=\"11\" height=\"11\" "
			"fill=\"rgb(%d,%d,%d)\"/><text x=\"%.1f\" y=\"%.0f\">%s</text>",
			x, y - 10, rgb[0], rgb[1], rgb[2], x + 16, y, label[order[i]]);
		x += 16 + strlen(label[order[i]]) * CHAR_W + 14;
	}
	fputs("</g>\n", c->out);
}

static int emit(struct svg_ctx *c, const char *title)
{
	struct header h;
	double top, height;
	int i, y;
	FILE *f = c->out;

	header_lines(c, &h);
	/* the legend has a row of its own below the summary */
	top = 44 + FRAME_H * (h.n + (c->total > 0));
	height = top + (double)(c->max_depth + 1) * FRAME_H + 28;
	fprintf(f,
		"<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
		"<svg version=\"1.1\" id=\"bpfprof-fg\" width=\"%d\" height=\"%.0f\" "
		"viewBox=\"0 0 %d %.0f\" xmlns=\"http://www.w3.org/2000/svg\" "
		"data-w=\"%d\" data-pad=\"%d\" data-cw=\"%.2f\" data-inv=\"%d\" "
		"data-hidden=\"%" PRIu64 "\" data-total=\"%" PRIu64 "\" data-top=\"%.0f\" "
		"data-fh=\"%d\" data-maxd=\"%u\" data-minw=\"%.4f\" data-vtype=\"",
		SVG_WIDTH, height, SVG_WIDTH, height, SVG_WIDTH, SVG_PAD, CHAR_W, c->inverted,
		c->hidden, c->total, top, FRAME_H, c->max_depth,
		c->min_frac * (SVG_WIDTH - 2 * SVG_PAD));
	svg__escape(f, c->p->value_types[c->vi].type ? c->p->value_types[c->vi].type : "samples");
	fputs("\" data-vunit=\"", f);
	svg__escape(f, c->p->value_types[c->vi].unit ? c->p->value_types[c->vi].unit : "count");
	fputs("\">\n", f);
	fprintf(f, "<style>\n%s</style>\n", svg_style);
	fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"#f8f8f4\"/>\n");
	fprintf(f, "<text id=\"title\" x=\"%d\" y=\"24\">", SVG_WIDTH / 2);
	svg__escape(f, title);
	fputs("</text>\n", f);
	fprintf(f, "<text id=\"unzoom\" class=\"btn hide\" x=\"%d\" y=\"24\">Reset Zoom</text>\n",
		SVG_PAD);
	fprintf(f,
		"<text id=\"search\" class=\"btn\" x=\"%d\" y=\"24\" "
		"style=\"text-anchor:end\">Search</text>\n",
		SVG_WIDTH - SVG_PAD);
	for (i = 0, y = 44; i < h.n; i++, y += FRAME_H) {
		fprintf(f, "<text class=\"sum\" x=\"%d\" y=\"%d\">", SVG_WIDTH / 2, y);
		svg__escape(f, h.line[i]);
		fputs("</text>\n", f);
	}
	if (!c->total)
		fprintf(f, "<text class=\"sum\" x=\"%d\" y=\"%.0f\">No samples</text>\n",
			SVG_WIDTH / 2, top + FRAME_H);
	fprintf(f, "<text id=\"details\" x=\"%d\" y=\"%.0f\"> </text>\n", SVG_PAD, height - 10);
	fprintf(f, "<text id=\"matched\" x=\"%d\" y=\"%.0f\" style=\"text-anchor:end\"></text>\n",
		SVG_WIDTH - SVG_PAD, height - 10);
	emit_legend(c, top - 12);
	fputs("<g id=\"frames\">\n", f);
	if (emit_frames(c, top))
		return -ENOMEM;
	fputs("</g>\n", f);
	if (emit_merged(c))
		return -ENOMEM;
	fputs("<script type=\"text/javascript\"><![CDATA[\n", f);
	fputs(svg_script, f);
	fputs("]]></script>\n</svg>\n", f);
	return 0;
}

int svg__write(const struct profile *p, const struct svg_opts *o, FILE *out)
{
	struct svg_ctx c = { .p = p, .out = out };
	const char *title;
	int err;

	if (!p || !out || !p->nvalues)
		return -EINVAL;
	c.vi = p->default_value < p->nvalues ? p->default_value : 0;
	c.inverted = o && o->inverted;
	c.min_frac = o && o->min_frac > 0 ? o->min_frac : MIN_FRAC_DEFAULT;
	title = o && o->title ? o->title : c.inverted ? "Icicle Graph" : "Flame Graph";
	err = build_tree(&c);
	if (!err)
		err = layout(&c);
	if (!err && !(c.ref = calloc(c.nnodes, sizeof(*c.ref))))
		err = -ENOMEM;
	if (!err) {
		errno = 0;
		err = emit(&c, title);
	}
	if (!err && (fflush(out) || ferror(out)))
		err = errno ? -errno : -EIO;
	free(c.ref);
	free(c.children);
	free(c.nodes);
	htab__free(c.edges);
	free(c.frame_name);
	free(c.names);
	htab__free(c.name_ids);
	return err;
}

/* Device memory by kind: see rt_backend.h. A rank holds few device buffers
 * (tens: parameters, slots, packs, scratch), so a list searched from the end
 * is enough; each entry keeps its bytes per kind, so a buffer can be split
 * between kinds (the scratch whose front holds a recomputed layer). */
#include "rt_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_init.h"

struct entry {
  const void *p;
  int64_t bytes[RT_MEM_NKINDS];
  enum rt_mem_kind last; /* the kind tagged last: retag moves from it first */
};

static struct {
  struct entry *items;
  int n, cap;
  struct rt_mem_figures f;
  enum rt_mem_kind default_kind; /* 0 is WEIGHTS: see default_kind() */
  bool default_set;
} g_mem;

static const char *const kind_names[RT_MEM_NKINDS] = {
    "weights", "gradients", "optimizer", "activations", "recompute", "comm", "workspace"};

const char *rt_mem_kind_name(enum rt_mem_kind kind) {
  return kind >= 0 && kind < RT_MEM_NKINDS ? kind_names[kind] : "unknown";
}

enum rt_mem_kind rt_mem_default_kind(void) {
  return g_mem.default_set ? g_mem.default_kind : RT_MEM_WORKSPACE;
}

void rt_mem_set_default_kind(enum rt_mem_kind kind) {
  g_mem.default_kind = kind;
  g_mem.default_set = true;
}

static struct entry *find(const void *p) {
  for (int i = g_mem.n - 1; i >= 0; i--)
    if (g_mem.items[i].p == p)
      return &g_mem.items[i];
  return NULL;
}

/* current[kind] += delta, and the peaks. */
static void add(enum rt_mem_kind kind, int64_t delta) {
  struct rt_mem_figures *f = &g_mem.f;
  f->current[kind] += delta;
  f->current_total += delta;
  if (f->current[kind] > f->peak[kind])
    f->peak[kind] = f->current[kind];
  if (f->current_total > f->peak_total)
    f->peak_total = f->current_total;
}

void rt_mem_count(const void *p, size_t bytes, enum rt_mem_kind kind) {
  if (g_mem.n == g_mem.cap) {
    int cap = g_mem.cap ? 2 * g_mem.cap : 64;
    struct entry *grown = realloc(g_mem.items, (size_t)cap * sizeof *grown);
    if (!grown)
      hx_rt_fatal(HX_RT_EXIT_ERROR, "out of host memory counting device buffers");
    g_mem.items = grown;
    g_mem.cap = cap;
  }
  struct entry *e = &g_mem.items[g_mem.n++];
  memset(e, 0, sizeof *e);
  e->p = p;
  e->bytes[kind] = (int64_t)bytes;
  e->last = kind;
  add(kind, (int64_t)bytes);
}

void rt_mem_uncount(const void *p) {
  struct entry *e = find(p);
  if (!e)
    return;
  for (int k = 0; k < RT_MEM_NKINDS; k++)
    add((enum rt_mem_kind)k, -e->bytes[k]);
  *e = g_mem.items[--g_mem.n];
}

/* Takes up to want bytes of e's kind `from` into `to`; returns what it took. */
static int64_t move(struct entry *e, int from, enum rt_mem_kind to, int64_t want) {
  int64_t took = e->bytes[from] < want ? e->bytes[from] : want;
  e->bytes[from] -= took;
  e->bytes[to] += took;
  add((enum rt_mem_kind)from, -took);
  add(to, took);
  return took;
}

void rt_mem_retag(const void *p, size_t bytes, enum rt_mem_kind kind) {
  struct entry *e = find(p);
  if (!e)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "internal: tagging a device buffer that was never allocated");
  int64_t want = bytes > (size_t)INT64_MAX ? INT64_MAX : (int64_t)bytes;
  if (e->last != kind)
    want -= move(e, (int)e->last, kind, want);
  for (int k = 0; k < RT_MEM_NKINDS && want > 0; k++)
    if (k != (int)kind)
      want -= move(e, k, kind, want);
  e->last = kind;
}

void rt_mem_reset_peaks(void) {
  struct rt_mem_figures *f = &g_mem.f;
  memcpy(f->peak, f->current, sizeof f->peak);
  f->peak_total = f->current_total;
}

void rt_mem_figures(struct rt_mem_figures *out) { *out = g_mem.f; }

int rt_mem_format_line(char *buf, size_t size, const struct rt_mem_figures *f) {
  const double mib = 1024.0 * 1024.0;
  int n = snprintf(buf, size, "peak MiB:");
  for (int k = 0; k < RT_MEM_NKINDS && n >= 0 && (size_t)n < size; k++)
    n += snprintf(buf + n, size - (size_t)n, " %s %.3f,", kind_names[k], (double)f->peak[k] / mib);
  if (n >= 0 && (size_t)n < size)
    n += snprintf(buf + n, size - (size_t)n, " total %.3f", (double)f->peak_total / mib);
  return n;
}

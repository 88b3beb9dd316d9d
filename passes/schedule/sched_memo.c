/* A memo from int keys to values, in an arena: open addressing, linear
 * probing, grown at half full. The searches key skeletons, groupings,
 * pools and completion pieces by their ints; nothing is ever removed. */
#include <string.h>

#include "sched.h"

static uint64_t hash_ints(const int *key, int n) {
  uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)n;
  for (int i = 0; i < n; i++) {
    h ^= (uint64_t)(uint32_t)key[i];
    h *= 0x100000001b3ull;
  }
  return h ^ (h >> 29);
}

static void memo_grow(struct hx_arena *a, struct hx_sched_memo *m) {
  int cap = m->cap ? 2 * m->cap : m->first_cap > 0 ? m->first_cap : 1024;
  struct hx_sched_memo_entry *e = HX_NEW_ARRAY(a, struct hx_sched_memo_entry, cap);
  for (int i = 0; i < m->cap; i++) {
    if (!m->e[i].key)
      continue;
    int at = (int)(m->e[i].hash & (uint64_t)(cap - 1));
    while (e[at].key)
      at = (at + 1) & (cap - 1);
    e[at] = m->e[i];
  }
  m->e = e;
  m->cap = cap;
}

struct hx_sched_memo_entry *hx_sched_memo_get(struct hx_arena *a, struct hx_sched_memo *m,
                                              const int *key, int n) {
  if (2 * (m->n + 1) > m->cap)
    memo_grow(a, m);
  uint64_t h = hash_ints(key, n);
  int at = (int)(h & (uint64_t)(m->cap - 1));
  for (;; at = (at + 1) & (m->cap - 1)) {
    struct hx_sched_memo_entry *e = &m->e[at];
    if (!e->key) {
      e->hash = h;
      e->n = n;
      e->key = HX_NEW_ARRAY(a, int, n > 0 ? n : 1);
      memcpy(e->key, key, sizeof(int) * (size_t)n);
      m->n++;
      return e;
    }
    if (e->hash == h && e->n == n && !memcmp(e->key, key, sizeof(int) * (size_t)n))
      return e;
  }
}

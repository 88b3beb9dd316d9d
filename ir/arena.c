#include "arena.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { HX_ARENA_CHUNK = 64 * 1024 };

struct hx_arena_block {
  struct hx_arena_block *next;
  size_t size; /* usable bytes after the header */
  size_t used;
  _Alignas(16) unsigned char data[];
};

static void out_of_memory(size_t size) {
  fprintf(stderr, "hexic: internal error: out of memory allocating %zu bytes\n", size);
  exit(70);
}

void hx_arena_init(struct hx_arena *a) { memset(a, 0, sizeof *a); }

void hx_arena_free(struct hx_arena *a) {
  struct hx_arena_block *b = a->head;
  while (b) {
    struct hx_arena_block *next = b->next;
    free(b);
    b = next;
  }
  memset(a, 0, sizeof *a);
}

void hx_arena_reset(struct hx_arena *a) {
  struct hx_arena_block *b = a->head;
  if (b && !b->next) {
    b->used = 0;
    return;
  }
  size_t total = hx_arena_reserved(a);
  hx_arena_free(a);
  if (!total)
    return;
  b = malloc(sizeof *b + total);
  if (!b)
    out_of_memory(total);
  b->next = NULL;
  b->size = total;
  b->used = 0;
  a->head = b;
}

size_t hx_arena_reserved(const struct hx_arena *a) {
  size_t total = 0;
  for (const struct hx_arena_block *b = a->head; b; b = b->next)
    total += b->size;
  return total;
}

void *hx_alloc(struct hx_arena *a, size_t size) {
  size_t rounded = (size + 15u) & ~(size_t)15u;
  if (rounded < size || rounded > SIZE_MAX - sizeof(struct hx_arena_block))
    out_of_memory(size);
  struct hx_arena_block *b = a->head;
  if (!b || b->size - b->used < rounded) {
    size_t cap = rounded > HX_ARENA_CHUNK ? rounded : HX_ARENA_CHUNK;
    b = malloc(sizeof *b + cap);
    if (!b)
      out_of_memory(size);
    b->size = cap;
    b->used = 0;
    b->next = a->head;
    a->head = b;
  }
  void *p = b->data + b->used;
  b->used += rounded;
  memset(p, 0, rounded);
  return p;
}

void *hx_alloc_array(struct hx_arena *a, size_t count, size_t elem_size) {
  if (elem_size && count > SIZE_MAX / elem_size)
    out_of_memory(SIZE_MAX);
  size_t bytes = count * elem_size;
  return hx_alloc(a, bytes ? bytes : 1);
}

char *hx_strndup(struct hx_arena *a, const char *s, size_t n) {
  char *p = hx_alloc(a, n + 1);
  memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

char *hx_strdup(struct hx_arena *a, const char *s) { return hx_strndup(a, s, strlen(s)); }

char *hx_sprintf(struct hx_arena *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0)
    n = 0;
  char *p = hx_alloc(a, (size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(p, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return p;
}

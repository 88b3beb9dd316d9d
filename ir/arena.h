/* One arena per compilation: every AST and IR node lives until the end of the
 * run, so nothing is freed piecemeal and nothing can dangle. */
#ifndef HX_ARENA_H
#define HX_ARENA_H

#include <stddef.h>

struct hx_arena_block;

struct hx_arena {
  struct hx_arena_block *head;
};

void hx_arena_init(struct hx_arena *a);
void hx_arena_free(struct hx_arena *a);
/* Empties the arena but keeps its memory for what is allocated next, as
 * one block as large as all of it was: an arena refilled with about as
 * much again (a simulator's scratch, once per simulated plan) then costs
 * no malloc, no free and no page faults. */
void hx_arena_reset(struct hx_arena *a);
/* The bytes the arena holds from malloc, used or not. */
size_t hx_arena_reserved(const struct hx_arena *a);
/* Zeroed, 16-byte aligned; aborts with exit code 70 on out-of-memory. */
void *hx_alloc(struct hx_arena *a, size_t size);
void *hx_alloc_array(struct hx_arena *a, size_t count, size_t elem_size);
char *hx_strdup(struct hx_arena *a, const char *s);
char *hx_strndup(struct hx_arena *a, const char *s, size_t n);
char *hx_sprintf(struct hx_arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define HX_NEW(a, T) ((T *)hx_alloc((a), sizeof(T)))
#define HX_NEW_ARRAY(a, T, n) ((T *)hx_alloc_array((a), (size_t)(n), sizeof(T)))

#endif

/* Which GPU a rank takes, whether it is the GPU the plan assumed, and
 * whether the plan's memory fits on it: pure rules (device_cuda.c asks
 * CUDA and applies them). */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "rtlib/cuda/cuda_backend.h"

int rt_cuda_pick_device(int local_rank, int device_count) {
  if (device_count <= 0 || local_rank < 0)
    return 0;
  return local_rank % device_count;
}

/* Upper-case letters and digits of s, the rest dropped; false when they do
 * not fit. */
static bool squeeze(const char *s, char *out, size_t size) {
  size_t k = 0;
  for (; *s; s++) {
    if (!isalnum((unsigned char)*s))
      continue;
    if (k + 1 >= size)
      return false;
    out[k++] = (char)toupper((unsigned char)*s);
  }
  out[k] = 0;
  return true;
}

/* Whether the words of name, joined (separators skipped), start with want
 * and want ends where a word ends. */
static bool words_match(const char *name, const char *want) {
  const char *w = want;
  for (const char *p = name; *p && *w; p++) {
    if (!isalnum((unsigned char)*p))
      continue;
    if (toupper((unsigned char)*p) != *w)
      return false;
    w++;
    if (!*w) /* the type ends here: so must the word */
      return !isalnum((unsigned char)p[1]);
  }
  return false;
}

bool rt_cuda_name_matches(const char *device_name, const char *plan_type) {
  char want[128];
  if (!plan_type || !squeeze(plan_type, want, sizeof want) || !want[0])
    return true; /* nothing to compare (or a type too long to be a GPU's) */
  if (!device_name)
    return false;
  for (const char *p = device_name; *p; p++) {
    bool word_start =
        isalnum((unsigned char)*p) && (p == device_name || !isalnum((unsigned char)p[-1]));
    if (word_start && words_match(p, want))
      return true;
  }
  return false;
}

int rt_cuda_pick_transport(const char *want, bool have_nccl, bool shared, char *note,
                           size_t note_size) {
  note[0] = 0;
  if (!want || strcmp(want, "mpi") == 0)
    return RT_CUDA_STAGED;
  if (strcmp(want, "nccl") != 0) {
    snprintf(note, note_size, "HEXIC_TRANSPORT='%s' is neither nccl nor mpi", want);
    return -1;
  }
  if (!have_nccl) {
    snprintf(note, note_size,
             "HEXIC_TRANSPORT=nccl, but this program was built without NCCL (build it with "
             "make TRANSPORT=nccl)");
    return -1;
  }
  if (shared) {
    snprintf(note, note_size,
             "ranks share a GPU here (more ranks than GPUs on a machine), which NCCL "
             "refuses");
    return RT_CUDA_STAGED;
  }
  return RT_CUDA_NCCL;
}

static double gib(int64_t bytes) { return (double)bytes / (1024.0 * 1024.0 * 1024.0); }

bool rt_cuda_memory_fits(int64_t needed, int64_t free_bytes, int64_t total_bytes, int device,
                         const char *device_name, char *msg, size_t msg_size) {
  if (needed <= 0 || needed <= free_bytes)
    return true;
  snprintf(msg, msg_size,
           "not enough device memory: the plan assumes this rank needs %.2f GiB, device %d (%s) "
           "has %.2f GiB free of %.2f GiB; free the GPU (other processes?) or plan with the "
           "GPU's real memory (smaller micro-batches, recompute, more stages)",
           gib(needed), device, device_name ? device_name : "?", gib(free_bytes),
           gib(total_bytes));
  return false;
}

/* rt_shard_check TEXT SHARD: SHARD must be a byte-level llm.c shard
 * (magic 20240520, uint16, vocab 256) holding exactly the bytes of TEXT. */
#include <stdio.h>

#include "rtlib/rt_data.h"

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: rt_shard_check TEXT SHARD\n");
    return 2;
  }
  char err[512];
  struct hx_rt_data d;
  if (!hx_rt_data_open(&d, argv[2], HX_DATA_SHARD, 256, 1, 0, err, sizeof err)) {
    fprintf(stderr, "rt_shard_check: %s\n", err);
    return 1;
  }
  FILE *f = fopen(argv[1], "rb");
  int64_t k = 0;
  int c, bad = d.kind != HX_DATA_KIND_SHARD_U16;
  while (f && (c = fgetc(f)) != EOF && !bad)
    bad = k >= d.ntokens || hx_rt_data_token(&d, k++) != (uint32_t)c;
  bad = bad || !f || k != d.ntokens;
  if (f)
    fclose(f);
  hx_rt_data_close(&d);
  if (bad) {
    fprintf(stderr, "rt_shard_check: %s does not hold the bytes of %s\n", argv[2], argv[1]);
    return 1;
  }
  printf("rt_shard_check: %lld tokens match\n", (long long)k);
  return 0;
}

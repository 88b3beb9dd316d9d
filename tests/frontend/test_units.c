/* Unit tests: unit scaling and number literals (ir/units.c), the
 * device-to-device bandwidth/latency table (passes/cluster_table.c), and the
 * scanner's size limit (grammar/lexer.l). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/parse_state.h"
#include "ir/units.h"
#include "passes/frontend.h"
#include "passes/passes.h"

#include "tests/check.h"

static bool near(double a, double b) { return fabs(a - b) <= 1e-12 * fabs(b); }

static void test_unit_table(void) {
  static const struct {
    const char *name;
    enum hx_unit_kind kind;
    double scale;
  } want[] = {
      {"B", HX_UNIT_BYTES, 1},           {"KB", HX_UNIT_BYTES, 1e3},          {"GB", HX_UNIT_BYTES, 1e9},
      {"TB", HX_UNIT_BYTES, 1e12},       {"KiB", HX_UNIT_BYTES, 1024},        {"MiB", HX_UNIT_BYTES, 1048576},
      {"GiB", HX_UNIT_BYTES, 1073741824}, {"TiB", HX_UNIT_BYTES, 1099511627776.0},
      {"B/s", HX_UNIT_BANDWIDTH, 1},     {"GB/s", HX_UNIT_BANDWIDTH, 1e9},    {"GiB/s", HX_UNIT_BANDWIDTH, 1073741824},
      {"bps", HX_UNIT_BANDWIDTH, 0.125}, {"Kbps", HX_UNIT_BANDWIDTH, 125},    {"Mbps", HX_UNIT_BANDWIDTH, 125000},
      {"Gbps", HX_UNIT_BANDWIDTH, 1.25e8}, {"ns", HX_UNIT_TIME, 1e-9},        {"us", HX_UNIT_TIME, 1e-6},
      {"ms", HX_UNIT_TIME, 1e-3},        {"s", HX_UNIT_TIME, 1},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    enum hx_unit_kind kind = HX_UNIT_NONE;
    double scale = 0;
    CHECK(hx_unit_lookup(want[i].name, &kind, &scale));
    CHECK(kind == want[i].kind);
    CHECK(near(scale, want[i].scale));
  }
  enum hx_unit_kind kind;
  double scale;
  CHECK(!hx_unit_lookup("gb", &kind, &scale)); /* case matters: Mb is not MB */
  CHECK(!hx_unit_lookup("Gib", &kind, &scale));
  CHECK(!strcmp(hx_unit_nearest("Gib"), "GiB"));
  CHECK(!strcmp(hx_unit_nearest("gbps"), "Gbps"));
}

static void test_literals(void) {
  struct hx_value v;
  memset(&v, 0, sizeof v);
  hx_number_literal("80", &v);
  CHECK(v.is_integer && v.integer == 80 && v.number == 80 && !v.overflow);
  hx_apply_unit(&v, "GiB", HX_UNIT_BYTES, 1073741824.0);
  CHECK(v.number == 80.0 * 1073741824.0 && v.unit == HX_UNIT_BYTES && !strcmp(v.unit_text, "GiB"));
  /* a time unit gives the double nearest to what was written: 20 us is
   * exactly the double 2e-05 (20 * 1e-6 is 1.9999999999999998e-05) */
  const char *times[][3] = {{"20", "us", "2e-05"}, {"2", "us", "2e-06"}, {"0.3", "ms", "0.0003"},
                            {"7", "ns", "7e-09"}, {"1.5", "us", "1.5e-06"}};
  for (size_t k = 0; k < sizeof times / sizeof times[0]; k++) {
    memset(&v, 0, sizeof v);
    hx_number_literal(times[k][0], &v);
    enum hx_unit_kind kind;
    double scale;
    CHECK(hx_unit_lookup(times[k][1], &kind, &scale));
    hx_apply_unit(&v, times[k][1], kind, scale);
    CHECK(v.number == strtod(times[k][2], NULL));
  }
  memset(&v, 0, sizeof v);
  hx_number_literal("3e-4", &v);
  CHECK(!v.is_integer && near(v.number, 3e-4));
  memset(&v, 0, sizeof v);
  hx_number_literal("-2", &v);
  CHECK(v.is_integer && v.integer == -2);
  memset(&v, 0, sizeof v);
  hx_number_literal("9223372036854775808", &v); /* INT64_MAX + 1 */
  CHECK(v.overflow && !v.is_integer);
  memset(&v, 0, sizeof v);
  hx_number_literal("1e999", &v);
  CHECK(v.overflow);
  memset(&v, 0, sizeof v);
  hx_number_literal("1e308", &v);
  hx_apply_unit(&v, "TB", HX_UNIT_BYTES, 1e12);
  CHECK(v.overflow); /* scaling overflowed */
}

/* Three replicas of r (2 GPUs each) and one single-GPU node s: base-name
 * links, a replica-specific link, a self link between replicas, and the
 * network for what no link names. */
static const char cluster_src[] =
    "model \"m\" { layers = 2; hidden = 64; ffn = 128; heads = 4; vocab = 100; seq_len = 32 }\n"
    "train { global_batch = 8 }\n"
    "gpu \"G\" { tflops = 10; memory = 1 GiB }\n"
    "node \"r\" { gpu = \"G\"; gpus = 2; bandwidth = 10 GB/s; latency = 1 us; replicas = 3 }\n"
    "node \"s\" { gpu = \"G\"; gpus = 1 }\n"
    "node \"t\" { gpu = \"G\"; gpus = 1 }\n"
    "link \"r\" \"s\" { bandwidth = 2 GB/s; latency = 5 us }\n"
    "link \"s\" \"r-1\" { bandwidth = 3 GB/s; latency = 4 us }\n"
    "link \"r\" \"r\" { bandwidth = 4 GB/s; latency = 3 us }\n"
    "link \"r-0\" \"r-2\" { bandwidth = 5 GB/s; latency = 2 us }\n"
    "network { bandwidth = 1 Gbps; latency = 200 us }\n";

static void test_table(void) {
  struct hx_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  hx_arena_init(&ctx.arena);
  hx_diag_reset();
  hx_add_source(&ctx, "table.hx", cluster_src, sizeof cluster_src - 1);
  CHECK(hx_parse_sources(&ctx));
  CHECK(hx_pass_sema(&ctx));
  CHECK(hx_pass_cluster_table(&ctx));
  CHECK(hx_error_count() == 0);
  const struct hx_cluster *c = &ctx.cluster;
  /* ranks: r-0 {0,1}, r-1 {2,3}, r-2 {4,5}, s {6}, t {7} */
  CHECK(c->ndevices == 8 && c->nnodes == 5);
  if (c->ndevices == 8 && c->bandwidth) {
    CHECK(!strcmp(c->devices[3].name, "r-1:1") && !strcmp(c->devices[6].name, "s:0"));
    CHECK(hx_bw(c, 0, 0) == 0 && near(hx_lat(c, 0, 0), 0));
    CHECK(hx_bw(c, 0, 1) == 10e9 && near(hx_lat(c, 0, 1), 1e-6)); /* inside r-0 */
    CHECK(hx_bw(c, 0, 6) == 2e9 && near(hx_lat(c, 6, 0), 5e-6));  /* r-0 to s: base-name link */
    CHECK(hx_bw(c, 2, 6) == 3e9 && near(hx_lat(c, 3, 6), 4e-6));  /* r-1 to s: the replica link wins */
    CHECK(hx_bw(c, 0, 2) == 4e9 && near(hx_lat(c, 2, 1), 3e-6));  /* r-0 to r-1: self link */
    CHECK(hx_bw(c, 1, 5) == 5e9 && near(hx_lat(c, 4, 0), 2e-6));  /* r-0 to r-2: more specific */
    CHECK(hx_bw(c, 6, 7) == 1.25e8 && near(hx_lat(c, 7, 6), 200e-6)); /* s to t: network */
    CHECK(hx_bw(c, 0, 7) == 1.25e8);
  }
  hx_arena_free(&ctx.arena);
}

/* A source longer than flex's int length is refused before scanning (the
 * text is never read, so a short buffer stands in for it). */
static void test_too_large(void) {
  FILE *devnull = fopen("/dev/null", "w");
  CHECK(devnull != NULL);
  hx_diag_set_stream(devnull);
  hx_diag_reset();
  struct hx_arena a;
  hx_arena_init(&a);
  struct hx_source src = {.name = "big.hx", .text = "model", .len = (long)INT_MAX};
  struct hx_ast ast = {NULL, NULL};
  hx_parse_file(&a, &src, &ast);
  CHECK(hx_error_count() == 1 && ast.first == NULL);
  hx_arena_free(&a);
  hx_diag_set_stream(NULL);
  if (devnull)
    fclose(devnull);
}

int main(void) {
  test_unit_table();
  test_literals();
  test_table();
  test_too_large();
  if (failures)
    fprintf(stderr, "%d check(s) failed\n", failures);
  return failures ? 1 : 0;
}

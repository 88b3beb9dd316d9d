/* trace.json: the simulated iteration in Chrome Trace Event format (loads in
 * Perfetto and chrome://tracing): one process, one track (tid) per device,
 * named by metadata events; complete events ("ph": "X") in microseconds. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/text/json.h"
#include "passes/cost/cost.h"
#include "codegen.h"

/* Durations as hx_json_number writes them, remembered by their bits: an op
 * of one stage lasts the same in every micro-batch, so a trace of 200,000
 * events holds a few hundred durations, where each shortest round-trip
 * decimal costs up to three formatted prints and a strtod. */
enum { DUR_CACHE = 1024 };

struct dur_cache {
  uint64_t bits[DUR_CACHE];
  bool used[DUR_CACHE];
  char text[DUR_CACHE][32];
};

static void write_duration(struct dur_cache *c, FILE *f, double v) {
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  size_t slot = (size_t)((bits * 0x9e3779b97f4a7c15u) >> 54); /* 10 bits: DUR_CACHE */
  if (!c->used[slot] || c->bits[slot] != bits) {
    FILE *mem = fmemopen(c->text[slot], sizeof c->text[slot], "w");
    if (!mem)
      hx_internal_error("out of memory writing trace.json");
    hx_json_number(mem, v);
    fclose(mem);
    c->bits[slot] = bits;
    c->used[slot] = true;
  }
  fputs(c->text[slot], f);
}

static void write_event(const struct hx_sim_event *e, struct dur_cache *durations, FILE *f) {
  fputs("  {\"name\": ", f);
  if (e->kind == HX_EV_ALLREDUCE && e->layer < 0)
    fputs("\"all-reduce emb/head\"", f);
  else if (e->kind == HX_EV_ALLREDUCE)
    fprintf(f, "\"all-reduce layer %d\"", e->layer);
  else if (e->micro_batch >= 0)
    fprintf(f, "\"%s mb%d\"", hx_sim_event_name(e->kind), e->micro_batch);
  else
    hx_json_string(f, hx_sim_event_name(e->kind));
  fprintf(f, ", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": 0, \"tid\": %d, \"ts\": ",
          hx_sim_event_name(e->kind), e->rank);
  hx_json_number(f, e->start_s * 1e6);
  fputs(", \"dur\": ", f);
  write_duration(durations, f, (e->end_s - e->start_s) * 1e6);
  fprintf(f, ", \"args\": {\"pipeline\": %d, \"stage\": %d, \"micro_batch\": %d, \"layer\": %d, "
             "\"peer\": %d}}",
          e->pipeline, e->stage, e->micro_batch, e->layer, e->peer);
}

/* The most events trace.json holds (about 250 bytes each: some 50 MB).
 * The simulator makes several per micro-batch and device: a 16M-sequence
 * batch on 8 devices made 920 MB of trace. Past the limit the trace keeps
 * the iteration's beginning (every event that starts before a cut time,
 * on every device) and ends with an event that says where and why it was
 * cut; hexic says so on stderr too. */
enum { HX_TRACE_MAX_EVENTS = 200000 };

static void swap_double(double *a, double *b) {
  double t = *a;
  *a = *b;
  *b = t;
}

/* The k-th smallest of v[0..n) (0-based), as v sorted would hold it:
 * Hoare's selection, O(n) on average where sorting 12 million start times
 * (a 1024-GPU plan's) took a second. v is reordered. */
static double select_kth(double *v, int n, int k) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2; /* median of three: no quadratic case on sorted input */
    if (v[mid] < v[lo])
      swap_double(&v[mid], &v[lo]);
    if (v[hi] < v[lo])
      swap_double(&v[hi], &v[lo]);
    if (v[hi] < v[mid])
      swap_double(&v[hi], &v[mid]);
    double pivot = v[mid];
    int i = lo, j = hi;
    while (i <= j) {
      while (v[i] < pivot)
        i++;
      while (pivot < v[j])
        j--;
      if (i <= j)
        swap_double(&v[i++], &v[j--]);
    }
    if (k <= j)
      hi = j;
    else if (k >= i)
      lo = i;
    else
      return v[k]; /* between j and i: equal to the pivot */
  }
  return v[k];
}

/* The time before which at most HX_TRACE_MAX_EVENTS events start;
 * INFINITY when every event fits. */
static double trace_cut_s(const struct hx_sim_event *ev, int n) {
  if (n <= HX_TRACE_MAX_EVENTS)
    return INFINITY;
  double *starts = malloc(sizeof(double) * (size_t)n);
  if (!starts)
    hx_internal_error("out of memory writing trace.json");
  for (int e = 0; e < n; e++)
    starts[e] = ev[e].start_s;
  /* events at this time or later are left out */
  double cut = select_kth(starts, n, HX_TRACE_MAX_EVENTS);
  free(starts);
  return cut;
}

/* The last event of a cut trace: an instant on track 0 at the cut. */
static void write_cut_note(const struct hx_ctx *ctx, FILE *f, double cut, int written, int all) {
  const char *why = hx_sprintf((struct hx_arena *)&ctx->arena,
                               "trace cut at %.6g s: %d of %d events (the limit is %d)", cut,
                               written, all, (int)HX_TRACE_MAX_EVENTS);
  fputs(",\n  {\"name\": ", f);
  hx_json_string(f, why);
  fputs(", \"cat\": \"cut\", \"ph\": \"i\", \"s\": \"g\", \"pid\": 0, \"tid\": 0, \"ts\": ", f);
  hx_json_number(f, cut * 1e6);
  fputs("}", f);
  fprintf(stderr,
          "hexic: note: trace.json holds the first %.6g s of the %.6g s iteration: %d of its %d "
          "simulated events (the most it holds is %d)\n",
          cut, ctx->plan->sim.iteration_s, written, all, (int)HX_TRACE_MAX_EVENTS);
}

bool hx_emit_trace(const struct hx_ctx *ctx, const struct hx_sim_options *sim, FILE *f) {
  const struct hx_plan *plan = ctx->plan;
  const struct hx_sim_options o = *sim;
  fputs("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n", f);
  fputs("  {\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": {\"name\": ", f);
  hx_json_string(f, plan->description ? plan->description : plan->strategy);
  fputs("}}", f);
  for (int r = 0; r < ctx->cluster.ndevices; r++) {
    fprintf(f, ",\n  {\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": %d, "
               "\"args\": {\"name\": ",
            r);
    hx_json_string(f, hx_sprintf((struct hx_arena *)&ctx->arena, "%d %s", r,
                                 ctx->cluster.devices[r].name));
    fputs("}}", f);
    fprintf(f, ",\n  {\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": 0, \"tid\": %d, "
               "\"args\": {\"sort_index\": %d}}",
            r, r);
  }
  double cut = trace_cut_s(o.events, o.nevents);
  int written = 0;
  struct dur_cache *durations = calloc(1, sizeof *durations);
  if (!durations)
    hx_internal_error("out of memory writing trace.json");
  for (int e = 0; e < o.nevents; e++) {
    if (!(o.events[e].start_s < cut))
      continue;
    fputs(",\n", f);
    write_event(&o.events[e], durations, f);
    written++;
  }
  free(durations);
  if (written < o.nevents)
    write_cut_note(ctx, f, cut, written, o.nevents);
  fputs("\n]}\n", f);
  return !ferror(f);
}

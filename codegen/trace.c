/* trace.json: the simulated iteration in Chrome Trace Event format (loads in
 * Perfetto and chrome://tracing): one process, one track (tid) per device,
 * named by metadata events; complete events ("ph": "X") in microseconds. */
#include "ir/text/json.h"
#include "passes/cost/cost.h"
#include "codegen.h"

static void write_event(const struct hx_sim_event *e, FILE *f) {
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
  hx_json_number(f, (e->end_s - e->start_s) * 1e6);
  fprintf(f, ", \"args\": {\"pipeline\": %d, \"stage\": %d, \"micro_batch\": %d, \"layer\": %d, "
             "\"peer\": %d}}",
          e->pipeline, e->stage, e->micro_batch, e->layer, e->peer);
}

bool hx_emit_trace(const struct hx_ctx *ctx, FILE *f) {
  /* Re-simulate with recording on: the pass itself keeps no events. */
  struct hx_plan *plan = ctx->plan;
  struct hx_sim_options o = {.record_events = true, .arena = (struct hx_arena *)&ctx->arena};
  hx_simulate(ctx, plan, &o);
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
  for (int e = 0; e < o.nevents; e++) {
    fputs(",\n", f);
    write_event(&o.events[e], f);
  }
  fputs("\n]}\n", f);
  return !ferror(f);
}

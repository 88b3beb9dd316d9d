/* The discrete-event simulator of one training iteration.
 *
 * The iteration is a graph of tasks, each holding one or more resources for
 * its duration:
 *   - a stage's compute (its TP group runs in lockstep): forward and backward
 *     of every micro-batch, in the order 1F1B (or GPipe) prescribes, then the
 *     optimizer step;
 *   - a directed leader-to-leader link per pipeline hop: activation sends
 *     forward, gradient sends backward (a hop includes the broadcast inside
 *     the receiving TP group);
 *   - one data-parallel channel per device: gradient all-reduces, one per
 *     decoder layer (and one for the embedding/head), started as soon as the
 *     layer's last backward is done in every pipeline, so they overlap the
 *     rest of the backward.
 * A priority queue of completion events (time, then task id: deterministic)
 * drives it; a task starts when its dependencies are done and it is first in
 * line on every resource it needs. Costs come from ir/cost.h only. */
#ifndef HX_SIM_H
#define HX_SIM_H

#include <stdbool.h>

#include "hexic.h"

enum hx_sim_event_kind {
  HX_EV_FORWARD,
  HX_EV_BACKWARD,
  HX_EV_SEND,      /* on the sending leader */
  HX_EV_RECV,      /* on the receiving leader (includes its TP broadcast) */
  HX_EV_ALLREDUCE, /* gradient all-reduce, on every member */
  HX_EV_OPTIMIZER,
};

/* One span on one device's timeline (trace.json). */
struct hx_sim_event {
  enum hx_sim_event_kind kind;
  int rank;
  double start_s, end_s;
  int pipeline, stage;
  int micro_batch; /* -1 when not about one micro-batch */
  int layer;       /* all-reduce: decoder layer, -1 embedding/head; else -1 */
  int peer;        /* send/recv: the other leader; else -1 */
};

struct hx_sim_options {
  /* Price every transfer and collective at 0 (closed-form tests). */
  bool zero_comm;
  /* Keep the events; they are copied into `arena` (required then). */
  bool record_events;
  struct hx_arena *arena;
  /* Outputs. */
  struct hx_sim_event *events; /* sorted by rank, then start time */
  int nevents;
  double memory_shortfall; /* max over used devices of needed - capacity */
  int worst_rank;          /* that device, -1 when the plan uses none */
};

/* Simulates one iteration of `plan` and fills plan->sim (iteration_s,
 * tokens_per_s, mfu, bubble, the time breakdown, and per rank busy_s and
 * peak_memory, which must be arrays of plan->ndevices: hx_plan_new allocates
 * them). Returns true when every used device fits its memory; plan->sim is
 * filled either way (sim.valid says the plan could be simulated at all). opt
 * may be NULL. Allocates nothing that outlives the call except the recorded
 * events. */
bool hx_simulate(const struct hx_ctx *ctx, struct hx_plan *plan, struct hx_sim_options *opt);

/* A lower bound on the iteration_s hx_simulate would report for `plan`,
 * from the same durations and the dependencies every schedule obeys (stage
 * compute and links serial, micro-batches through the stages in order),
 * without running the event queue: planners prune with it. 0 when the plan
 * cannot be simulated. */
double hx_sim_lower_bound(const struct hx_ctx *ctx, const struct hx_plan *plan);

/* The name of an event kind ("forward", "send", ...). */
const char *hx_sim_event_name(enum hx_sim_event_kind kind);

#endif

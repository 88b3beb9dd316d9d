/* Shared state of the plan.json reader: passes/planload/plan_load.c reads the
 * pipelines, stages and groups; plan_load_groups.c checks the groups against
 * the stages; passes/planload/plan_load_seq.c rebuilds the HexiSeq
 * layouts (token ranges, heads, CP rings, HP all-to-all groups) of the
 * stages whose devices sit in cp_ring / hp_a2a groups. Internal to those
 * files. */
#ifndef HX_PLAN_LOAD_H
#define HX_PLAN_LOAD_H

#include "ir/text/json.h"
#include "ir/hexic.h"

/* Reads and checks a plan.json (passes/planload/plan_load.c); NULL after reporting
 * located errors, or when the plan does not fit memory. */
struct hx_plan *hx_plan_load(struct hx_ctx *ctx, const char *path);

struct hx_plan_loader {
  struct hx_ctx *ctx;
  struct hx_plan *plan;
  const struct hx_json *root;
  int *owner;                      /* per rank: whether some stage took it */
  bool *in_seq_group;              /* per rank: named by a cp_ring or hp_a2a group */
  const struct hx_json **group_js; /* per plan group: its object in the file */
};

/* A stage of the file is a HexiSeq stage when some of its ranks sit in a
 * cp_ring or hp_a2a group: its layout, not tp x cp x hp, sets its shape
 * (passes/planload/plan_load_seq.c). */
bool hx_plan_load_is_seq_stage(const struct hx_plan_loader *l, const int *ranks, int n);

/* Reads devices[].seq and devices[].heads of the HexiSeq stages, checks the
 * CP/HP tables (every token once per ring, every head of the TP share once
 * per all-to-all group, every device in one of each) and rebuilds each such
 * stage's seq_layout, cp, hp, device table and split tables. Reports located
 * errors and returns false when the file cannot be such a plan. Plans
 * without cp_ring / hp_a2a groups pass through untouched. */
bool hx_plan_load_seq(struct hx_plan_loader *l);

/* The tp, grad and unsplit groups of the file against the stages
 * (passes/planload/plan_load_groups.c): each one the scheduler would build
 * for them (hx_sched_build_groups), and, when the file lists gradient groups
 * at all, every one of those. Reports the stale group's line and returns
 * false otherwise. Needs the pipelines loaded. */
bool hx_plan_load_check_groups(struct hx_plan_loader *l);

#endif

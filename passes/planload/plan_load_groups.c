/* The communicator tables of a plan.json against its stages (issue 10, item
 * 10). The simulator prices the gradient sync from the file's grad and
 * unsplit groups, and codegen derives its own from the stages and checks the
 * file's against them; so a group left stale by an edit (a pipeline deleted,
 * its batch moved) must be refused here, with its line, for `hexic simulate`
 * and --plan alike. The reference is the scheduler's own derivation
 * (hx_sched_build_groups): a file that lists gradient groups lists exactly
 * those (in any order); a file that lists none leaves them to be derived. A
 * tp group must be a stage's TP group. CP rings and all-to-all groups are
 * plan_load_seq.c's. */
#include <stdio.h>
#include <string.h>

#include "ir/plan_util.h"
#include "passes/schedule/sched.h"
#include "plan_load.h"

static bool is_checked_kind(enum hx_group_kind k) {
  return k == HX_GROUP_TP || k == HX_GROUP_GRAD || k == HX_GROUP_UNSPLIT;
}

static bool is_gradient_kind(enum hx_group_kind k) {
  return k == HX_GROUP_GRAD || k == HX_GROUP_UNSPLIT;
}

/* Same kind, layers and slice: the same table entry, whatever its ranks. */
static bool same_key(const struct hx_group *a, const struct hx_group *b) {
  return a->kind == b->kind && a->layer_begin == b->layer_begin && a->layer_end == b->layer_end &&
         a->slice == b->slice && a->nslices == b->nslices;
}

static bool same_ranks(const struct hx_group *a, const struct hx_group *b) {
  return a->nranks == b->nranks && !memcmp(a->ranks, b->ranks, sizeof(int) * (size_t)a->nranks);
}

/* "[0, 2, 5]", cut short with "..." when long. */
static const char *ranks_text(char *buf, size_t size, const struct hx_group *g) {
  size_t used = (size_t)snprintf(buf, size, "[");
  for (int k = 0; k < g->nranks && used + 16 < size; k++)
    used += (size_t)snprintf(buf + used, size - used, "%s%d", k ? ", " : "", g->ranks[k]);
  snprintf(buf + used, size - used, "%s]", used + 16 >= size ? ", ..." : "");
  return buf;
}

/* "grad group (layers [0, 4), slice 1 of 2)"; layer -1 groups are the
 * embedding's and the LM head's. */
static const char *group_text(char *buf, size_t size, const struct hx_group *g) {
  if (g->layer_begin < 0)
    snprintf(buf, size, "%s group of the embedding or LM head (slice %d of %d)",
             hx_group_kind_name(g->kind), g->slice, g->nslices);
  else if (g->kind == HX_GROUP_TP)
    snprintf(buf, size, "tp group (layers [%d, %d))", g->layer_begin, g->layer_end);
  else
    snprintf(buf, size, "%s group (layers [%d, %d), slice %d of %d)", hx_group_kind_name(g->kind),
             g->layer_begin, g->layer_end, g->slice, g->nslices);
  return buf;
}

/* The index of the derived group the file's group g is, -1 when none; an
 * entry is taken once (taken[]), so a repeated group is refused too. */
static int find_derived(const struct hx_plan *derived, const bool *taken,
                        const struct hx_group *g) {
  for (int d = 0; d < derived->ngroups; d++)
    if (!taken[d] && same_key(&derived->groups[d], g) && same_ranks(&derived->groups[d], g))
      return d;
  return -1;
}

static void report_stale(const struct hx_plan_loader *l, const struct hx_plan *derived, int g) {
  const struct hx_group *fg = &l->plan->groups[g];
  const struct hx_json *at = l->group_js[g];
  char what[160], have[256], want[256];
  group_text(what, sizeof what, fg);
  ranks_text(have, sizeof have, fg);
  const struct hx_group *twin = NULL; /* the derived group of the same key */
  for (int d = 0; d < derived->ngroups && !twin; d++)
    if (same_key(&derived->groups[d], fg))
      twin = &derived->groups[d];
  if (fg->kind == HX_GROUP_TP)
    hx_error(at->loc,
             "this %s over ranks %s is no stage's TP group (a stage of those layers with its "
             "ranks in TP order; stale after an edit?)",
             what, have);
  else if (twin && same_ranks(twin, fg))
    hx_error(at->loc, "this %s over ranks %s is listed twice", what, have);
  else if (twin)
    hx_error(at->loc,
             "this %s does not match the stages: they put it on ranks %s, not %s (stale after "
             "an edit? list the groups the stages imply, or none)",
             what, ranks_text(want, sizeof want, twin), have);
  else
    hx_error(at->loc,
             "this %s over ranks %s does not match the stages: they imply no such group (stale "
             "after an edit? list the groups the stages imply, or none)",
             what, have);
}

/* Every gradient group the stages imply must be listed once the file lists
 * any: the simulator would otherwise price a partial sync. */
static bool check_complete(const struct hx_plan_loader *l, const struct hx_plan *derived,
                           const bool *taken) {
  for (int d = 0; d < derived->ngroups; d++) {
    const struct hx_group *dg = &derived->groups[d];
    if (taken[d] || !is_gradient_kind(dg->kind))
      continue;
    char what[160], want[256];
    hx_error(hx_json_get(l->root, "groups")->loc,
             "'groups' lists gradient groups but not the %s over ranks %s that the stages imply "
             "(list every gradient group, or none to let hexic derive them)",
             group_text(what, sizeof what, dg), ranks_text(want, sizeof want, dg));
    return false;
  }
  return true;
}

bool hx_plan_load_check_groups(struct hx_plan_loader *l) {
  struct hx_plan *plan = l->plan;
  bool lists_gradient = false, lists_checked = false;
  for (int g = 0; g < plan->ngroups; g++) {
    lists_gradient |= is_gradient_kind(plan->groups[g].kind);
    lists_checked |= is_checked_kind(plan->groups[g].kind);
  }
  if (!lists_checked)
    return true;
  struct hx_plan derived = *plan; /* the same stages, the scheduler's groups */
  hx_sched_build_groups(l->ctx, &l->ctx->arena, &derived);
  bool *taken = HX_NEW_ARRAY(&l->ctx->arena, bool, derived.ngroups + 1);
  for (int g = 0; g < plan->ngroups; g++) {
    if (!is_checked_kind(plan->groups[g].kind))
      continue;
    int d = find_derived(&derived, taken, &plan->groups[g]);
    if (d < 0) {
      report_stale(l, &derived, g);
      return false;
    }
    taken[d] = true;
  }
  return !lists_gradient || check_complete(l, &derived, taken);
}

/* The limits of a plan search: a count of evaluations (--search-evals, the
 * deterministic bound: the same inputs always stop at the same point) and,
 * only when asked for, a wall-clock limit (--search-budget, a safety net: a
 * search it cuts short may return another plan on a faster or slower
 * machine, which the warning says). Without --search-budget the limits never
 * read the clock, so a loaded or slow machine gets the same plan. */
#include <stdio.h>

#include "sched.h"

void hx_search_limit_init(struct hx_search_limit *l, const struct hx_options *opt) {
  l->evals = 0;
  l->max_evals = opt->search_evals > 0 ? opt->search_evals : HX_SEARCH_EVALS_DEFAULT;
  l->budget_s = opt->search_budget_s > 0 ? opt->search_budget_s : 0;
  /* the clock is read only for an explicit --search-budget */
  l->start = l->budget_s > 0 ? hx_search_now_s() : 0;
  l->deadline = l->start + l->budget_s;
  l->out_of_evals = l->out_of_time = false;
}

bool hx_search_limit_stop(struct hx_search_limit *l) {
  if (l->out_of_evals || l->out_of_time)
    return true;
  if (l->evals >= l->max_evals)
    l->out_of_evals = true;
  else if (l->budget_s > 0 && hx_search_now_s() > l->deadline)
    l->out_of_time = true;
  return l->out_of_evals || l->out_of_time;
}

void hx_search_limit_report(const struct hx_search_limit *l, const char *search) {
  struct location nowhere = {0};
  char after[64] = "";
  if (l->evals > 0) /* HexiSeq counts its work otherwise */
    snprintf(after, sizeof after, " after %lld evaluation%s", (long long)l->evals,
             l->evals == 1 ? "" : "s");
  if (l->out_of_time)
    hx_warning(nowhere,
               "%s was cut short by --search-budget=%gs%s; the plan may differ from a run that "
               "is not cut short (on another machine, or with a larger --search-budget)",
               search, l->budget_s, after);
  else if (l->out_of_evals)
    fprintf(stderr, "hexic: note: %s used all its --search-evals=%lld evaluations; a larger "
                    "value may find a faster plan\n",
            search, (long long)l->max_evals);
}

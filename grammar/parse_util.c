/* Small helpers the scanner and parser share. */
#include <string.h>

#include "grammar/parse_state.h"

const char *const hx_block_keywords[HX_B_COUNT] = {
    [HX_B_MODEL] = "model", [HX_B_TRAIN] = "train",     [HX_B_GPU] = "gpu",         [HX_B_NODE] = "node",
    [HX_B_LINK] = "link",   [HX_B_NETWORK] = "network", [HX_B_PLANNER] = "planner",
};

struct location hx_loc_at(const struct hx_parse_state *ps, int line, int col) {
  struct location loc = {ps->src, line, col};
  return loc;
}

const char *hx_short_text(struct hx_arena *a, const char *s) {
  enum { MAX_SHOWN = 48 };
  if (!s)
    return "";
  size_t n = strlen(s);
  if (n <= MAX_SHOWN)
    return s;
  return hx_sprintf(a, "%.*s...", MAX_SHOWN, s);
}

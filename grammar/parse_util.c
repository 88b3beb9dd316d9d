/* Small helpers the scanner and parser share. */
#include <string.h>

#include "grammar/parse_state.h"
#include "ir/text/utf8.h"

const char *const hx_block_keywords[HX_B_COUNT] = {
    [HX_B_MODEL] = "model", [HX_B_TRAIN] = "train",     [HX_B_GPU] = "gpu",         [HX_B_NODE] = "node",
    [HX_B_LINK] = "link",   [HX_B_NETWORK] = "network", [HX_B_PLANNER] = "planner",
    [HX_B_PROFILE] = "profile", [HX_B_EMULATION] = "emulation",
};

struct location hx_loc_at(const struct hx_parse_state *ps, int line, int col) {
  struct location loc = {ps->src, line, col};
  return loc;
}

/* How many leading bytes of s (n bytes) are printable as they stand: valid
 * UTF-8 with no control characters. */
static size_t printable_prefix(const char *s, size_t n) {
  size_t i = 0;
  for (int len; i < n && (len = hx_utf8_printable(s + i, n - i)) > 0;)
    i += (size_t)len;
  return i;
}

const char *hx_short_text(struct hx_arena *a, const char *s) {
  enum { MAX_SHOWN = 48 };
  if (!s)
    return "";
  size_t n = strlen(s);
  if (n <= MAX_SHOWN && printable_prefix(s, n) == n)
    return s;
  /* Cut at a character boundary; a control byte or one that is not UTF-8
   * shows as '?' so a message never carries a newline or a terminal escape
   * sequence from the input. */
  char *out = hx_alloc(a, MAX_SHOWN + 4), *o = out;
  size_t i = 0;
  while (i < n && i < MAX_SHOWN) {
    size_t len = (size_t)hx_utf8_printable(s + i, n - i);
    if (len == 0) {
      *o++ = '?';
      i++;
      continue;
    }
    if (i + len > MAX_SHOWN)
      break;
    memcpy(o, s + i, len);
    o += len;
    i += len;
  }
  if (i < n)
    memcpy(o, "...", 3), o += 3;
  *o = '\0';
  return out;
}

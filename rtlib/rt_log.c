/* Console output of a rank program (see rt_log.h). */
#include "rt_log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

int hx_rt_log_format_step(char *buf, size_t size, const struct hx_rt_step_stats *s) {
  return snprintf(buf, size, "step %lld/%lld | loss %.6f | lr %.4e | %.1f ms | %.0f tok/s",
                  (long long)(s->step + 1), (long long)s->steps, s->loss, s->lr, s->ms,
                  s->tokens_per_s);
}

void hx_rt_log_step(const struct hx_rt_step_stats *s) {
  char line[256];
  hx_rt_log_format_step(line, sizeof line, s);
  /* One write of the whole line: stdout of several ranks goes through mpirun's
   * forwarding, which keeps whole writes together. */
  printf("%s\n", line);
  fflush(stdout);
}

void hx_rt_log_banner(const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  printf("hexic: %s\n", msg);
  fflush(stdout);
}

double hx_rt_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

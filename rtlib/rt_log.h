/* Console output of a rank program (defined in rt_init.c): start-up banner lines and one line per
 * optimizer step. Everything goes to stdout and is flushed at once, so lines
 * from the ranks of one job never interleave mid-line under mpirun.
 *
 * These functions print unconditionally; the caller picks the rank. The
 * executor all-reduces the loss, so every rank holds it, and prints the step
 * line once per step, on world rank 0 (rt_exec.c). */
#ifndef HX_RT_LOG_H
#define HX_RT_LOG_H

#include <stddef.h>
#include <stdint.h>

/* One step's figures. step is the 0-based optimizer step index; it is printed
 * 1-based ("step 1/M" is the first step). */
struct hx_rt_step_stats {
  int64_t step, steps;
  double loss; /* of the forward pass of this step, before its update */
  double lr;   /* the learning rate this step's update used */
  double ms;   /* wall time of the step */
  double tokens_per_s;
};

/* Formats the step line without a newline:
 *   step N/M | loss X.XXXXXX | lr X.XXXXe-XX | NNN.N ms | NNNNN tok/s
 * Returns snprintf's result. */
int hx_rt_log_format_step(char *buf, size_t size, const struct hx_rt_step_stats *s);

/* Prints the step line plus a newline to stdout and flushes. */
void hx_rt_log_step(const struct hx_rt_step_stats *s);

/* Prints "hexic: <message>" plus a newline to stdout and flushes: banner
 * lines (plan summary, model size, data source, resume point). */
void hx_rt_log_banner(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Seconds on a monotonic clock, for timing steps. */
double hx_rt_now_s(void);

#endif

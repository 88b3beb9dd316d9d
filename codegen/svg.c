/* plan.svg: a picture of the plan. Top: the cluster, one box per node (its
 * GPUs and intra-node bandwidth; the network below). Then one row per
 * pipeline, its stages as coloured blocks as wide as their layers. Then one
 * simulated iteration, one lane per device, coloured by what the device does.
 * Coordinates are printed with one decimal, so the file is the same byte for
 * byte on every run; every user string goes through hx_esc_xml. */
#define _GNU_SOURCE /* open_memstream */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "codegen.h"
#include "escape.h"
#include "passes/cost/cost.h"

/* Caps that keep a 1024-GPU plan's picture near a megabyte; the picture
 * says what it left out. A lane's events closer than a pixel are drawn as
 * one block, so a lane holds at most about a block per pixel. */
enum {
  SVG_WIDTH = 1400,
  SVG_MARGIN = 20,
  MAX_NODES = 128,
  NODES_PER_ROW = 7,
  MAX_PIPELINES = 64,
  MAX_LANES = 64,
  LANE_LABEL_W = 170,
  LANE_H = 14,
};

struct svg {
  const struct hx_ctx *ctx;
  FILE *f;
  double y; /* the next free row */
};

static const char *xml(const struct svg *s, const char *text) {
  return hx_esc_xml((struct hx_arena *)&s->ctx->arena, text);
}

static void text(const struct svg *s, double x, double y, const char *style, const char *t) {
  fprintf(s->f, "<text x=\"%.1f\" y=\"%.1f\"%s>%s</text>\n", x, y, style, t);
}

static void rect(const struct svg *s, double x, double y, double w, double h, const char *fill) {
  fprintf(s->f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n", x, y,
          w, h, fill);
}

static const char *fmt(const struct svg *s, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
static const char *fmt(const struct svg *s, const char *format, ...) {
  va_list ap, again;
  va_start(ap, format);
  va_copy(again, ap);
  int n = vsnprintf(NULL, 0, format, ap);
  va_end(ap);
  char *out = hx_alloc((struct hx_arena *)&s->ctx->arena, (size_t)n + 1);
  vsnprintf(out, (size_t)n + 1, format, again);
  va_end(again);
  return out;
}

static void heading(struct svg *s, const char *t) {
  s->y += 24;
  text(s, SVG_MARGIN, s->y, " class=\"h\"", t);
  s->y += 10;
}

/* ---- the cluster ---- */

static void node_box(const struct svg *s, const struct hx_node *n, double x, double y) {
  const struct hx_cluster *c = &s->ctx->cluster;
  double w = (SVG_WIDTH - 2.0 * SVG_MARGIN) / NODES_PER_ROW - 8;
  fprintf(s->f,
          "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"50\" rx=\"4\" "
          "fill=\"#f4f4f8\" stroke=\"#667\"/>\n",
          x, y, w);
  text(s, x + 6, y + 15, " class=\"b\"", xml(s, n->name));
  text(s, x + 6, y + 29, "", fmt(s, "%s x %d", xml(s, c->gpus[n->gpu_type].name), n->gpus));
  text(s, x + 6, y + 43, "", fmt(s, "intra-node %.3g GB/s", n->bandwidth / 1e9));
}

static void network_note(struct svg *s) {
  const struct hx_cluster *c = &s->ctx->cluster;
  const char *net = c->has_network ? fmt(s, "network between nodes: %.3g GB/s, %.3g us",
                                         c->network_bandwidth / 1e9, c->network_latency * 1e6)
                                   : "no network block";
  s->y += 16;
  text(s, SVG_MARGIN, s->y, "", net);
  for (int l = 0; l < c->nlinks && l < 8; l++) {
    s->y += 14;
    text(s, SVG_MARGIN + 12, s->y, "",
         fmt(s, "link %s - %s: %.3g GB/s", xml(s, c->links[l].a), xml(s, c->links[l].b),
             c->links[l].bandwidth / 1e9));
  }
  if (c->nlinks > 8) {
    s->y += 14;
    text(s, SVG_MARGIN + 12, s->y, "", fmt(s, "(%d more links not drawn)", c->nlinks - 8));
  }
}

static void cluster_section(struct svg *s) {
  const struct hx_cluster *c = &s->ctx->cluster;
  heading(s, fmt(s, "Cluster: %d nodes, %d GPUs", c->nnodes, c->ndevices));
  int shown = c->nnodes < MAX_NODES ? c->nnodes : MAX_NODES;
  double col_w = (SVG_WIDTH - 2.0 * SVG_MARGIN) / NODES_PER_ROW;
  for (int i = 0; i < shown; i++)
    node_box(s, &c->nodes[i], SVG_MARGIN + (i % NODES_PER_ROW) * col_w,
             s->y + (i / NODES_PER_ROW) * 58.0);
  s->y += ((shown + NODES_PER_ROW - 1) / NODES_PER_ROW) * 58.0;
  if (shown < c->nnodes) {
    s->y += 14;
    text(s, SVG_MARGIN, s->y, "", fmt(s, "first %d of %d nodes drawn", shown, c->nnodes));
  }
  network_note(s);
}

/* ---- the pipelines ---- */

static const char *const stage_colours[] = {"#8ecae6", "#ffb703", "#90be6d", "#f28482",
                                            "#cdb4db", "#f6bd60", "#84a59d", "#bde0fe"};

/* The stage's devices for its tooltip: the first 16 names. */
static const char *stage_devices(const struct svg *s, const struct hx_stage *st) {
  const char *list = "";
  for (int k = 0; k < st->ndevices && k < 16; k++)
    list =
        fmt(s, "%s%s%s", list, k ? ", " : "", xml(s, s->ctx->cluster.devices[st->devices[k]].name));
  return st->ndevices > 16 ? fmt(s, "%s, ... (%d devices)", list, st->ndevices) : list;
}

static void stage_block(const struct svg *s, const struct hx_pipeline *pl, int si, double x,
                        double w, double y) {
  const struct hx_stage *st = &pl->stages[si];
  fprintf(s->f, "<g><title>stage %d: layers %d-%d, tp %d: %s</title>\n", si, st->layer_begin,
          st->layer_end - 1, st->tp, stage_devices(s, st));
  fprintf(s->f,
          "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"46\" fill=\"%s\" "
          "stroke=\"#445\"/>\n",
          x, y, w, stage_colours[si % 8]);
  /* a nested svg clips the text to the block; a narrow block shows its
   * number only, the rest is in the tooltip */
  fprintf(s->f, "<svg x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"46\">\n", x, y, w);
  if (w >= 60) {
    text(s, 4, 13, " class=\"b\"",
         fmt(s, "%d: layers %d-%d", si, st->layer_begin, st->layer_end - 1));
    text(s, 4, 27, "",
         fmt(s, "tp %d, %d device%s", st->tp, st->ndevices, st->ndevices == 1 ? "" : "s"));
    text(s, 4, 41, "", xml(s, s->ctx->cluster.devices[st->devices[0]].name));
  } else if (w >= 10) {
    text(s, 2, 27, " class=\"s\"", fmt(s, "%d", si));
  }
  fputs("</svg>\n", s->f);
  fputs("</g>\n", s->f);
}

static void pipeline_row(struct svg *s, int i) {
  const struct hx_pipeline *pl = &s->ctx->plan->pipelines[i];
  double layers = (double)s->ctx->model.layers, x0 = SVG_MARGIN + LANE_LABEL_W;
  double plot_w = SVG_WIDTH - SVG_MARGIN - x0;
  text(s, SVG_MARGIN, s->y + 20, " class=\"b\"", fmt(s, "pipeline %d", i));
  text(s, SVG_MARGIN, s->y + 35, "",
       fmt(s, "%lld x %lld sequences", (long long)pl->micro_batches,
           (long long)pl->micro_batch_size));
  for (int si = 0; si < pl->nstages; si++) {
    const struct hx_stage *st = &pl->stages[si];
    double x = x0 + plot_w * st->layer_begin / layers;
    double w = plot_w * (st->layer_end - st->layer_begin) / layers;
    stage_block(s, pl, si, x, w, s->y + 2);
  }
  s->y += 52;
}

static void pipelines_section(struct svg *s) {
  const struct hx_plan *p = s->ctx->plan;
  heading(
      s,
      fmt(s,
          "Pipelines: %d (stage: layers; micro-batches x micro-batch size; blocks as wide as their "
          "decoder layers)",
          p->npipelines));
  int shown = p->npipelines < MAX_PIPELINES ? p->npipelines : MAX_PIPELINES;
  for (int i = 0; i < shown; i++)
    pipeline_row(s, i);
  if (shown < p->npipelines) {
    s->y += 14;
    text(s, SVG_MARGIN, s->y, "", fmt(s, "first %d of %d pipelines drawn", shown, p->npipelines));
  }
}

/* ---- the timeline ---- */

enum activity { ACT_FORWARD, ACT_BACKWARD, ACT_P2P, ACT_SYNC, ACT_OPTIMIZER, ACT_IDLE, ACT_N };
static const char *const activity_name[ACT_N] = {"forward", "backward",  "send/recv",
                                                 "sync",    "optimizer", "idle"};
static const char *const activity_colour[ACT_N] = {"#4c78a8", "#f58518", "#b279a2",
                                                   "#e45756", "#54a24b", "#e6e6e6"};

static enum activity activity_of(enum hx_sim_event_kind k) {
  switch (k) {
  case HX_EV_FORWARD:
    return ACT_FORWARD;
  case HX_EV_BACKWARD:
    return ACT_BACKWARD;
  case HX_EV_SEND:
  case HX_EV_RECV:
  case HX_EV_BROADCAST:
    return ACT_P2P;
  case HX_EV_OPTIMIZER:
    return ACT_OPTIMIZER;
  default: /* all-reduce, loss/norm all-reduce, ZeRO-1 all-gather */
    return ACT_SYNC;
  }
}

struct lane {
  double x0, w, y, scale; /* scale: pixels per second */
};

/* Draws events [b, e) of one rank, merging neighbours of one activity that
 * are less than a pixel apart; s NULL counts the blocks without drawing.
 * Returns the blocks. */
static int lane_events(const struct svg *s, const struct lane *l, const struct hx_sim_event *ev,
                       int b, int e) {
  int blocks = 0;
  for (int i = b; i < e;) {
    enum activity a = activity_of(ev[i].kind);
    double x = l->x0 + ev[i].start_s * l->scale, end = l->x0 + ev[i].end_s * l->scale;
    int j = i + 1;
    for (; j < e && activity_of(ev[j].kind) == a && l->x0 + ev[j].start_s * l->scale < end + 1; j++)
      end = fmax(end, l->x0 + ev[j].end_s * l->scale);
    if (s)
      rect(s, x, l->y, fmax(end - x, 0.5), LANE_H - 3, activity_colour[a]);
    blocks++;
    i = j;
  }
  return blocks;
}

/* Adds events [b, e)'s time to cover[px * ACT_N + activity]: how much of
 * each pixel of the lane every activity fills (0 to 1). */
static void lane_cover(const struct lane *l, const struct hx_sim_event *ev, int b, int e,
                       double *cover, int npx) {
  for (int i = b; i < e; i++) {
    enum activity a = activity_of(ev[i].kind);
    double x0 = ev[i].start_s * l->scale, x1 = ev[i].end_s * l->scale;
    int first = (int)fmax(floor(x0), 0), last = (int)fmin(floor(x1), npx - 1);
    for (int px = first; px <= last; px++) {
      double part = fmin(x1, px + 1.0) - fmax(x0, (double)px);
      if (part > 0)
        cover[(size_t)px * ACT_N + a] += part;
    }
  }
}

/* A pixel of a dense lane: each busy activity's height in the lane, in
 * activity order from the top, in proportion to the share of the pixel it
 * fills (scaled down where overlapping events fill more than all of it),
 * rounded on the running sum so that the heights add up exactly. */
struct column {
  int h[ACT_IDLE];
};

static struct column pixel_column(const double *cover) {
  double total = 0, sum = 0;
  for (int a = 0; a < ACT_IDLE; a++)
    total += cover[a];
  double scale = total > 1 ? (LANE_H - 3) / total : LANE_H - 3;
  struct column c;
  int top = 0;
  for (int a = 0; a < ACT_IDLE; a++) {
    sum += cover[a];
    int bottom = (int)lround(sum * scale);
    c.h[a] = bottom - top;
    top = bottom;
  }
  return c;
}

static bool same_column(const struct column *a, const struct column *b) {
  for (int k = 0; k < ACT_IDLE; k++)
    if (a->h[k] != b->h[k])
      return false;
  return true;
}

/* A lane with more merged blocks than pixels (a large batch's thousands of
 * micro-batches: 17 MB of blocks no one could tell apart) drawn a pixel at
 * a time, each pixel a stack of the activities in proportion to the time
 * they fill it, runs of equal stacks as one. Returns the blocks drawn. */
static int lane_pixels(const struct svg *s, const struct lane *l, const struct hx_sim_event *ev,
                       int b, int e) {
  int npx = (int)ceil(l->w), blocks = 0;
  double *cover = calloc((size_t)npx * ACT_N, sizeof *cover);
  if (!cover)
    hx_internal_error("out of memory writing plan.svg");
  lane_cover(l, ev, b, e, cover, npx);
  for (int px = 0; px < npx;) {
    struct column c = pixel_column(&cover[(size_t)px * ACT_N]), next;
    int end = px + 1;
    while (end < npx && (next = pixel_column(&cover[(size_t)end * ACT_N]), same_column(&c, &next)))
      end++;
    for (int a = 0, y = 0; a < ACT_IDLE; y += c.h[a], a++)
      if (c.h[a] > 0) {
        rect(s, l->x0 + px, l->y + y, end - px, c.h[a], activity_colour[a]);
        blocks++;
      }
    px = end;
  }
  free(cover);
  return blocks;
}

static void time_axis(struct svg *s, const struct lane *l, double iteration_s) {
  double raw = iteration_s / 10, step = pow(10, floor(log10(raw)));
  step *= raw / step > 5 ? 10 : raw / step > 2 ? 5 : raw / step > 1 ? 2 : 1;
  for (int k = 0; k * step <= iteration_s * (1 + 1e-9); k++) {
    double x = l->x0 + k * step * l->scale;
    fprintf(s->f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999\"/>\n", x,
            s->y, x, s->y + 5);
    text(s, x - 10, s->y + 17, "", fmt(s, "%.4g", k * step));
  }
  text(s, l->x0 + l->w - 90, s->y + 32, "", "time (s)");
  s->y += 40;
}

static void legend(struct svg *s) {
  for (int a = 0; a < ACT_N; a++) {
    double x = SVG_MARGIN + LANE_LABEL_W + a * 130.0;
    rect(s, x, s->y, 14, 10, activity_colour[a]);
    text(s, x + 18, s->y + 10, "", activity_name[a]);
  }
  s->y += 18;
}

static void timeline_section(struct svg *s, const struct hx_sim_options *o) {
  const struct hx_cluster *c = &s->ctx->cluster;
  double iteration_s = s->ctx->plan->sim.iteration_s;
  heading(s, fmt(s, "One simulated iteration: %.4g s", iteration_s));
  legend(s);
  struct lane l = {.x0 = SVG_MARGIN + LANE_LABEL_W,
                   .w = SVG_WIDTH - 2.0 * SVG_MARGIN - LANE_LABEL_W};
  l.scale = iteration_s > 0 ? l.w / iteration_s : 0;
  int lanes = c->ndevices < MAX_LANES ? c->ndevices : MAX_LANES, e = 0, blocks = 0, dense = 0;
  for (int r = 0; r < lanes; r++) {
    l.y = s->y + 2;
    text(s, SVG_MARGIN, s->y + LANE_H - 3, " class=\"s\"",
         fmt(s, "%d %s%s", r, xml(s, c->devices[r].name),
             s->ctx->plan->devices[r].pipeline < 0 ? " (unused)" : ""));
    rect(s, l.x0, l.y, l.w, LANE_H - 3, activity_colour[ACT_IDLE]);
    while (e < o->nevents && o->events[e].rank < r)
      e++;
    int b = e;
    while (e < o->nevents && o->events[e].rank == r)
      e++;
    if (lane_events(NULL, &l, o->events, b, e) > l.w) {
      blocks += lane_pixels(s, &l, o->events, b, e);
      dense++;
    } else {
      blocks += lane_events(s, &l, o->events, b, e);
    }
    s->y += LANE_H;
  }
  fprintf(s->f, "<!-- %d blocks for %d events -->\n", blocks, o->nevents);
  time_axis(s, &l, iteration_s);
  if (lanes < c->ndevices)
    text(s, SVG_MARGIN, s->y, "",
         fmt(s, "lanes for ranks 0-%d of %d devices drawn (the rest left out)", lanes - 1,
             c->ndevices));
  else if (o->events_left_out > 0)
    text(s, SVG_MARGIN, s->y, "",
         fmt(s, "%lld events of the extrapolated steady state were not recorded (not drawn)",
             (long long)o->events_left_out));
  if (dense > 0) {
    s->y += 14;
    text(s, SVG_MARGIN, s->y, "",
         fmt(s, "%d lane%s with more blocks than pixels drawn a pixel at a time: each pixel a stack "
                "of the activities in proportion to the time they fill it",
             dense, dense == 1 ? "" : "s"));
  }
  s->y += 10;
}

static void write_body(struct svg *s, const struct hx_sim_options *o) {
  const struct hx_plan *p = s->ctx->plan;
  s->y = SVG_MARGIN + 8;
  text(s, SVG_MARGIN, s->y, " class=\"t\"",
       fmt(s, "hexic plan: %s, %s%s%s", xml(s, s->ctx->model.name), xml(s, p->strategy),
           p->description ? " " : "", p->description ? xml(s, p->description) : ""));
  cluster_section(s);
  pipelines_section(s);
  timeline_section(s, o);
}

bool hx_emit_svg(const struct hx_ctx *ctx, const struct hx_sim_options *sim, FILE *f) {
  char *body = NULL;
  size_t size = 0;
  FILE *mem = open_memstream(&body, &size); /* the height is known after the body */
  if (!mem)
    hx_internal_error("out of memory writing plan.svg");
  struct svg s = {.ctx = ctx, .f = mem};
  write_body(&s, sim);
  bool ok = fclose(mem) == 0;
  fprintf(f,
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%.0f\" "
          "viewBox=\"0 0 %d %.0f\" font-family=\"sans-serif\" font-size=\"11\">\n"
          "<style>.t{font-size:16px;font-weight:bold}.h{font-size:14px;font-weight:bold}"
          ".b{font-weight:bold}.s{font-size:10px}</style>\n"
          "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
          SVG_WIDTH, s.y + SVG_MARGIN, SVG_WIDTH, s.y + SVG_MARGIN);
  fwrite(body, 1, size, f);
  fputs("</svg>\n", f);
  free(body);
  return ok && !ferror(f);
}

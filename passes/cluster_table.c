/* The cluster-table pass: the full device-to-device bandwidth (bytes/s) and
 * latency (s) tables. Two GPUs of one node use the node's own figures; GPUs
 * of different nodes use the most specific link naming both nodes (a replica
 * name such as "g4090-1" beats the base name "g4090"), else the network
 * block. A node pair with neither, or two equally specific links for one
 * pair, is an input error. */
#include <string.h>

#include "grammar/parse_state.h"
#include "passes.h"

enum { NO_LINK = -1, NETWORK = -2 };

struct pair_choice {
  int link;        /* index into cluster.links, NO_LINK or NETWORK */
  int specificity; /* replica names used by that link for this pair: 0..2 */
};

/* A link end's name covers the node with that expanded name, or every
 * replica of the base name; *specific tells which. */
static bool covers(const struct hx_node *n, const char *name, bool *specific) {
  if (!strcmp(n->name, name)) {
    *specific = strcmp(n->base_name, name) != 0;
    return true;
  }
  *specific = false;
  return !strcmp(n->base_name, name);
}

static void report_ambiguous(const struct hx_cluster *c, int earlier, int later, int i, int j,
                             struct hx_arena *a) {
  const struct hx_link *x = &c->links[later];
  hx_error(x->loc, "links \"%s\" \"%s\" and \"%s\" \"%s\" both apply to nodes \"%s\" and \"%s\"",
           hx_short_text(a, x->a), hx_short_text(a, x->b), hx_short_text(a, c->links[earlier].a),
           hx_short_text(a, c->links[earlier].b), hx_short_text(a, c->nodes[i].name),
           hx_short_text(a, c->nodes[j].name));
  hx_note(c->links[earlier].loc, "the other link is here; name a replica (\"%s\") to say which wins",
          hx_short_text(a, c->nodes[i].name));
}

/* A node a link end names, and whether by its replica name. */
struct covered {
  int node;
  bool specific;
};

static int covered_nodes(const struct hx_cluster *c, const char *name, struct covered *out) {
  int n = 0;
  for (int i = 0; i < c->nnodes; i++)
    if (covers(&c->nodes[i], name, &out[n].specific))
      out[n++].node = i;
  return n;
}

/* Applies one link to every node pair it names. Cost: a scan of the nodes
 * for each end, then the pairs it covers. ends_a and ends_b are scratch
 * space for nnodes entries each. */
static void apply_link(const struct hx_cluster *c, int li, struct pair_choice *choice, bool *reported,
                       struct covered *ends_a, struct covered *ends_b, struct hx_arena *a) {
  const struct hx_link *l = &c->links[li];
  int nn = c->nnodes;
  int na = covered_nodes(c, l->a, ends_a), nb = covered_nodes(c, l->b, ends_b);
  for (int x = 0; x < na; x++)
    for (int y = 0; y < nb; y++) {
      int i = ends_a[x].node, j = ends_b[y].node;
      if (i == j)
        continue;
      struct pair_choice *p = &choice[(long)i * nn + j], *q = &choice[(long)j * nn + i];
      int spec = (int)ends_a[x].specific + (int)ends_b[y].specific;
      if (p->link >= 0 && p->link != li && p->specificity == spec) {
        if (!reported[li])
          report_ambiguous(c, p->link, li, i, j, a);
        reported[li] = true;
        continue;
      }
      if (p->link < 0 || spec > p->specificity) {
        *p = (struct pair_choice){li, spec};
        *q = *p;
      }
    }
}

struct reported_pair {
  const char *a, *b;
};

/* One error per pair of node declarations, not per replica pair. */
static void report_unconnected(const struct hx_cluster *c, int i, int j, struct reported_pair *seen, int *nseen,
                               struct hx_arena *a) {
  const char *bi = c->nodes[i].base_name, *bj = c->nodes[j].base_name;
  for (int k = 0; k < *nseen; k++)
    if ((seen[k].a == bi && seen[k].b == bj) || (seen[k].a == bj && seen[k].b == bi))
      return;
  seen[(*nseen)++] = (struct reported_pair){bi, bj};
  hx_error(c->nodes[j].loc, "nothing connects nodes \"%s\" and \"%s\": no link names them and there is no network block",
           hx_short_text(a, c->nodes[i].name), hx_short_text(a, c->nodes[j].name));
  hx_note(c->nodes[j].loc, "add link \"%s\" \"%s\" { bandwidth = ... } or network { bandwidth = ... }",
          hx_short_text(a, bi), hx_short_text(a, bj));
}

static struct pair_choice *choose_node_pairs(struct hx_ctx *ctx) {
  const struct hx_cluster *c = &ctx->cluster;
  int nn = c->nnodes;
  struct pair_choice *choice = HX_NEW_ARRAY(&ctx->arena, struct pair_choice, (size_t)nn * (size_t)nn);
  for (long k = 0; k < (long)nn * nn; k++)
    choice[k] = (struct pair_choice){c->has_network ? NETWORK : NO_LINK, -1};
  bool *reported = HX_NEW_ARRAY(&ctx->arena, bool, c->nlinks);
  struct covered *ends_a = HX_NEW_ARRAY(&ctx->arena, struct covered, nn);
  struct covered *ends_b = HX_NEW_ARRAY(&ctx->arena, struct covered, nn);
  for (int li = 0; li < c->nlinks && !hx_too_many_errors(); li++)
    apply_link(c, li, choice, reported, ends_a, ends_b, &ctx->arena);
  struct reported_pair seen[HX_MAX_ERRORS + 1];
  int nseen = 0;
  for (int i = 0; i < nn && !hx_too_many_errors(); i++)
    for (int j = i + 1; j < nn && !hx_too_many_errors(); j++)
      if (choice[(long)i * nn + j].link == NO_LINK)
        report_unconnected(c, i, j, seen, &nseen, &ctx->arena);
  return choice;
}

/* The figures of the link a pair of distinct nodes uses: its own link, or
 * the network. */
static double link_bandwidth(const struct hx_cluster *c, const struct pair_choice *p) {
  return p->link >= 0 ? c->links[p->link].bandwidth : c->network_bandwidth;
}
static double link_latency(const struct hx_cluster *c, const struct pair_choice *p) {
  return p->link >= 0 ? c->links[p->link].latency : c->network_latency;
}

static void fill_devices(struct hx_cluster *c, const struct pair_choice *choice) {
  int n = c->ndevices, nn = c->nnodes;
  for (int x = 0; x < n; x++) {
    int nx = c->devices[x].node;
    for (int y = 0; y < n; y++) {
      int ny = c->devices[y].node;
      double bw, lat;
      if (x == y) {
        bw = lat = 0;
      } else if (nx == ny) {
        bw = c->nodes[nx].bandwidth;
        lat = c->nodes[nx].latency;
      } else {
        const struct pair_choice *p = &choice[(long)nx * nn + ny];
        bw = link_bandwidth(c, p);
        lat = link_latency(c, p);
      }
      c->bandwidth[(long)x * n + y] = bw;
      c->latency[(long)x * n + y] = lat;
    }
  }
}

/* Whether the nodes [g, g + n) can be one class: one link choice between
 * any two of them, each the same choice as node g towards every other
 * node, the same own figures. O(n x nnodes). */
static bool alike(const struct hx_cluster *c, const struct pair_choice *choice, int g, int n) {
  int nn = c->nnodes;
  for (int x = g + 1; x < g + n; x++) {
    if (c->nodes[x].bandwidth != c->nodes[g].bandwidth ||
        c->nodes[x].latency != c->nodes[g].latency)
      return false;
    for (int y = 0; y < nn; y++) {
      bool inside = y >= g && y < g + n;
      if (y == x)
        continue;
      int want = inside ? choice[(long)g * nn + g + 1].link : choice[(long)g * nn + y].link;
      if (choice[(long)x * nn + y].link != want)
        return false;
    }
  }
  return true;
}

/* Node classes (ir/cluster.h): each run of replicas of one node block that
 * is alike is one class, every other node its own; then the figures
 * between distinct nodes of each two classes. */
static void fill_classes(struct hx_cluster *c, const struct pair_choice *choice,
                         struct hx_arena *a) {
  int nn = c->nnodes, k = 0;
  c->node_class = HX_NEW_ARRAY(a, int, nn);
  int *rep = HX_NEW_ARRAY(a, int, nn); /* a node of each class, the next one when two */
  int *second = HX_NEW_ARRAY(a, int, nn);
  for (int g = 0; g < nn;) {
    int n = 1;
    while (g + n < nn && !strcmp(c->nodes[g + n].base_name, c->nodes[g].base_name))
      n++;
    bool one = alike(c, choice, g, n);
    for (int x = g; x < g + n; x++) {
      if (one && x > g) {
        c->node_class[x] = k - 1;
        continue;
      }
      c->node_class[x] = k;
      rep[k] = x;
      second[k++] = one && n > 1 ? g + 1 : -1;
    }
    g += n;
  }
  c->nclasses = k;
  c->class_bandwidth = HX_NEW_ARRAY(a, double, (size_t)k * (size_t)k);
  c->class_latency = HX_NEW_ARRAY(a, double, (size_t)k * (size_t)k);
  for (int x = 0; x < k; x++)
    for (int y = 0; y < k; y++) {
      int other = x == y ? second[y] : rep[y];
      if (other < 0)
        continue; /* a class of one node: no pair of distinct nodes in it */
      const struct pair_choice *p = &choice[(long)rep[x] * nn + other];
      c->class_bandwidth[(long)x * k + y] = link_bandwidth(c, p);
      c->class_latency[(long)x * k + y] = link_latency(c, p);
    }
}

bool hx_pass_cluster_table(struct hx_ctx *ctx) {
  struct hx_cluster *c = &ctx->cluster;
  int before = hx_error_count();
  const struct pair_choice *choice = choose_node_pairs(ctx);
  if (hx_error_count() > before)
    return false;
  size_t cells = (size_t)c->ndevices * (size_t)c->ndevices;
  c->bandwidth = HX_NEW_ARRAY(&ctx->arena, double, cells);
  c->latency = HX_NEW_ARRAY(&ctx->arena, double, cells);
  fill_devices(c, choice);
  fill_classes(c, choice, &ctx->arena);
  return true;
}

/* The HexiScale scheduler's phases (issue 4). Each phase lives in its own
 * passes/schedule/sched_*.c file; passes/schedule.c runs them through the outer search
 * of sched_search.c.
 *
 *   sched_limit.c      the search limits: evaluations and, when asked, the clock
 *   sched_clock.c      the clock (its own file: a test links a slow one)
 *   sched_graph.c      device graphs for METIS, their validation, the wrapper
 *   sched_phase1.c     devices -> D_dp pipelines (METIS + move/swap refinement)
 *   sched_phase2.c     pipeline -> groups -> stages (TP layout), stage order,
 *                      leaders
 *   sched_layers.c     the exact min-max split of the layers over stages
 *   sched_batch.c      micro-batches per pipeline, global batch exact
 *   sched_sync.c       asymmetric gradient-sync groups (lcm slicing)
 *   sched_search.c     the outer search over D_dp, k_i and the objective
 *   sched_local.c      local search over structures on small clusters
 *   sched_exhaustive.c the exact planner for clusters of <= 8 devices
 *   sched_memo.c       int-keyed memo tables the searches share
 *
 * Everything is deterministic: random choices come from a seeded splitmix64
 * and METIS always gets METIS_OPTION_SEED explicitly. */
#ifndef HX_SCHED_H
#define HX_SCHED_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/hexic.h"

/* ---- deterministic randomness ------------------------------------------ */

struct hx_rng {
  uint64_t state;
};
uint64_t hx_rng_next(struct hx_rng *r);
/* Uniform in [0, n); n > 0. */
int hx_rng_below(struct hx_rng *r, int n);

/* ---- search limits (sched_limit.c) ------------------------------------- */

/* What bounds a plan search. Evaluations (one candidate structure priced:
 * completed over its micro-batch settings by the estimate or the simulator)
 * are counted: --search-evals stops every search at the same point whatever
 * the machine; it is the only default limit. The clock (--search-budget, off
 * unless given) only cuts a search short, with a warning that the plan may
 * differ from a run that is not cut short. A search that stops keeps the
 * best plan found so far; each search finds a first plan cheaply before its
 * expensive part, limits or not. */
enum { HX_SEARCH_EVALS_DEFAULT = 100000 };
struct hx_search_limit {
  int64_t evals, max_evals;
  /* CLOCK_MONOTONIC seconds; budget_s 0: no clock (start is then 0) */
  double start, deadline, budget_s;
  bool out_of_evals, out_of_time;   /* why the search stopped, if it did */
};
double hx_search_now_s(void);
void hx_search_limit_init(struct hx_search_limit *l, const struct hx_options *opt);
/* True once the evaluations are spent or, under --search-budget, the clock
 * ran out (sticky). Reads the clock only under --search-budget. */
bool hx_search_limit_stop(struct hx_search_limit *l);
/* Says on stderr why `search` ("the plan search") stopped: a warning when
 * the clock cut it, a note when it used every evaluation; nothing else. */
void hx_search_limit_report(const struct hx_search_limit *l, const char *search);

/* ---- memo: int keys -> values (sched_memo.c) ---------------------------- */

struct hx_sched_memo_entry {
  uint64_t hash;
  int n;
  int *key;
  void *value;
  bool set;
};
/* Zero-initialised: empty. Entries and keys live in the arena passed in.
 * first_cap (a power of two; 0: 1024) is the table's first size, for the
 * many small memos of a two-level one. */
struct hx_sched_memo {
  struct hx_sched_memo_entry *e;
  int cap, n;
  int first_cap;
};
/* The entry of key[0..n) (copied in when new, with value NULL, set false). */
struct hx_sched_memo_entry *hx_sched_memo_get(struct hx_arena *a, struct hx_sched_memo *m,
                                              const int *key, int n);

/* ---- graphs for METIS (sched_graph.c) ---------------------------------- */

/* An undirected graph in METIS's CSR form, weights as 64-bit integers before
 * they are narrowed to idx_t (validation checks they fit). */
struct hx_sched_graph {
  int nvertices;
  int64_t *xadj;   /* nvertices + 1 */
  int64_t *adjncy; /* xadj[n] entries */
  int64_t *vwgt;   /* vertex weights, > 0 */
  int64_t *adjwgt; /* edge weights, > 0, same both ways */
};

/* The most the vertex weights, and the edge weights, of a graph may sum to
 * as METIS gets them (2^26: METIS sums and subtracts them in 32-bit idx_t). */
enum { HX_SCHED_METIS_TOTAL = 1 << 26 };

/* The weights w[0..n) (each >= 1) as METIS gets them, into out: unchanged
 * when they sum to at most HX_SCHED_METIS_TOTAL, else scaled down
 * monotonically (equal weights stay equal, none below 1) to sum to at most
 * that (needs n <= HX_SCHED_METIS_TOTAL / 2). Returns the sum of out. */
int64_t hx_sched_narrow_weights(const int64_t *w, int64_t n, int32_t *out);

/* NULL when the graph is fine for METIS, else why not (a static string):
 * an index out of range, a self-loop, a duplicate edge, an edge missing its
 * reverse or with a different reverse weight, a non-positive or too large
 * weight, more vertices or edges than the weights could be narrowed for. */
const char *hx_sched_graph_check(const struct hx_sched_graph *g);

/* Edge objective: bandwidth as weight (METIS keeps fast links inside parts,
 * so parts talk over slow links: "minimise inter-group bandwidth") or its
 * reciprocal (METIS cuts the fast links: data parallelism runs over them,
 * "maximise inter-group bandwidth", the authors' choice). */
enum hx_edge_objective { HX_EDGES_BANDWIDTH, HX_EDGES_RECIPROCAL };

/* The complete graph over n vertices, each a set of devices standing as one
 * (a device, or a machine's devices): rep[i] is its representative device
 * (edge i-j = the bandwidth between rep[i] and rep[j]), compute[i] its FLOP/s.
 * Vertex weights are compute in integer units relative to the strongest;
 * edge weights are scaled (logarithmically) into [1, 1e6]. */
struct hx_sched_graph *hx_sched_graph_build(struct hx_arena *a, const struct hx_cluster *c,
                                            const int *rep, const double *compute, int n,
                                            enum hx_edge_objective obj);

/* Above this many devices the complete device graph (n^2 edges) gets slow
 * to build and check: phases 1 and 2 then make each machine one vertex.
 * Above HX_SCHED_GRAPH_MAX_VERTICES machines (2048 one-GPU machines: a
 * graph of 4 million edges per partition), runs of consecutive machines of
 * one node block are one vertex, then runs of any. */
enum { HX_SCHED_DEVICE_GRAPH_MAX = 128, HX_SCHED_GRAPH_MAX_VERTICES = 512 };

/* The vertices phases 1 and 2 partition devices[0..n) by: each device, or
 * (n > HX_SCHED_DEVICE_GRAPH_MAX) each run of consecutive devices on one
 * machine, or (more machines than HX_SCHED_GRAPH_MAX_VERTICES) on a few
 * consecutive machines. Vertex v stands for devices[first[v] .. first[v] +
 * count[v]), rep[v] = devices[first[v]]. Returns how many vertices, at most
 * max(n when n <= HX_SCHED_DEVICE_GRAPH_MAX, HX_SCHED_GRAPH_MAX_VERTICES). */
int hx_sched_vertices(const struct hx_cluster *c, const int *devices, int n, int *first,
                      int *count, int *rep);

/* Partitions g into nparts parts (part[v] in [0, nparts)) with part weights
 * proportional to target (NULL: equal). Validates the graph first and aborts
 * with an internal error naming the defect if it is bad; checks METIS's
 * return code. Every part ends non-empty (when nvertices >= nparts): METIS
 * may leave one empty, then the heaviest part's lightest vertex moves there. */
void hx_sched_partition(struct hx_arena *a, const struct hx_sched_graph *g, int nparts,
                        const double *target, uint64_t seed, int *part);
/* hx_sched_partition keeps METIS's answers for the run, keyed by all METIS
 * reads; this forgets them (tests compare kept answers with fresh ones). */
void hx_sched_partition_forget(void);

/* ---- plan skeletons (sched_phase1.c, sched_phase2.c) -------------------- */

/* Devices of each pipeline (phase 1 output). */
struct hx_sched_split {
  int npipelines;
  int *count;    /* devices per pipeline */
  int **devices; /* sorted ranks */
};

/* Phase 1: the devices of a pool (pool[0..npool), sorted ranks; the plan
 * leaves the others unused) into npipelines parts by METIS, compute-balanced.
 * NULL when there are fewer devices than pipelines. */
struct hx_sched_split *hx_sched_phase1(struct hx_ctx *ctx, struct hx_arena *a, const int *pool,
                                       int npool, int npipelines, enum hx_edge_objective obj,
                                       uint64_t seed);

/* How an island's devices become TP stages. */
enum hx_tp_layout {
  HX_LAYOUT_THROUGHPUT, /* the TP split with the most layer throughput */
  HX_LAYOUT_WIDE,       /* the fewest stages (largest legal degrees) */
  HX_LAYOUT_NARROW,     /* every device its own stage (tp = 1) */
};

/* Sorts ranks[0..n) ascending (device lists are kept in rank order). */
void hx_sched_sort_ranks(int *ranks, int n);

/* Sorts devices[0..n) fastest first (hx_device_flops; ties: the lower
 * rank); `a` holds the scratch. */
void hx_sched_sort_fastest_first(const struct hx_cluster *c, struct hx_arena *a, int *devices,
                                 int n);

/* The largest TP group phase 2 forms (an island is cut into chunks of at
 * most this many devices): TP beyond 8 GPUs is never fast. */
enum { HX_SCHED_MAX_TP = 8 };

/* True when tp is a degree the planner may propose: it divides the query
 * heads (even head shards; kv heads are replicated when tp does not divide
 * them). */
bool hx_sched_tp_legal(const struct hx_model *m, int tp);

/* Whether devices a and b may share a TP group: the same machine, or
 * machines joined by a link at least as fast as both machines' own (TP over
 * a slower link would stall every layer). */
bool hx_sched_may_share_tp(const struct hx_cluster *c, int a, int b);

/* How many group orders phase 2 can offer (the best distinct top-tau paths). */
enum { HX_SCHED_ORDERS = 4 };

/* Phase 2: one pipeline's devices into stages (no layers yet): METIS into k
 * groups, each group's islands (one machine, or machines joined by a link
 * as fast as their own) split into TP stages by `layout`, stages ordered by
 * the variant-th best top-tau greedy path over inter-group bandwidth
 * (variant < HX_SCHED_ORDERS). Leaders are set later (hx_sched_set_leaders).
 * Fills p->stages; returns false when there is no such variant. */
bool hx_sched_phase2(struct hx_ctx *ctx, struct hx_arena *a, const int *devices, int n, int k,
                     enum hx_tp_layout layout, int tau, int variant, uint64_t seed,
                     struct hx_pipeline *p);

/* Phase 2 in two steps, so a search can price every layout and order of a
 * pipeline while partitioning it once: the groups (k parts by METIS, or
 * k = HX_SCHED_K_MACHINES: one group per machine, no METIS) and their best
 * HX_SCHED_ORDERS distinct top-tau orders; then the stages of one layout and
 * order (false when there is no such order). hx_sched_phase2 is both. */
enum { HX_SCHED_K_MACHINES = -1 };
struct hx_sched_grouping {
  int k;
  int *group;    /* per device (index into devices[]) */
  int norders;
  int *orders;   /* norders x k group indices, best first */
  long order_scans; /* groups the order search looked at: its work */
  /* TP groups may span machines whatever links join them: each group is
   * one island, cut along its link-ordered chain. The search's last resort
   * when no plan fits with TP inside islands (tiny-long on cpu8-long fits
   * only with TP 4 over two machines); false from hx_sched_grouping. */
  bool tp_any_link;
};
struct hx_sched_grouping *hx_sched_grouping(struct hx_ctx *ctx, struct hx_arena *a,
                                            const int *devices, int n, int k, int tau,
                                            uint64_t seed);
bool hx_sched_stages(struct hx_ctx *ctx, struct hx_arena *a, const int *devices, int n,
                     const struct hx_sched_grouping *g, enum hx_tp_layout layout, int variant,
                     struct hx_pipeline *p);

/* Each stage's leader: the member that makes the hop from the previous stage
 * cheapest; stage 0's leader the one cheapest towards stage 1. */
void hx_sched_set_leaders(const struct hx_ctx *ctx, struct hx_pipeline *p);

/* tau of the top-tau path (how many of the heaviest edges each step of a
 * stage-order path may take): --tau (1..HX_SCHED_TAU_MAX), else 3, the
 * authors' default. */
enum { HX_SCHED_TAU_DEFAULT = 3, HX_SCHED_TAU_MAX = 16 };
int hx_sched_tau(const struct hx_options *opt);

/* ---- layer and batch split (sched_layers.c, sched_batch.c) -------------- */

/* Per-stage linear cost of a candidate layer count: time(n) = per_layer * n +
 * extra, memory fits for n <= max_layers. Filled by hx_sched_stage_costs. */
struct hx_stage_cost {
  double per_layer, extra; /* forward + backward of one micro-batch, seconds */
  int max_layers;          /* -1 when not even 0 layers fit */
};

/* The stage costs of p at its micro_batch_size / micro_batches. */
void hx_sched_stage_costs(const struct hx_ctx *ctx, const struct hx_plan *plan,
                          const struct hx_pipeline *p, struct hx_stage_cost *cost);

/* The exact min-max split of `layers` identical layers over n stages in order:
 * counts[s] >= 1 and <= cost[s].max_layers, minimising max_s(per_layer *
 * counts + extra), ties broken towards the smaller sum. Returns the bottleneck
 * time, or -1 when no split fits. */
double hx_sched_split_layers(const struct hx_stage_cost *cost, int n, int layers, int *counts);

/* Lays the layers of p over its stages by hx_sched_split_layers. False when
 * no split fits memory. */
bool hx_sched_assign_layers(const struct hx_ctx *ctx, const struct hx_plan *plan,
                            struct hx_pipeline *p);

/* The stage costs and the layer split above given the plan's
 * hx_sched_opt_total (opt_total) and with a cache of stage times and memory
 * parts (sched_layers.c) that lives in, and grows, the arena it was made
 * in: a search's stages repeat across its pipelines and settings. The same
 * figures to the bit; a NULL cache is the plain functions. The cache holds
 * figures of one context: one per search. */
struct hx_sched_cost_cache;
struct hx_sched_cost_cache *hx_sched_cost_cache_new(struct hx_arena *a);
void hx_sched_stage_costs_cached(const struct hx_ctx *ctx, const struct hx_plan *plan,
                                 const struct hx_pipeline *p, double opt_total,
                                 struct hx_sched_cost_cache *cache, struct hx_stage_cost *cost);
bool hx_sched_assign_layers_cached(const struct hx_ctx *ctx, const struct hx_plan *plan,
                                   struct hx_pipeline *p, double opt_total,
                                   struct hx_sched_cost_cache *cache);

/* Splits `total` micro-batches over n pipelines, minimising the slowest
 * finish time (m_i - 1) * slowest_i + chain_i; m_i >= 1. Exact min-max
 * (greedy on monotone costs). False when total < n. */
bool hx_sched_split_batch(const double *slowest, const double *chain, int n, int64_t total,
                          int64_t *m);

/* Per pipeline, the bottleneck stage time and the fill/drain chain of one
 * micro-batch (all stages plus hops), at its micro_batch_size. */
void hx_sched_pipeline_times(const struct hx_ctx *ctx, const struct hx_pipeline *p,
                             double *slowest, double *chain);

/* ---- gradient sync groups (sched_sync.c) -------------------------------- */

/* Replaces plan->groups by the TP groups of every stage and, with more than
 * one pipeline, the HX_GROUP_GRAD sub-groups (per layer range where every
 * pipeline keeps the same stage, nslices = lcm of the TP degrees, slice k
 * owned by TP rank k * t_i / nslices of pipeline i), the HX_GROUP_UNSPLIT
 * union groups of the same ranges, and the embedding / LM head groups
 * (layer -1); under zero1, shares by free memory (see
 * hx_sched_build_groups_sharded). */
void hx_sched_build_groups(struct hx_ctx *ctx, struct hx_arena *a, struct hx_plan *plan);
/* The share of its optimizer state a device of stage st is priced with while
 * the layers are split (struct hx_stage.opt_share), before the groups and
 * their shard_ppm exist: its memory over the sum, across the plan's
 * pipelines, of each pipeline's mean device memory (1/dp on a uniform
 * cluster; the free-memory split it stands for gives the big devices more).
 * 0 (whole) without zero1 or with one pipeline. */
double hx_sched_opt_share(const struct hx_ctx *ctx, const struct hx_plan *plan,
                          const struct hx_stage *st);
/* The denominator of hx_sched_opt_share (the sum of each pipeline's mean
 * device memory; 0 without zero1 or with one pipeline): one pass over the
 * plan's devices, which the shares of all its stages have in common. */
double hx_sched_opt_total(const struct hx_ctx *ctx, const struct hx_plan *plan);
/* hx_sched_build_groups, then ZeRO-1 (issue 16): when the train block
 * allows it (optimizer_sharding = zero1) and the plan replicates weights,
 * marks the plan zero1 and gives every grad / unsplit group its shard_ppm:
 * with `even`, equal shares (Megatron's distributed optimizer, the
 * baselines); else shares in proportion to each member's free memory after
 * weights, gradients and activations (hx_plan_free_bytes, negative counted
 * as 0; all 0: equal). Parts per million, floored; the remainder goes to
 * the member with the most free memory (the first on ties).
 * hx_sched_build_groups is this with even = false. Plans with HexiSeq units
 * get no shard_ppm (even over every replica: passes/cost/cost.h,
 * hx_plan_sharded). */
void hx_sched_build_groups_sharded(struct hx_ctx *ctx, struct hx_arena *a, struct hx_plan *plan,
                                   bool even);

/* ---- planners ----------------------------------------------------------- */

/* The faster of ctx->baseline and ctx->baseline_subset (passes/baseline.c)
 * under the simulator, simulating either if it was not yet (the all-device
 * one on a tie); NULL when neither fits. Both planners take it as a
 * candidate, so hexic's plan is never slower than either baseline. */
struct hx_plan *hx_sched_baseline_seed(const struct hx_ctx *ctx);

/* The outer HexiScale search. Returns the best plan found (allocated in
 * ctx->arena, simulated), the baseline included as a candidate; NULL when
 * nothing fits. */
struct hx_plan *hx_sched_search(struct hx_ctx *ctx);

/* Local search over structures (sched_local.c): hill-climbs from a
 * completed plan over the structures one move away (split, merge or drop
 * pipelines; merge, move, split or drop stages; move, swap, add or drop
 * devices), each candidate skeleton priced by `price`: its score when that
 * is below `beat`, else any value >= beat (INFINITY when nothing fits), so
 * the caller may stop at a lower bound; *fresh false when the caller had it
 * memoised. After the climb, `kicks` times: one or two random moves from the
 * best structure and a climb again (iterated local search). budget counts
 * fresh pricings; a price of NAN (the caller's search has stopped) ends the
 * search at once. Returns the skeleton of the best structure reached (in a,
 * devices relabelled canonically), NULL when none beats start. Clusters of
 * at most HX_LOCAL_MAX_DEVICES devices (NULL on larger ones). */
enum { HX_LOCAL_MAX_DEVICES = 16 };
typedef double (*hx_sched_price_fn)(void *cookie, const struct hx_plan *skeleton, double beat,
                                    bool *fresh);
struct hx_plan *hx_sched_local_search(struct hx_ctx *ctx, struct hx_arena *a,
                                      const struct hx_plan *start, int budget, int kicks,
                                      hx_sched_price_fn price, void *cookie);

/* Relabelling (sched_local.c): a completed, simulated plan with two devices
 * of one GPU type on different machines exchanged (an unused one may take a
 * used one's place), layers and micro-batches kept, while one such exchange
 * makes the simulated iteration faster, at most `budget` exchanges tried.
 * The local search prices structures through a completion that re-splits
 * the layers and the batch by the estimate, which can rate the node-local
 * pairing of a TP group slower than the pairing across the network that the
 * simulator rates slower still; kept splits compare the placements alone.
 * Returns plan itself when nothing is faster (or the plan has HexiSeq
 * stages, or the cluster more than HX_LOCAL_MAX_DEVICES devices). */
struct hx_plan *hx_sched_relabel(struct hx_ctx *ctx, struct hx_arena *a, struct hx_plan *plan,
                                 int budget);

/* The exact planner for clusters of at most HX_EXHAUSTIVE_MAX_DEVICES. NULL
 * when nothing fits. */
enum { HX_EXHAUSTIVE_MAX_DEVICES = 8 };
struct hx_plan *hx_sched_exhaustive(struct hx_ctx *ctx);

/* Completes a plan whose pipelines have their stages: for every micro-batch
 * size tried and recompute setting allowed, splits the layers exactly and
 * the batch so pipelines finish together; keeps the fastest by the closed
 * form estimate. Returns the completed plan (new, in a) or NULL when no
 * setting fits memory. The skeleton's stages carry devices and tp only.
 * pieces: a memo of pipeline pieces (hx_sched_pieces_new below), or NULL. */
struct hx_sched_pieces;
struct hx_plan *hx_sched_complete(struct hx_ctx *ctx, struct hx_arena *a,
                                  const struct hx_plan *skeleton, struct hx_sched_pieces *pieces);

/* Whether the train block's recompute setting allows full recompute (full)
 * or none (!full): `auto` allows both. */
bool hx_sched_recompute_allowed(const struct hx_ctx *ctx, bool full);

/* The (micro-batch size, recompute) settings hx_sched_complete tries, in its
 * order: the train block's micro_batch or every power of two dividing the
 * global batch, times the recompute choices it allows. Returns how many
 * (at most HX_SCHED_MAX_SETTINGS). */
enum { HX_SCHED_MAX_SETTINGS = 128 };
int hx_sched_settings(const struct hx_ctx *ctx, int64_t *mbs, bool *recompute);

/* One setting of hx_sched_complete: the skeleton's stages with their ranks in
 * ascending order (the canonical TP rank order: devices of one machine are
 * interchangeable, so only which machines a stage spans matters), leaders,
 * the exact layer split and the exact batch split at that micro-batch size
 * and recompute. NULL when it does not fit memory or the batch. */
struct hx_plan *hx_sched_complete_setting(struct hx_ctx *ctx, struct hx_arena *a,
                                          const struct hx_plan *skeleton, int64_t mbs,
                                          bool recompute);

/* hx_sched_complete_setting with a micro-batch size per pipeline (each
 * dividing the global batch and each other, as hx_sched_settings' sizes
 * do): the batch split hands each pipeline micro-batches of its own size.
 * The generated programs take each pipeline's size from the plan. NULL
 * when it does not fit memory or the batch. */
struct hx_plan *hx_sched_complete_mixed(struct hx_ctx *ctx, struct hx_arena *a,
                                        const struct hx_plan *skeleton, const int64_t *mbs,
                                        bool recompute);

/* Every setting's completion at once: out[k] is what
 * hx_sched_complete_setting gives for (mbs[k], recompute[k]), k < n, bit
 * for bit, or NULL also where that setting cannot beat `beat` (a bound
 * below hx_sim_lower_bound's, from each stage's compute after the stages
 * before it, is above it). One working copy of the skeleton serves every
 * setting; survivors are copied into a. pieces (or NULL) is a memo of
 * pipeline pieces, each pipeline's leaders, layer split and times, which
 * depend on that pipeline, its setting and its micro-batches in flight
 * alone: a search whose skeletons share pipelines computes each once. It
 * lives in (and grows) the arena it was made in. */
struct hx_sched_pieces *hx_sched_pieces_new(struct hx_arena *a);
void hx_sched_complete_each(struct hx_ctx *ctx, struct hx_arena *a, const struct hx_plan *skeleton,
                            int n, const int64_t *mbs, const bool *recompute,
                            struct hx_sched_pieces *pieces, double beat, struct hx_plan **out);

#endif

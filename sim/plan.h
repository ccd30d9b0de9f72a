/* sim/plan.h -- clock plans: which clock pair every kernel of every rank
 * requests, early requests, and the clocks before a run (SimPlan); how
 * they are built and checked against a workload (sim/plan.c).  The
 * engine (sim/engine.h, which includes this) reads a plan; planners
 * (models/dvfs) write one.  What a request does, and when a switch lands,
 * is the engine's semantics (sim/engine.h).  The look-ahead that runs the
 * engine to move requests ahead of their latency, sim_plan_lookahead,
 * needs a machine and is declared in sim/engine.h.
 */
#ifndef SIM_PLAN_H
#define SIM_PLAN_H

#include "sim/workload.h"

G_BEGIN_DECLS

/* A requested clock pair; 0 means "auto" (the GPU's own boost behaviour). */
typedef struct {
  guint16 sm_mhz;
  guint16 mem_mhz;
} SimClocks;

/* An early request: kernel `op` of a rank also requests pair `pair`
 * lead_ns (>= 0) before it ends, or (from_start) before it starts (see
 * the semantics above). */
typedef struct {
  guint32 op;
  guint16 pair;
  gboolean from_start;
  gint64 lead_ns;
} SimAhead;

/* The clocks of one stream before a run: `cur` in force and, when
 * target differs, a switch to `target` in flight that lands land_ns into
 * the run (pair indices; set FALSE: the stream's first request). */
typedef struct {
  gboolean set;
  guint16 cur, target;
  gint64 land_ns;
} SimInit;

/* A plan: per op of every rank an index into `pairs`; `index` NULL (or
 * index[r] NULL) means pair 0 for every op of that rank.  `ahead` (NULL,
 * or ahead[r] NULL: none) lists rank r's early requests in the order they
 * are made (by op; for one op those before its start first; each kind by
 * decreasing lead), n_ahead[r] of them, each on a kernel op; `init`
 * (NULL, or init[r] NULL: none) the clocks of each of rank r's streams
 * before the run.  sim_engine_run checks both. */
typedef struct {
  guint n_pairs;
  SimClocks *pairs;    /* owned */
  guint16 **index;     /* owned; n_ranks arrays of n_ops, or NULL */
  guint n_ranks;
  SimAhead **ahead;    /* owned; n_ranks arrays, or NULL */
  guint32 *n_ahead;    /* owned; n_ranks counts (with ahead) */
  SimInit **init;      /* owned; n_ranks arrays of SIM_MAX_STREAMS, or NULL */
} SimPlan;

SimPlan *sim_plan_new_uniform(guint n_ranks, SimClocks clocks);
void sim_plan_free(SimPlan *p);
/* Adds a clock pair (de-duplicated) and returns its index. */
guint16 sim_plan_add_pair(SimPlan *p, SimClocks c);
/* Allocates rank r's per-op index array (zero-filled) and returns it. */
guint16 *sim_plan_rank_index(SimPlan *p, guint r, guint32 n_ops);
/* Allocates rank r's n early requests (replacing any; n = 0 removes them)
 * and returns them for the caller to fill in ascending op order. */
SimAhead *sim_plan_rank_ahead(SimPlan *p, guint r, guint32 n);
/* Allocates rank r's clocks before the run, SIM_MAX_STREAMS entries (none
 * set), and returns them. */
SimInit *sim_plan_rank_init(SimPlan *p, guint r);
/* The plan for every rank that plan p, made for folded workload w
 * (p->n_ranks == w->n_ranks), stands for: rank r takes its
 * representative's (w->fold_rep[r]) per-op indices, early requests and
 * clocks before the run.  A member runs its representative's program (the
 * same ops in the same order), so its op i is the representative's op i,
 * and the result replays on the unfolded workload as p does on w.  p's
 * own entries for folded-away ranks are ignored (the folded engine never
 * reads them; planners leave them unset).  With w not folded, a copy of
 * p.  Memory: the unfolded plan's, n_ranks x the representative's ops x 2
 * bytes when p has per-op indices.  Caller owns the result. */
SimPlan *sim_plan_unfold(const SimPlan *p, const SimWorkload *w);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimPlan, sim_plan_free)

/* Whether plan p's early requests and clocks before the run fit workload
 * w: requests on kernel ops of each rank, in the order they are made,
 * naming pairs p has, leads >= 0; clocks before the run naming pairs p
 * has and landing in the run.  FALSE with error set (SIM_ERROR_INVALID)
 * naming the first that does not.  sim_engine_run checks every plan it
 * is given with this. */
gboolean sim_plan_check(const SimPlan *p, const SimWorkload *w,
                        GError **error);

/* Look-ahead for one stream: kernels ks[0..n) in stream order, their
 * starts start_ns[ks[i]] in a plan's latency-free timeline (one iteration
 * of period_ns, starting at 0), their planned pairs intent[ks[i]].  Sets
 * req[ks[i]] to the pair planned for the last kernel starting at or
 * before start + latency_ns (wrapping into the next iteration), so a
 * switch requested there lands where the plan changes.  Only ks's entries
 * of req are written. */
void sim_plan_lookahead_stream(const guint32 *ks, guint32 n,
                               const gint64 *start_ns, gint64 period_ns,
                               gint64 latency_ns, const guint16 *intent,
                               guint16 *req);

G_END_DECLS

#endif

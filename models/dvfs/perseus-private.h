/* models/dvfs/perseus-private.h -- what the files of the Perseus planner
 * share and nothing else may use: the inside of a DAG (its pruned options
 * and adjacency, which the frontier walks), the inside of a PerseusModel
 * (which the pipeline driver reads), and the error helper.
 *
 *   perseus.c           the DAG: nodes, options, edges, finish, evaluation
 *   perseus_frontier.c  the frontier: exact DP and min-cut trajectory
 *   perseus_model.c     workloads on machines: pricing, plans, kernel plan
 *   pipeline_run.c      the reactor and perseus_run (Perseus, EnvPipe, Zeus)
 */
#ifndef MODELS_DVFS_PERSEUS_PRIVATE_H
#define MODELS_DVFS_PERSEUS_PRIVATE_H

#include "models/dvfs/perseus.h"

struct PerseusDag {
  guint n_gpus;
  double p_block;
  gboolean finished;
  GArray *gpu;       /* guint per node */
  GArray *opt_off;   /* guint, n + 1 */
  GArray *opts;      /* PerseusOption */
  GArray *edges;     /* guint32 pairs */
  /* After finish: */
  guint n;
  Dag *graph;        /* the edges' CSR and topological order (owned) */
  guint *succ_off, *succ, *pred_off, *pred;  /* graph's, borrowed */
  guint *topo;                               /* graph's, borrowed */
  guint *pr_off;     /* pruned options, n + 1 offsets */
  gint64 *pr_t;
  double *pr_c;
  guint16 *pr_orig;  /* index into the node's own options */
};

struct PerseusModel {
  PipelineGroups *g;
  PerseusDag *dag;
  guint n_clocks;
  guint16 *clocks;     /* option k of every node runs clocks[k] */
  guint n_ranks;
  guint32 *n_ops;      /* per rank */
  guint32 *fold_rep;   /* the workload's fold map (a copy), NULL unfolded:
                          plans give representatives only */
  gint64 max_tail_ns;  /* the longest stage tail (model_tails) */
  gint64 allmax_ns;    /* the all-max plan's engine iteration, latency 0 */
  gboolean *auto_tail; /* per stage: kernels outside computations (the
                          optimizer), run at auto clocks after them */
};

/* Sets a PERSEUS_ERROR_INVALID error with the formatted message; returns
 * FALSE. */
gboolean perseus_invalid(GError **error, const char *fmt, ...)
  G_GNUC_PRINTF(2, 3);

#endif

/* models/dvfs/perseus.c -- the computation DAG of the Perseus planner
 * (after Perseus, Chung et al., SOSP'24): nodes with per-clock options,
 * precedence edges, option pruning, and the time and energy of a plan.
 *
 * The planner's other parts: perseus_frontier.c (the time-energy
 * frontier), perseus_model.c (workloads on machines), pipeline_run.c (the
 * straggler reaction and perseus_run); perseus-private.h is what they
 * share.
 *
 * The DAG
 * -------
 * Nodes are computations (one forward or backward pass of one microbatch on
 * one pipeline stage); node i runs on DAG GPU g(i) (its stage) and has
 * options k = (clock f_k, duration t_ik, energy E_ik).  Edges are the
 * schedule's precedences: consecutive computations of a stage, F(s,m) ->
 * F(s+1,m) (activations), B(s+1,m) -> B(s,m) (gradients); F(s,m) before
 * B(s,m) follows from the stage order.  Edges carry no delay: a
 * computation that starts with a receive includes the transfer in its own
 * duration, which is what the engine does (a receive is posted when the
 * previous computation of the stage ends and its transfer starts at
 * max(sender done, receiver posted)); sends run on their own streams and
 * cost the sender nothing.
 *
 * Energy of a plan (an option per node), as the real system spends it: a
 * GPU that is not computing is blocked (waiting in NCCL) at P_block, so
 * with n GPUs and iteration time T = longest path,
 *
 *   E(plan) = sum_i E_i + P_block * (n T - sum_i t_i)
 *           = sum_i c_i + P_block n T,      c_i = E_i - P_block t_i.
 *
 * So for a fixed T the energy is separable in c, and an option that is
 * slower and has a higher c than another is useless: each node's options
 * are pruned to the (t, c) Pareto set (c strictly decreasing as t grows).
 * Measured noise (a lower clock measured faster) is pruned the same way.
 */
#include "models/dvfs/perseus-private.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

G_DEFINE_QUARK(perseus-error-quark, perseus_error)

gboolean perseus_invalid(GError **error, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error_literal(error, PERSEUS_ERROR, PERSEUS_ERROR_INVALID, msg);
  return FALSE;
}

PerseusDag *perseus_dag_new(guint n_gpus, double p_block_w)
{
  PerseusDag *d = g_new0(PerseusDag, 1);
  d->n_gpus = n_gpus;
  d->p_block = p_block_w;
  d->gpu = g_array_new(FALSE, FALSE, sizeof(guint));
  d->opt_off = g_array_new(FALSE, FALSE, sizeof(guint));
  guint zero = 0;
  g_array_append_val(d->opt_off, zero);
  d->opts = g_array_new(FALSE, FALSE, sizeof(PerseusOption));
  d->edges = g_array_new(FALSE, FALSE, sizeof(guint32));
  return d;
}

void perseus_dag_free(PerseusDag *d)
{
  if (d == NULL)
    return;
  g_array_unref(d->gpu);
  g_array_unref(d->opt_off);
  g_array_unref(d->opts);
  g_array_unref(d->edges);
  dag_free(d->graph);
  g_free(d->pr_off);
  g_free(d->pr_t);
  g_free(d->pr_c);
  g_free(d->pr_orig);
  g_free(d);
}

guint perseus_dag_add_node(PerseusDag *d, guint gpu, const PerseusOption *opts,
                           guint n)
{
  g_return_val_if_fail(d != NULL && !d->finished, 0);
  g_array_append_val(d->gpu, gpu);
  g_array_append_vals(d->opts, opts, n);
  guint end = d->opts->len;
  g_array_append_val(d->opt_off, end);
  return d->gpu->len - 1;
}

void perseus_dag_add_edge(PerseusDag *d, guint from, guint to)
{
  g_return_if_fail(d != NULL && !d->finished);
  guint32 e[2] = {from, to};
  g_array_append_vals(d->edges, e, 2);
}

const Dag *perseus_dag_graph(const PerseusDag *d)
{
  g_return_val_if_fail(d != NULL && d->finished, NULL);
  return d->graph;
}

guint perseus_dag_n_nodes(const PerseusDag *d)
{
  return d->gpu->len;
}

guint perseus_dag_n_gpus(const PerseusDag *d)
{
  return d->n_gpus;
}

double perseus_dag_p_block(const PerseusDag *d)
{
  return d->p_block;
}

guint perseus_dag_gpu(const PerseusDag *d, guint node)
{
  return g_array_index(d->gpu, guint, node);
}

guint perseus_dag_n_options(const PerseusDag *d, guint node)
{
  const guint *off = (const guint *)(void *)d->opt_off->data;
  return off[node + 1] - off[node];
}

const PerseusOption *perseus_dag_option(const PerseusDag *d, guint node,
                                        guint k)
{
  const guint *off = (const guint *)(void *)d->opt_off->data;
  g_return_val_if_fail(k < off[node + 1] - off[node], NULL);
  return &g_array_index(d->opts, PerseusOption, off[node] + k);
}

typedef struct {
  gint64 t;
  double c;
  guint16 orig;
} Cand;

static int cmp_cand(const void *a, const void *b)
{
  const Cand *x = a, *y = b;
  if (x->t != y->t)
    return x->t < y->t ? -1 : 1;
  if (x->c != y->c)
    return x->c < y->c ? -1 : 1;
  return (x->orig > y->orig) - (x->orig < y->orig);
}

/* Builds the CSR adjacency and the topological order (models/dag.h: Kahn
 * with a FIFO queue, sources in index order), which the frontier, EnvPipe
 * and the evaluation walk. */
static gboolean build_graph(PerseusDag *d, GError **error)
{
  guint n = d->n;
  guint ne = d->edges->len / 2;
  const guint32 *e = (const guint32 *)(void *)d->edges->data;
  guint32 bad = 0;
  d->graph = dag_new(n, e, ne, &bad);
  if (d->graph == NULL)
    return perseus_invalid(error, "edge %u -> %u: nodes out of range (%u "
                           "nodes) or a self-loop", e[2 * bad],
                           e[2 * bad + 1], n);
  d->succ_off = d->graph->succ_off;
  d->succ = d->graph->succ;
  d->pred_off = d->graph->pred_off;
  d->pred = d->graph->pred;
  d->topo = d->graph->topo;
  if (!dag_acyclic(d->graph))
    return perseus_invalid(error, "the computation graph has a cycle (%u of "
                           "%u nodes ordered)", d->graph->n_ordered, n);
  return TRUE;
}

gboolean perseus_dag_finish(PerseusDag *d, GError **error)
{
  g_return_val_if_fail(d != NULL && !d->finished, FALSE);
  guint n = d->n = d->gpu->len;
  if (n == 0)
    return perseus_invalid(error, "the computation graph is empty");
  if (n > PIPELINE_MAX_NODES) {
    g_set_error(error, PERSEUS_ERROR, PERSEUS_ERROR_LIMIT,
                "%u computations is more than %u", n, PIPELINE_MAX_NODES);
    return FALSE;
  }
  if (!(isfinite(d->p_block) && d->p_block >= 0.0))
    return perseus_invalid(error, "blocking power %g W must be finite and >= 0",
                   d->p_block);
  const guint *off = (const guint *)(void *)d->opt_off->data;
  d->pr_off = g_new0(guint, n + 1);
  GArray *pt = g_array_new(FALSE, FALSE, sizeof(gint64));
  GArray *pc = g_array_new(FALSE, FALSE, sizeof(double));
  GArray *po = g_array_new(FALSE, FALSE, sizeof(guint16));
  g_autofree Cand *cand = NULL;
  guint cap = 0;
  gboolean ok = TRUE;
  for (guint i = 0; i < n && ok; i++) {
    guint g = g_array_index(d->gpu, guint, i);
    guint no = off[i + 1] - off[i];
    if (g >= d->n_gpus) {
      ok = perseus_invalid(error, "node %u runs on GPU %u of %u", i, g, d->n_gpus);
      break;
    }
    if (no == 0 || no > G_MAXUINT16) {
      ok = perseus_invalid(error, "node %u has %u options (must be 1..65535)", i, no);
      break;
    }
    if (no > cap) {
      cap = no;
      cand = g_renew(Cand, cand, cap);
    }
    for (guint k = 0; k < no; k++) {
      const PerseusOption *o = &g_array_index(d->opts, PerseusOption,
                                              off[i] + k);
      if (o->time_ns <= 0 || !(isfinite(o->energy_j) && o->energy_j >= 0)) {
        ok = perseus_invalid(error, "node %u option %u (%u MHz): time %" G_GINT64_FORMAT
                     " ns and energy %g J must be > 0 and finite", i, k,
                     o->sm_mhz, o->time_ns, o->energy_j);
        break;
      }
      cand[k].t = o->time_ns;
      cand[k].c = o->energy_j - d->p_block * (double)o->time_ns * 1e-9;
      cand[k].orig = (guint16)k;
    }
    if (!ok)
      break;
    qsort(cand, no, sizeof(Cand), cmp_cand);
    /* Keep the (t, c) Pareto set: c strictly decreasing as t grows. */
    double best = G_MAXDOUBLE;
    for (guint k = 0; k < no; k++) {
      if (cand[k].c < best) {
        best = cand[k].c;
        g_array_append_val(pt, cand[k].t);
        g_array_append_val(pc, cand[k].c);
        g_array_append_val(po, cand[k].orig);
      }
    }
    d->pr_off[i + 1] = pt->len;
  }
  d->pr_t = (gint64 *)(void *)g_array_free(pt, FALSE);
  d->pr_c = (double *)(void *)g_array_free(pc, FALSE);
  d->pr_orig = (guint16 *)(void *)g_array_free(po, FALSE);
  if (!ok || !build_graph(d, error))
    return FALSE;
  d->finished = TRUE;
  return TRUE;
}

PerseusDag *perseus_dag_pipeline(guint S, guint M, const guint32 *const *order,
                                 const PerseusOption *const *opts,
                                 const guint *n_opts, const gint64 *tail_ns,
                                 double p_block_w, GError **error)
{
  g_return_val_if_fail(order != NULL && opts != NULL && n_opts != NULL, NULL);
  if (S == 0 || M == 0 || (guint64)2 * S * M > PIPELINE_MAX_NODES) {
    g_set_error(error, PERSEUS_ERROR, PERSEUS_ERROR_LIMIT,
                "a pipeline of %u stages x %u microbatches cannot be planned "
                "(1..%u computations)", S, M, PIPELINE_MAX_NODES);
    return NULL;
  }
  guint n = 2 * S * M;
  g_autoptr(PerseusDag) d = perseus_dag_new(S, p_block_w);
  for (guint id = 0; id < n; id++)
    perseus_dag_add_node(d, id / (2 * M), opts[id], n_opts[id]);
  g_autofree guint8 *seen = g_new0(guint8, n);
  for (guint s = 0; s < S; s++) {
    for (guint k = 0; k < 2 * M; k++) {
      guint32 id = order[s][k];
      if (id >= n || id / (2 * M) != s || seen[id]) {
        perseus_invalid(error, "stage %u: position %u of its order names node %u "
                "(not one of its own computations, or twice)", s, k, id);
        return NULL;
      }
      if ((id & 1u) && !seen[id - 1]) {
        perseus_invalid(error, "stage %u: the backward of microbatch %u comes before "
                "its forward", s, (id / 2) % M);
        return NULL;
      }
      seen[id] = 1;
      if (k > 0)
        perseus_dag_add_edge(d, order[s][k - 1], id);
    }
  }
  /* F(s,m) -> B(s,m) holds through the stage order (checked above), so it
   * is not added: fewer edges, narrower DP states. */
  for (guint s = 0; s < S; s++)
    for (guint m = 0; m < M; m++) {
      if (s + 1 < S) {
        perseus_dag_add_edge(d, pipeline_node_id(M, s, m, FALSE),
                             pipeline_node_id(M, s + 1, m, FALSE));
        perseus_dag_add_edge(d, pipeline_node_id(M, s + 1, m, TRUE),
                             pipeline_node_id(M, s, m, TRUE));
      }
    }
  for (guint s = 0; tail_ns != NULL && s < S; s++) {
    if (tail_ns[s] <= 0)
      continue;
    PerseusOption o = {0, tail_ns[s], p_block_w * (double)tail_ns[s] * 1e-9};
    guint t = perseus_dag_add_node(d, s, &o, 1);
    perseus_dag_add_edge(d, order[s][2 * M - 1], t);
  }
  if (!perseus_dag_finish(d, error))
    return NULL;
  return g_steal_pointer(&d);
}

void perseus_dag_structure(const PerseusDag *d, const guint **topo,
                           const guint **pred_off, const guint **pred,
                           const guint **succ_off, const guint **succ,
                           guint *n_edges)
{
  g_return_if_fail(d != NULL && d->finished);
  *topo = d->topo;
  *pred_off = d->pred_off;
  *pred = d->pred;
  *succ_off = d->succ_off;
  *succ = d->succ;
  *n_edges = d->edges->len / 2;
}

guint16 *perseus_dag_max_choice(const PerseusDag *d)
{
  guint n = perseus_dag_n_nodes(d);
  guint16 *c = g_new0(guint16, MAX(n, 1u));
  for (guint i = 0; i < n; i++) {
    guint no = perseus_dag_n_options(d, i);
    guint best = 0;
    for (guint k = 1; k < no; k++) {
      const PerseusOption *o = perseus_dag_option(d, i, k);
      const PerseusOption *b = perseus_dag_option(d, i, best);
      if (o->sm_mhz > b->sm_mhz)
        best = k;
    }
    c[i] = (guint16)best;
  }
  return c;
}

/* Duration of node i under option k of its own list, scaled by f. */
static inline gint64 scaled_ns(gint64 t, double f)
{
  return f == 1.0 ? t : (gint64)llround((double)t * f);
}

void perseus_dag_eval(const PerseusDag *d, const guint16 *choice,
                      const double *gpu_factor, gint64 *time_ns,
                      double *energy_j)
{
  g_return_if_fail(d != NULL && d->finished && choice != NULL);
  guint n = d->n;
  g_autofree gint64 *t = g_new(gint64, n);
  double e = 0.0, busy_s = 0.0;
  /* Sums in topological order, as they always were. */
  for (guint q = 0; q < n; q++) {
    guint i = d->topo[q];
    const PerseusOption *o = perseus_dag_option(d, i, choice[i]);
    double f = gpu_factor != NULL && o->sm_mhz != 0
                 ? gpu_factor[g_array_index(d->gpu, guint, i)]
                 : 1.0;
    t[i] = scaled_ns(o->time_ns, f);
    e += o->energy_j * f;
    busy_s += (double)t[i] * 1e-9;
  }
  gint64 T = dag_longest_path(d->graph, t);
  *time_ns = T;
  *energy_j = e + d->p_block * ((double)T * 1e-9 * d->n_gpus - busy_s);
}

/* models/cluster.c -- a cluster of identical GPUs on a network, and the
 * SimMachine that prices a workload's ops on it.
 *
 * Model
 * -----
 * Placement: rank r runs on GPU r; GPU g sits on node g / gpus_per_node
 * (Megatron order comes from the workload's rank numbering: TP innermost, so
 * a TP group of <= gpus_per_node consecutive ranks stays inside one node).
 *
 * Kernels.  Ops carry ref_ns, their duration on the reference GPU
 * (w->ref_gpu, looked up in the catalogue) at its auto clocks.  For a shape
 * with kernel k (class, FLOPs, bytes, tensor):
 *
 *   t_ref          = gpu_kernel_cost(ref, k, auto, auto, cap).time_s
 *                    (cap: none for kernels with FLOPs/bytes; the reference
 *                    GPU's default limit for measured kernels without them,
 *                    whose recorded durations already include the real cap)
 *   cost           = gpu_kernel_cost(gpu, k, sm, mem, power_limit)
 *   time_scale     = cost.time_s / t_ref * perf[g]
 *   power_w        = cost.power_w * power_factor[g]
 *
 * so a shape run on the reference GPU at auto clocks with no binding cap has
 * time_scale 1 exactly (times perf[g]).  The power limit is the override or
 * the spec's default.  When t_ref is not positive (no FLOPs and no bytes and
 * a model that gives 0), the shape keeps its recorded duration
 * (time_scale = perf[g]).
 *
 * Variability.  Per GPU g, from PCG stream sim_pcg_for_entity(seed,
 * SIM_PCG_GPU, g), two draws u1, u2 in [0, 1):
 *
 *   perf[g]         = 1 + perf_spread * u1            in [1, 1 + spread)
 *   power_factor[g] = 1 + power_spread * (2 u2 - 1)   in [1 - s, 1 + s)
 *
 * Both are exactly 1.0 when their spread is 0 (no draw is even made when
 * both spreads are 0).  A GPU's draws depend only on (seed, g): growing the
 * cluster does not change existing GPUs' factors.  The power factor scales
 * idle, blocked and communication power as well as kernel power.
 *
 * Communication.  Each workload group is reduced to a NetGroupShape
 * (members, distinct nodes, most members on one node) once; a collective's
 * duration is net_collective_time_s(net, type, bytes, shape, AUTO, 1)
 * rounded to the nearest ns (at least 1 ns for groups of 2+).  p2p uses
 * net_p2p_time_s with same_node = (src and dst on one node).
 *
 * Caching.  The GPU model's answer depends on (shape, SM clock, memory
 * clock) only; it is computed on first use and kept in a hash table
 * guarded by a mutex (the callbacks may be called from several threads).  Per-GPU factors are applied on the way out, so the callbacks
 * are pure functions of their arguments.
 *
 * Table-driven shapes.  When the workload carries a measured price table
 * (models/table.h, in its provenance), the shapes the table maps are priced
 * from it instead of the GPU model: time_scale = t(f)/t(f_max) * perf[g],
 * power_w = E(f)/t(f) * power_factor[g] (models/table.c), capped only by an
 * explicit power_limit_w override.  A clock outside an entry's measured range
 * is priced at the nearest measured clock and remembered as an error that
 * cluster_machine_check() reports (the callback itself cannot fail).
 *
 * Known limits
 * ------------
 * - One GPU model for the whole cluster (heterogeneous clusters: not yet).
 * - Factors are applied after the power cap: a GPU with power_factor > 1
 *   may report power above the limit instead of throttling.
 * - The network sees one collective at a time (concurrent = 1): overlapping
 *   collectives on the same links are not slowed down here.
 * - iteration_begin is NULL: plans are not changed by the machine.
 */
#include "models/cluster.h"

#include <math.h>
#include <stdlib.h>

#include "sim/pcg.h"

G_DEFINE_QUARK(cluster-error-quark, cluster_error)

/* ------------------------------------------------------------------------ */
/* Cluster                                                                   */

/* Checks the sizes (shared by cluster_new and cluster_validate). */
static gboolean check_sizes(guint n_gpus, guint gpus_per_node, GError **error)
{
  if (n_gpus == 0 || n_gpus > CLUSTER_MAX_GPUS) {
    g_set_error(error, CLUSTER_ERROR, CLUSTER_ERROR_INVALID,
                "cluster: n_gpus = %u must be in 1..%u", n_gpus,
                CLUSTER_MAX_GPUS);
    return FALSE;
  }
  if (gpus_per_node == 0 || gpus_per_node > CLUSTER_MAX_GPUS_PER_NODE) {
    g_set_error(error, CLUSTER_ERROR, CLUSTER_ERROR_INVALID,
                "cluster: gpus_per_node = %u must be in 1..%u", gpus_per_node,
                CLUSTER_MAX_GPUS_PER_NODE);
    return FALSE;
  }
  return TRUE;
}

/* Returns a new cluster (caller owns) or NULL with CLUSTER_ERROR_INVALID
 * (bad sizes) or the spec's own error (invalid GPU or network spec). */
Cluster *cluster_new(const GpuSpec *gpu, const NetSpec *net, guint n_gpus,
                     guint gpus_per_node, GError **error)
{
  g_return_val_if_fail(gpu != NULL && net != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);

  if (gpus_per_node == 0)
    gpus_per_node = 8;
  if (!check_sizes(n_gpus, gpus_per_node, error))
    return NULL;

  g_autoptr(Cluster) c = g_new0(Cluster, 1);
  c->n_gpus = n_gpus;
  c->gpus_per_node = gpus_per_node;
  c->gpu = gpu_spec_copy(gpu);
  c->net = net_spec_copy(net);
  c->power_limit_w = -1.0;
  c->idle_power_w = -1.0;
  c->blocked_power_w = -1.0;
  c->comm_power_w = -1.0;
  c->switch_latency_ms = -1.0;
  c->perf_spread = 0.0;
  c->power_spread = 0.0;
  node_preset("none", &c->node, NULL);
  c->pue = 1.0;
  if (!cluster_validate(c, error))
    return NULL;
  return g_steal_pointer(&c);
}

void cluster_free(Cluster *c)
{
  if (c == NULL)
    return;
  gpu_spec_free(c->gpu);
  net_spec_free(c->net);
  g_free(c);
}

Cluster *cluster_copy(const Cluster *c, GError **error)
{
  g_return_val_if_fail(c != NULL, NULL);
  Cluster *r = cluster_new(c->gpu, c->net, c->n_gpus, c->gpus_per_node,
                           error);
  if (r == NULL)
    return NULL;
  GpuSpec *gpu = r->gpu;
  NetSpec *net = r->net;
  *r = *c;
  r->gpu = gpu;
  r->net = net;
  return r;
}

static const char *const boost_names[] = {"per-kernel", "controller", NULL};

const char *cluster_boost_name(ClusterBoost b)
{
  return (guint)b < G_N_ELEMENTS(boost_names) - 1 ? boost_names[b] : NULL;
}

int cluster_boost_from_name(const char *s)
{
  for (int i = 0; s != NULL && boost_names[i] != NULL; i++)
    if (strcmp(s, boost_names[i]) == 0)
      return i;
  return -1;
}

/* An override is "unset" when < 0; set, it must be finite and >= 0.  NaN is
 * neither, and is refused. */
static gboolean check_override(const char *field, double v, GError **error)
{
  if (v < 0.0 || (isfinite(v) && v >= 0.0))
    return TRUE;
  g_set_error(error, CLUSTER_ERROR, CLUSTER_ERROR_INVALID,
              "cluster: %s = %g must be a finite number >= 0 (or < 0 for "
              "the catalogue value)", field, v);
  return FALSE;
}

static gboolean check_spread(const char *field, double v, GError **error)
{
  if (v >= 0.0 && v <= 0.5)
    return TRUE;
  g_set_error(error, CLUSTER_ERROR, CLUSTER_ERROR_INVALID,
              "cluster: %s = %g must be in [0, 0.5]", field, v);
  return FALSE;
}

/* Checks sizes, both specs, every override and the spreads.  Returns FALSE
 * with an error naming the field on the first violation. */
gboolean cluster_check_folded(const Cluster *c, const SimWorkload *w,
                              GError **error)
{
  g_return_val_if_fail(c != NULL && w != NULL, FALSE);
  if (w->fold_rep == NULL)
    return TRUE;
  if (c->perf_spread > 0 || c->power_spread > 0) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                "the workload is folded but the cluster has per-GPU "
                "variability (perf %g, power %g): the members of a class "
                "would no longer run like their representative%s",
                c->perf_spread, c->power_spread, CLUSTER_FOLDED_HINT);
    return FALSE;
  }
  if (c->gpus_per_node > 0 && c->n_gpus % c->gpus_per_node != 0) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                "the workload is folded but the cluster's last node is "
                "partly filled (%u GPUs, %u per node): groups placed on it "
                "would not be priced like their representatives'%s",
                c->n_gpus, c->gpus_per_node, CLUSTER_FOLDED_HINT);
    return FALSE;
  }
  return TRUE;
}

gboolean cluster_validate(const Cluster *c, GError **error)
{
  g_return_val_if_fail(c != NULL, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);

  if (!check_sizes(c->n_gpus, c->gpus_per_node, error))
    return FALSE;
  if (c->gpu == NULL || c->net == NULL) {
    g_set_error(error, CLUSTER_ERROR, CLUSTER_ERROR_INVALID,
                "cluster: missing %s spec", c->gpu == NULL ? "GPU" : "network");
    return FALSE;
  }
  if (!gpu_spec_validate(c->gpu, error))
    return FALSE;
  if (!net_spec_validate(c->net, error))
    return FALSE;

  if (!check_override("power_limit_w", c->power_limit_w, error) ||
      !check_override("idle_power_w", c->idle_power_w, error) ||
      !check_override("blocked_power_w", c->blocked_power_w, error) ||
      !check_override("comm_power_w", c->comm_power_w, error) ||
      !check_override("switch_latency_ms", c->switch_latency_ms, error))
    return FALSE;
  double lo = c->gpu->power_min_w.v, hi = c->gpu->power_max_w.v;
  if (c->power_limit_w >= 0.0 &&
      (c->power_limit_w < lo || c->power_limit_w > hi)) {
    g_set_error(error, CLUSTER_ERROR, CLUSTER_ERROR_INVALID,
                "cluster: power_limit_w = %g is outside %s's range "
                "%g..%g W", c->power_limit_w, c->gpu->name, lo, hi);
    return FALSE;
  }

  if (cluster_boost_name(c->boost) == NULL) {
    g_set_error(error, CLUSTER_ERROR, CLUSTER_ERROR_INVALID,
                "cluster: unknown boost mode %d", (int)c->boost);
    return FALSE;
  }
  return check_spread("perf_spread", c->perf_spread, error) &&
         check_spread("power_spread", c->power_spread, error) &&
         node_validate(&c->node, error) && node_check_pue(c->pue, error);
}

guint cluster_n_nodes(const Cluster *c)
{
  g_return_val_if_fail(c != NULL && c->gpus_per_node > 0, 0);
  return (c->n_gpus + c->gpus_per_node - 1) / c->gpus_per_node;
}

guint cluster_gpu_node(const Cluster *c, guint gpu)
{
  g_return_val_if_fail(c != NULL && c->gpus_per_node > 0, 0);
  return gpu / c->gpus_per_node;
}

SimClocks cluster_default_clocks(const Cluster *c)
{
  SimClocks auto_clocks = { 0, 0 };
  return auto_clocks;
}

/* ------------------------------------------------------------------------ */
/* Machine                                                                   */

/* The GPU-independent price of one (shape, clock pair): the key packs the
 * shape index and the snapped clocks (0 = auto). */
typedef struct {
  guint64 key;        /* first: read by g_int64_hash / g_int64_equal */
  double ratio;       /* cost.time_s / t_ref */
  double power_w;
  guint16 sm_mhz, mem_mhz;
} CostEntry;

typedef struct {
  GpuKernel kernel;
  double t_ref_s;     /* <= 0: keep the recorded duration */
} ShapeInfo;

struct ClusterMachine {
  SimMachine sim;          /* the engine's view; ctx points back here */
  const GpuSpec *gpu;      /* borrowed from the cluster */
  const NetSpec *net;      /* borrowed from the cluster */
  guint n_gpus, gpus_per_node;
  double power_limit_w;    /* passed to the GPU model (<= 0: default) */

  double *idle_power_w, *blocked_power_w, *comm_power_w; /* n_gpus each */
  double *held_limit_w;    /* n_gpus: the limit the board holds the sum of
                              its streams to (per-kernel cap), or NULL */
  double *perf, *power_factor;                           /* n_gpus each */
  SimBoost *boost;         /* n_gpus controllers, or NULL (per-kernel cap) */

  guint n_shapes;
  ShapeInfo *shapes;
  guint n_groups;
  NetGroupShape *groups;

  GMutex lock;             /* guards cache and table_error */
  GHashTable *cache;       /* CostEntry* (key and value) */
  PriceTable *table;       /* measured prices of some shapes, or NULL */
  GError *table_error;     /* first out-of-range table request */
  gboolean off_grid;       /* clocks may arrive off the GPU's steps */
};

static guint64 cache_key(guint32 shape, guint sm, guint mem)
{
  return ((guint64)shape << 32) | ((guint64)MIN(sm, G_MAXUINT16) << 16) |
         (guint64)MIN(mem, G_MAXUINT16);
}

/* Looks up (or computes and stores) the GPU-independent cost of `shape` at
 * snapped clocks sm/mem (0 = auto).  Copies the entry into *out. */
static void cost_lookup(ClusterMachine *m, guint32 shape, guint sm, guint mem,
                        CostEntry *out)
{
  guint64 key = cache_key(shape, sm, mem);

  g_mutex_lock(&m->lock);
  const CostEntry *hit = g_hash_table_lookup(m->cache, &key);
  if (hit != NULL) {
    *out = *hit;
    g_mutex_unlock(&m->lock);
    return;
  }
  g_mutex_unlock(&m->lock);

  /* Computed outside the lock: the model is pure, so two threads racing on
   * the same key compute the same entry and the second insert is a no-op. */
  const ShapeInfo *si = &m->shapes[shape];
  GpuCost cost = { 0 };
  gpu_kernel_cost(m->gpu, &si->kernel, sm, mem, m->power_limit_w, &cost);
  CostEntry *e = g_new(CostEntry, 1);
  e->key = key;
  e->ratio = si->t_ref_s > 0.0 && isfinite(cost.time_s)
               ? cost.time_s / si->t_ref_s
               : 1.0;
  e->power_w = cost.power_w;
  e->sm_mhz = (guint16)MIN(cost.sm_mhz, G_MAXUINT16);
  e->mem_mhz = (guint16)MIN(cost.mem_mhz, G_MAXUINT16);
  *out = *e;

  g_mutex_lock(&m->lock);
  if (g_hash_table_contains(m->cache, &key))
    g_free(e);
  else
    g_hash_table_add(m->cache, e);
  g_mutex_unlock(&m->lock);
}

/* Prices a table-driven shape (see the opening comment). */
static void table_kernel_cost(ClusterMachine *m, guint entry, guint gpu,
                              SimClocks req, SimCost *out)
{
  GError *err = NULL;
  if (!price_table_cost(m->table, entry, req.sm_mhz, m->power_limit_w, out,
                        &err)) {
    g_mutex_lock(&m->lock);
    if (m->table_error == NULL)
      m->table_error = g_steal_pointer(&err);
    g_mutex_unlock(&m->lock);
    g_clear_error(&err);
  }
  out->time_scale *= m->perf[gpu];
  out->power_w *= m->power_factor[gpu];
}

/* SimMachine.kernel_cost: see the opening comment. */
static void machine_kernel_cost(gpointer ctx, guint gpu, guint32 shape,
                                SimClocks req, guint iter, SimCost *out)
{
  ClusterMachine *m = ctx;
  g_return_if_fail(m != NULL && out != NULL);
  g_return_if_fail(gpu < m->n_gpus && shape < m->n_shapes);

  if (m->table != NULL) {
    gint entry = price_table_shape_entry(m->table, shape);
    if (entry >= 0) {
      table_kernel_cost(m, (guint)entry, gpu, req, out);
      return;
    }
  }

  guint sm = req.sm_mhz, mem = req.mem_mhz;
  if (m->off_grid) {
    sm = sm != 0 ? gpu_snap_sm(m->gpu, sm) : 0;
    mem = mem != 0 ? gpu_snap_mem(m->gpu, mem) : 0;
  }
  CostEntry e;
  cost_lookup(m, shape, sm, mem, &e);
  out->time_scale = e.ratio * m->perf[gpu];
  out->power_w = e.power_w * m->power_factor[gpu];
  out->sm_mhz = e.sm_mhz;
  out->mem_mhz = e.mem_mhz;
}

/* Seconds to integer ns, rounded to nearest, at least 1 ns, clamped far
 * below gint64 overflow. */
static gint64 to_ns(double s)
{
  double ns = s * 1e9;
  if (!(ns < 9e18))
    return (gint64)9e18;
  return MAX((gint64)llround(ns), (gint64)1);
}

static gint64 machine_collective_ns(gpointer ctx, guint32 group, double bytes,
                                    SimCollType coll, gint64 start_ns)
{
  ClusterMachine *m = ctx;
  g_return_val_if_fail(m != NULL && group < m->n_groups, 0);
  g_return_val_if_fail(coll < SIM_COLL_COUNT, 0);
  const NetGroupShape *g = &m->groups[group];
  if (g->n_ranks <= 1)
    return 0;
  return to_ns(net_collective_time_s(m->net, coll, bytes, g, NET_ALGO_AUTO,
                                     1));
}

static gint64 machine_p2p_ns(gpointer ctx, guint src, guint dst, double bytes,
                             gint64 start_ns)
{
  ClusterMachine *m = ctx;
  g_return_val_if_fail(m != NULL && src < m->n_gpus && dst < m->n_gpus, 0);
  gboolean same = src / m->gpus_per_node == dst / m->gpus_per_node;
  return to_ns(net_p2p_time_s(m->net, bytes, same));
}

static int cmp_guint32(const void *a, const void *b)
{
  guint32 x = *(const guint32 *)a, y = *(const guint32 *)b;
  return (x > y) - (x < y);
}

/* Fills m->groups from the workload's groups (node of rank r = r / gpn). */
static gboolean build_groups(ClusterMachine *m, const SimWorkload *w,
                             GError **error)
{
  m->n_groups = sim_workload_n_groups(w);
  m->groups = g_new0(NetGroupShape, MAX(m->n_groups, 1u));
  g_autoptr(GArray) nodes = g_array_new(FALSE, FALSE, sizeof(guint32));

  for (guint32 gi = 0; gi < m->n_groups; gi++) {
    guint n = 0;
    const guint32 *members = sim_workload_group(w, gi, &n);
    g_array_set_size(nodes, n);
    guint32 *nd = (guint32 *)(void *)nodes->data;
    for (guint i = 0; i < n; i++) {
      if (members[i] >= m->n_gpus) {
        g_set_error(error, CLUSTER_ERROR, CLUSTER_ERROR_MISMATCH,
                    "group %u names rank %u but the cluster has %u GPUs", gi,
                    members[i], m->n_gpus);
        return FALSE;
      }
      nd[i] = members[i] / m->gpus_per_node;
    }
    qsort(nd, n, sizeof(guint32), cmp_guint32);

    /* Distinct nodes and the longest run of one node. */
    NetGroupShape *s = &m->groups[gi];
    s->n_ranks = n;
    for (guint i = 0, run = 0; i < n; i++) {
      run = (i > 0 && nd[i] == nd[i - 1]) ? run + 1 : 1;
      if (run == 1)
        s->n_nodes++;
      s->max_per_node = MAX(s->max_per_node, run);
    }
  }
  return TRUE;
}

/* Fills m->shapes: the GPU kernel of each shape and its reference time on
 * `ref` at auto clocks without a power cap.  Refuses negative or
 * non-finite FLOPs/bytes (the network and GPU models need them sane). */
static gboolean build_shapes(ClusterMachine *m, const SimWorkload *w,
                             const GpuSpec *ref, GError **error)
{
  m->n_shapes = w->shapes->len;
  m->shapes = g_new0(ShapeInfo, MAX(m->n_shapes, 1u));
  for (guint i = 0; i < m->n_shapes; i++) {
    const SimShape *sh = &g_array_index(w->shapes, SimShape, i);
    if (!(isfinite(sh->flops) && sh->flops >= 0.0 && isfinite(sh->bytes) &&
          sh->bytes >= 0.0)) {
      g_set_error(error, CLUSTER_ERROR, CLUSTER_ERROR_MISMATCH,
                  "shape %u ('%s'): flops = %g and bytes = %g must be finite "
                  "and >= 0", i,
                  sh->name < w->names->len ? sim_workload_name(w, sh->name)
                                           : "?",
                  sh->flops, sh->bytes);
      return FALSE;
    }
    ShapeInfo *si = &m->shapes[i];
    si->kernel.klass = sh->klass < SIM_CLASS_COUNT ? (SimOpClass)sh->klass
                                                   : SIM_CLASS_OTHER;
    si->kernel.flops = sh->flops;
    si->kernel.bytes = sh->bytes;
    si->kernel.tensor = sh->tensor;
    si->t_ref_s = 0.0;
    if (si->kernel.klass == SIM_CLASS_COMM)
      continue; /* priced by the network model, never by the GPU model */
    GpuCost cost = { 0 };
    /* Measured (relative) kernels were timed under the reference GPU's
     * default power limit; modelled ones are referenced without a cap. */
    gboolean relative = !(si->kernel.flops > 0) && !(si->kernel.bytes > 0);
    gpu_kernel_cost(ref, &si->kernel, 0, 0,
                    relative ? ref->power_limit_w.v : G_MAXDOUBLE, &cost);
    if (isfinite(cost.time_s) && cost.time_s > 0.0)
      si->t_ref_s = cost.time_s;
  }
  return TRUE;
}

double cluster_idle_power_w(const Cluster *c)
{
  return c->idle_power_w >= 0.0 ? c->idle_power_w : c->gpu->idle_power_w.v;
}

double cluster_blocked_power_w(const Cluster *c)
{
  return c->blocked_power_w >= 0.0 ? c->blocked_power_w
                                   : c->gpu->blocked_power_w.v;
}

double cluster_comm_power_w(const Cluster *c)
{
  return c->comm_power_w >= 0.0 ? c->comm_power_w : c->gpu->comm_power_w.v;
}

/* Draws the per-GPU factors from the run's seed and fills the per-GPU
 * power tables. */
static void build_gpus(ClusterMachine *m, const Cluster *c, guint64 seed)
{
  guint n = m->n_gpus;
  m->perf = g_new(double, n);
  m->power_factor = g_new(double, n);
  m->idle_power_w = g_new(double, n);
  m->blocked_power_w = g_new(double, n);
  m->comm_power_w = g_new(double, n);

  double idle = cluster_idle_power_w(c);
  double blocked = cluster_blocked_power_w(c);
  double comm = cluster_comm_power_w(c);
  gboolean vary = c->perf_spread > 0.0 || c->power_spread > 0.0;

  for (guint g = 0; g < n; g++) {
    double perf = 1.0, pf = 1.0;
    if (vary) {
      /* Always two draws in this order, so one spread being 0 does not
       * change the other's values. */
      SimPcg rng;
      sim_pcg_for_entity(&rng, seed, SIM_PCG_GPU, g);
      double u1 = sim_pcg_double(&rng);
      double u2 = sim_pcg_double(&rng);
      perf = 1.0 + c->perf_spread * u1;
      pf = 1.0 + c->power_spread * (2.0 * u2 - 1.0);
    }
    m->perf[g] = perf;
    m->power_factor[g] = pf;
    m->idle_power_w[g] = idle * pf;
    m->blocked_power_w[g] = blocked * pf;
    m->comm_power_w[g] = comm * pf;
  }
}

/* The board limit the engine holds concurrent streams to, per GPU: the
 * limit the per-kernel cap prices against, scaled like every other power
 * of that GPU (a kernel at the cap draws limit x pf).  None under the
 * boost controller (its average holds the limit, late), nor for measured
 * prices without an explicit limit: like the table's own cap
 * (models/table.c), the measurement holds its GPU's behaviour, measured
 * under a limit of its own. */
static void build_held_limit(ClusterMachine *m, const Cluster *c)
{
  if (m->boost != NULL || (m->table != NULL && !(c->power_limit_w > 0.0)))
    return;
  double limit = c->power_limit_w > 0.0 ? c->power_limit_w
                                        : c->gpu->power_limit_w.v;
  m->held_limit_w = g_new(double, m->n_gpus);
  for (guint g = 0; g < m->n_gpus; g++)
    m->held_limit_w[g] = limit * m->power_factor[g];
}

/* The boost controllers (sim/engine.h SimBoost), one per GPU, from the
 * spec's boost_* parameters (0: GPU_BOOST_* defaults, one clock step) and
 * the limit in force; a 1% hysteresis below the limit (an estimate). */
static void build_boost(ClusterMachine *m, const Cluster *c)
{
  const GpuSpec *g = c->gpu;
  double limit = c->power_limit_w >= 0.0 ? c->power_limit_w
                                         : g->power_limit_w.v;
  double win = g->boost_window_ms.v > 0 ? g->boost_window_ms.v
                                        : GPU_BOOST_WINDOW_MS;
  double per = g->boost_period_ms.v > 0 ? g->boost_period_ms.v
                                        : GPU_BOOST_PERIOD_MS;
  double step = g->boost_step_mhz.v > 0 ? g->boost_step_mhz.v
                                        : g->sm_step_mhz.v;
  SimBoost b = {
    .limit_w = limit,
    .margin_w = 0.01 * limit,
    .window_ns = MAX((gint64)llround(win * 1e6), 1),
    .period_ns = MAX((gint64)llround(per * 1e6), 1),
    .step_mhz = (guint16)CLAMP(lround(step), 1, G_MAXUINT16),
    .min_mhz = (guint16)lround(g->sm_min_mhz.v),
    .max_mhz = (guint16)lround(g->sm_default_mhz.v),
  };
  m->boost = g_new(SimBoost, c->n_gpus);
  for (guint i = 0; i < c->n_gpus; i++)
    m->boost[i] = b;
}

/* A policy's plan gives the clocks it asks for snapped to the GPU's steps
 * (gpu_kernel_cost's precondition), so kernel_cost prices them as given.
 * Two sources give clocks off those steps, and their machine snaps on the
 * way to the GPU model: a price table's measured clocks, which the Perseus
 * policies plan with and which reach the model for the shapes the table
 * does not map, and a boost ceiling moving in steps that are not whole SM
 * clock steps (a GPU defined with an odd boost_step_mhz). */
static gboolean off_grid(const ClusterMachine *m, const Cluster *c)
{
  guint step = (guint)lround(c->gpu->sm_step_mhz.v);
  return m->table != NULL ||
         (m->boost != NULL && m->boost[0].step_mhz % step != 0);
}

/* Returns a new machine (caller owns) or NULL with CLUSTER_ERROR_MISMATCH
 * when w does not fit c (rank count, group members, shapes) or the cluster's
 * own validation error. */
ClusterMachine *cluster_machine_new(const Cluster *c, const SimWorkload *w,
                                    const GpuCatalogue *catalogue,
                                    guint64 seed, GError **error)
{
  g_return_val_if_fail(c != NULL && w != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);

  if (!cluster_validate(c, error))
    return NULL;
  if (w->n_ranks != c->n_gpus) {
    g_set_error(error, CLUSTER_ERROR, CLUSTER_ERROR_MISMATCH,
                "the workload has %u ranks but the cluster has %u GPUs "
                "(one rank per GPU)", w->n_ranks, c->n_gpus);
    return NULL;
  }

  /* Reference GPU: the workload's, when the catalogue knows it. */
  const GpuSpec *ref = NULL;
  if (catalogue != NULL && w->ref_gpu != NULL)
    ref = gpu_catalogue_lookup(catalogue, w->ref_gpu, NULL);
  if (ref == NULL)
    ref = c->gpu;

  g_autoptr(ClusterMachine) m = g_new0(ClusterMachine, 1);
  g_mutex_init(&m->lock);
  m->cache = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
  m->gpu = c->gpu;
  m->net = c->net;
  m->n_gpus = c->n_gpus;
  m->gpus_per_node = c->gpus_per_node;
  m->power_limit_w = c->power_limit_w >= 0.0 ? c->power_limit_w : 0.0;
  if (c->boost == CLUSTER_BOOST_CONTROLLER) {
    /* The controller holds the limit; kernels are priced uncapped. */
    build_boost(m, c);
    m->power_limit_w = GPU_POWER_UNCAPPED;
  }

  if (!build_groups(m, w, error) || !build_shapes(m, w, ref, error))
    return NULL;
  build_gpus(m, c, seed);
  GError *terr = NULL;
  m->table = price_table_from_workload(w, &terr);
  if (terr != NULL) {
    g_propagate_error(error, terr);
    return NULL;
  }
  build_held_limit(m, c);
  m->off_grid = off_grid(m, c);

  double switch_ms = c->switch_latency_ms >= 0.0
                       ? c->switch_latency_ms
                       : c->gpu->switch_latency_ms.v;
  SimMachine *s = &m->sim;
  s->n_gpus = m->n_gpus;
  s->idle_power_w = m->idle_power_w;
  s->blocked_power_w = m->blocked_power_w;
  s->comm_power_w = m->comm_power_w;
  s->switch_latency_ns =
    isfinite(switch_ms) && switch_ms > 0.0 ? (gint64)llround(switch_ms * 1e6)
                                           : 0;
  s->ctx = m;
  s->kernel_cost = machine_kernel_cost;
  s->collective_ns = machine_collective_ns;
  s->p2p_ns = machine_p2p_ns;
  s->iteration_begin = NULL;
  /* Every GPU priced alike: the engine may share one price cache. */
  s->uniform_pricing = c->perf_spread == 0.0 && c->power_spread == 0.0;
  s->boost = m->boost;
  s->power_limit_w = m->held_limit_w;
  /* The sensor's window (docs/sources.md; the controller's average). */
  double win_ms = c->gpu->boost_window_ms.v > 0 ? c->gpu->boost_window_ms.v
                                                : GPU_BOOST_WINDOW_MS;
  s->sensor_window_ns = (gint64)llround(win_ms * 1e6);
  /* kernel_cost locks its cache; the network model keeps no state. */
  s->thread_safe = TRUE;
  return g_steal_pointer(&m);
}

void cluster_machine_free(ClusterMachine *m)
{
  if (m == NULL)
    return;
  g_hash_table_destroy(m->cache);
  g_mutex_clear(&m->lock);
  price_table_free(m->table);
  g_clear_error(&m->table_error);
  g_free(m->shapes);
  g_free(m->groups);
  g_free(m->perf);
  g_free(m->power_factor);
  g_free(m->idle_power_w);
  g_free(m->blocked_power_w);
  g_free(m->comm_power_w);
  g_free(m->held_limit_w);
  g_free(m->boost);
  g_free(m);
}

const SimMachine *cluster_machine_sim(ClusterMachine *m)
{
  g_return_val_if_fail(m != NULL, NULL);
  return &m->sim;
}

double cluster_machine_perf_factor(const ClusterMachine *m, guint gpu)
{
  g_return_val_if_fail(m != NULL && gpu < m->n_gpus, 1.0);
  return m->perf[gpu];
}

double cluster_machine_power_factor(const ClusterMachine *m, guint gpu)
{
  g_return_val_if_fail(m != NULL && gpu < m->n_gpus, 1.0);
  return m->power_factor[gpu];
}

const NetGroupShape *cluster_machine_group_shape(const ClusterMachine *m,
                                                 guint32 group)
{
  g_return_val_if_fail(m != NULL, NULL);
  if (group >= m->n_groups)
    return NULL;
  return &m->groups[group];
}

const PriceTable *cluster_machine_table(const ClusterMachine *m)
{
  g_return_val_if_fail(m != NULL, NULL);
  return m->table;
}

gboolean cluster_machine_check(ClusterMachine *m, GError **error)
{
  g_return_val_if_fail(m != NULL, FALSE);
  g_mutex_lock(&m->lock);
  gboolean ok = m->table_error == NULL;
  if (!ok)
    g_set_error_literal(error, m->table_error->domain, m->table_error->code,
                        m->table_error->message);
  g_mutex_unlock(&m->lock);
  return ok;
}

/* models/cluster.h -- a cluster (GPUs, nodes, network, placement) and its
 * binding to the engine: the SimMachine callback table that prices a given
 * workload's ops on this cluster.
 */
#ifndef MODELS_CLUSTER_H
#define MODELS_CLUSTER_H

#include <glib.h>
#include "sim/engine.h"
#include "models/gpu.h"
#include "models/net.h"
#include "models/node.h"
#include "models/table.h"

G_BEGIN_DECLS

/* How the power limit is held.  PER_KERNEL: each kernel runs at the highest
 * clock whose own power fits (the steady state of a controller over one
 * kernel; the default).  CONTROLLER: the driver's boost controller, which
 * averages power over a window and moves the clock once per period
 * (sim/engine.h SimBoost; its parameters are the GPU's boost_*). */
typedef enum {
  CLUSTER_BOOST_PER_KERNEL = 0,
  CLUSTER_BOOST_CONTROLLER
} ClusterBoost;
/* "per-kernel", "controller"; -1 for an unknown name. */
const char *cluster_boost_name(ClusterBoost b);
int cluster_boost_from_name(const char *s);

typedef struct {
  guint n_gpus;
  guint gpus_per_node;
  GpuSpec *gpu;              /* owned copy; one model for every GPU */
  NetSpec *net;              /* owned copy */
  /* Overrides (< 0: catalogue value). */
  double power_limit_w;
  double idle_power_w;
  double blocked_power_w;
  double comm_power_w;
  double switch_latency_ms;
  /* Per-GPU variability: multiplicative factors drawn from PCG streams
   * (1.0 when spread is 0). */
  double perf_spread;        /* e.g. 0.02: time factor in [1, 1+spread] */
  double power_spread;       /* power factor in [1-spread, 1+spread] */
  ClusterBoost boost;        /* how the power limit holds */
  /* The rest of each node and the facility around it (models/node.h):
   * preset "none" and pue 1 unless set, so that node and facility energy
   * equal the GPUs'. */
  NodeSpec node;
  double pue;
} Cluster;

/* Limits checked by cluster_new / cluster_validate. */
#define CLUSTER_MAX_GPUS (1u << 20)
#define CLUSTER_MAX_GPUS_PER_NODE 64u

/* A cluster of n_gpus GPUs of model `gpu` (copied) on network `net`
 * (copied); gpus_per_node 0 = 8.  Overrides start at -1. */
Cluster *cluster_new(const GpuSpec *gpu, const NetSpec *net, guint n_gpus,
                     guint gpus_per_node, GError **error);
void cluster_free(Cluster *c);
/* A copy of c (its specs copied too), overrides and all. */
Cluster *cluster_copy(const Cluster *c, GError **error);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(Cluster, cluster_free)
gboolean cluster_validate(const Cluster *c, GError **error);
/* A folded workload (w->fold_rep: one representative replayed per class of
 * identical ranks) runs exactly on c only where every member of a class is
 * priced like its representative.  FALSE (SIM_ERROR_INVALID, naming the
 * cause and the way out: an unfolded workload) when w is folded and c has
 * per-GPU variability, or a partly filled last node (groups placed there
 * would be priced unlike their representatives'); TRUE otherwise.  The
 * run's other refusals (stragglers, timelines) are its caller's
 * (run/session.c, perseus_run). */
gboolean cluster_check_folded(const Cluster *c, const SimWorkload *w,
                              GError **error);
/* The hint those refusals end with. */
#define CLUSTER_FOLDED_HINT                                                 \
  "; use an unfolded workload (js.gpt{ fold = false }) for this run"
/* A GPU's board power when idle, when blocked (waiting on another rank)
 * and while communicating: the cluster's override, else its GPU model's;
 * before per-GPU variability (cluster_machine_new scales them). */
double cluster_idle_power_w(const Cluster *c);
double cluster_blocked_power_w(const Cluster *c);
double cluster_comm_power_w(const Cluster *c);
/* Nodes: ceil(n_gpus / gpus_per_node); GPU g sits on node g / gpus_per_node
 * (the last node may be partly filled). */
guint cluster_n_nodes(const Cluster *c);
guint cluster_gpu_node(const Cluster *c, guint gpu);

/* The machine that runs workload w on cluster c.  Owns its tables; both c
 * and w are borrowed and must outlive it.  The reference GPU of w
 * (w->ref_gpu) is looked up in `catalogue` to scale ref_ns; unknown or NULL
 * means "same as the cluster's GPU".  `seed` is the run's: the GPUs'
 * variability factors are drawn from it (models/cluster.c). */
typedef struct ClusterMachine ClusterMachine;
ClusterMachine *cluster_machine_new(const Cluster *c, const SimWorkload *w,
                                    const GpuCatalogue *catalogue,
                                    guint64 seed, GError **error);
void cluster_machine_free(ClusterMachine *m);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClusterMachine, cluster_machine_free)
/* The engine's view (borrowed, lives as long as m). */
const SimMachine *cluster_machine_sim(ClusterMachine *m);
/* Resolves "auto" clocks: the pair a kernel asks for under auto. */
SimClocks cluster_default_clocks(const Cluster *c);

/* Per-GPU variability factors drawn for this machine: time factor (>= 1)
 * and power factor (around 1); exactly 1.0 when the spread is 0. */
double cluster_machine_perf_factor(const ClusterMachine *m, guint gpu);
double cluster_machine_power_factor(const ClusterMachine *m, guint gpu);
/* Placement of communicator group `group` of the workload (what the
 * network model is given).  Borrowed; NULL when group is out of range. */
const NetGroupShape *cluster_machine_group_shape(const ClusterMachine *m,
                                                 guint32 group);

/* The measured price table the machine uses for the shapes it maps (taken
 * from the workload's provenance, models/table.h), or NULL.  Borrowed. */
const PriceTable *cluster_machine_table(const ClusterMachine *m);
/* FALSE with the first TABLE_ERROR_RANGE met while pricing (a table-driven
 * op asked for a clock outside its measured range; it was priced at the
 * nearest measured clock instead); TRUE when there was none.  Callers check
 * it after a run. */
gboolean cluster_machine_check(ClusterMachine *m, GError **error);

#define CLUSTER_ERROR (cluster_error_quark())
GQuark cluster_error_quark(void);
typedef enum {
  CLUSTER_ERROR_INVALID,   /* out-of-range size, override or spread */
  CLUSTER_ERROR_MISMATCH   /* workload and cluster do not fit together */
} ClusterError;

G_END_DECLS

#endif

/* models/net.h -- network and collective cost models (alpha-beta).
 *
 * See models/net.c for the formulas, presets and their sources.
 */
#ifndef MODELS_NET_H
#define MODELS_NET_H

#include <glib.h>
#include "sim/workload.h"

G_BEGIN_DECLS

typedef enum { NET_ALGO_AUTO = 0, NET_ALGO_RING, NET_ALGO_TREE } NetAlgo;

typedef struct {
  char *name;               /* "dgx-a100" (owned) */
  /* Intra-node (NVLink/NVSwitch, or PCIe when nvlink == FALSE) */
  double intra_bw_gbps;     /* per-GPU unidirectional bandwidth, GB/s */
  double intra_lat_us;      /* per-step hardware latency */
  /* Inter-node */
  double nic_bw_gbps;       /* per NIC, unidirectional, GB/s */
  guint nics_per_node;
  double inter_lat_us;      /* per-step latency across the network */
  double base_lat_us;       /* NCCL launch/base latency per collective */
  double p2p_lat_us;        /* base latency of a send/recv */
  gboolean nvlink;
} NetSpec;

/* Built-in presets: "dgx-a100", "dgx-h100", "pcie".  Returns a new copy or
 * NULL with an error listing the presets. */
NetSpec *net_preset(const char *name, GError **error);
/* The preset that goes with GPU model `gpu` when none is named (js.cluster,
 * trace export): "dgx-h100" for an H100 SXM, "dgx-a100" for an A100 SXM,
 * else "pcie". */
const char *net_default_preset(const char *gpu);
NetSpec *net_spec_copy(const NetSpec *s);
void net_spec_free(NetSpec *s);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(NetSpec, net_spec_free)
const char *const *net_preset_names(void); /* NULL-terminated */
/* Checks a spec (bandwidths finite and > 0, latencies finite and >= 0,
 * nics_per_node in 1..64).  FALSE with NET_ERROR_INVALID naming the field. */
gboolean net_spec_validate(const NetSpec *s, GError **error);

/* How a communicator group is spread over nodes. */
typedef struct {
  guint n_ranks;        /* members */
  guint n_nodes;        /* distinct nodes among members */
  guint max_per_node;   /* most members on one node */
} NetGroupShape;

/* Time in seconds of a collective moving `bytes` (the per-rank buffer size:
 * all-reduce/broadcast: the buffer; all-gather: the output; reduce-scatter:
 * the input; all-to-all: the buffer) over a group.  n_ranks == 1 costs 0.
 * Hierarchical when the group spans nodes and has several ranks per node.
 * `concurrent` >= 1 is the number of collectives sharing the same links
 * (bandwidth divided among them). */
double net_collective_time_s(const NetSpec *n, SimCollType type, double bytes,
                             const NetGroupShape *g, NetAlgo algo,
                             guint concurrent);

/* Time in seconds of a point-to-point transfer of `bytes`. */
double net_p2p_time_s(const NetSpec *n, double bytes, gboolean same_node);

/* Ring all-reduce closed form (for tests and docs):
 * 2(n-1) * lat + 2(n-1)/n * bytes / bw + base. */
double net_ring_allreduce_s(double bytes, guint n, double bw_Bps,
                            double step_lat_s, double base_lat_s);

#define NET_ERROR (net_error_quark())
GQuark net_error_quark(void);
typedef enum { NET_ERROR_UNKNOWN, NET_ERROR_INVALID } NetError;

G_END_DECLS

#endif

/* models/net.c -- network and collective cost models (alpha-beta).
 *
 * Model
 * -----
 * Every transfer costs alpha + bytes / beta: a latency per algorithm step
 * plus the bytes each rank pushes through its bottleneck link.  There are two
 * link classes, seen from one GPU:
 *
 *   intra   NVLink/NVSwitch (or PCIe when nvlink == FALSE): bw_i = intra_bw
 *           per GPU and direction, step latency lat_i = intra_lat.
 *   inter   the node's NICs: nics_per_node NICs of nic_bw each, step latency
 *           lat_n = inter_lat.
 *
 * Every collective call adds one base latency (NCCL's launch and protocol
 * overhead).  With n ranks, B the per-rank buffer (see net.h for which
 * buffer each type means):
 *
 *   ring all-reduce    base + 2(n-1) lat + 2(n-1)/n * B / bw
 *   tree all-reduce    base + 2 ceil(log2 n) lat + 2 B / bw
 *   reduce-scatter     base +  (n-1) lat +  (n-1)/n * B / bw
 *   all-gather         base +  (n-1) lat +  (n-1)/n * B / bw
 *   broadcast          base +  (n-1) lat +  B / bw      (pipelined ring)
 *   all-to-all         base +  (n-1) lat +  (n-1)/n * B / bw_slowest
 *   send/recv          p2p_lat + lat + B / bw           (net_p2p_time_s)
 *
 * Tree bandwidth term: in a double binary tree every rank is an inner node
 * of one tree and a leaf of the other, and over reduce + broadcast it sends
 * (and receives) 2B in all, so the bandwidth term is 2B/bw: the same "bus
 * bandwidth" as a ring (NCCL's tuning model converts tree bus bandwidth to
 * algorithm bandwidth with a factor 0.5, tuning.cc).  The tree wins on
 * latency only (log n steps instead of n), which is what NCCL observes:
 * trees for small and medium messages at scale, rings for large ones.
 * NET_ALGO_AUTO takes the faster of ring and tree for all-reduce; the other
 * collectives only have a ring (as in NCCL) and ignore `algo`.
 *
 * Placement.  A group is described by NetGroupShape: n ranks on N nodes,
 * at most k per node (placement assumed balanced: k * N == n).
 *
 *   N == 1          flat over the intra-node class.
 *   N > 1, k == 1   flat ring over the network (one GPU per node).
 *   N > 1, k > 1    hierarchical: intra-node reduce-scatter over NVLink (k
 *                   ranks), inter-node all-reduce of the shard B/k among the
 *                   N ranks that hold the same shard (k such rings or trees
 *                   run at once, one per local rank), intra-node all-gather.
 *                     T = base + 2[(k-1) lat_i + (k-1)/k B/bw_i]
 *                              + AR_inter(B/k, N, bw_nr, lat_n)
 *                   Reduce-scatter / all-gather use half of it (the
 *                   intra-node and the inter-node reduce-scatter), so
 *                   RS + AG == AR in bandwidth terms here too.
 *
 * NIC share.  When k ranks of a group sit on one node they split that
 * node's NICs: each rank gets bw_nr = nic_bw * min(1, nics_per_node / k).
 * A rank never gets more than one NIC: on DGX systems every GPU has its own
 * rail NIC (GPU i <-> NIC i behind the same PCIe switch), and the other
 * GPUs of the node, running other groups' collectives at the same time
 * (Megatron's DP groups are one rank per node, eight of them per node), use
 * their own NICs.  With k > nics_per_node ranks (e.g. 8 GPUs, 4 NICs) the
 * ranks share NICs and each gets a fraction.  The node's aggregate used by
 * the group is then nic_bw * min(k, nics_per_node).  A broadcast crossing
 * nodes streams through that aggregate (NCCL splits it over channels on
 * several NICs), bounded by the NVLink bandwidth when k > 1.
 *
 * Sharing.  `concurrent` collectives on the same links divide every
 * bandwidth by `concurrent`; latencies are unchanged.
 *
 * Units: GB/s are 10^9 bytes/s, latencies in microseconds, results in
 * seconds.
 *
 * Presets and sources
 * -------------------
 *   dgx-a100  NVLink3: 12 links x 50 GB/s = 600 GB/s bidirectional per GPU
 *             -> 300 GB/s per direction (NVIDIA A100 datasheet;
 *             docs/sources.md "Interconnect").  8 x Mellanox HDR
 *             200 Gb/s NICs per node -> 25 GB/s each (DGX A100 user guide).
 *   dgx-h100  NVLink4: 900 GB/s bidirectional -> 450 GB/s per direction;
 *             8 x ConnectX-7 NDR 400 Gb/s -> 50 GB/s each (DGX H100 guide).
 *   pcie      no NVLink: GPUs talk over PCIe Gen4 x16, 32 GB/s raw and
 *             ~25 GB/s achievable per direction; the network is the DGX A100
 *             one (8 x HDR), so this preset isolates the effect of NVLink.
 *   Latencies (NCCL src/graph/tuning.cc, Simple protocol; docs/sources.md):
 *             base 8.4 us (ring, Simple); per-step hardware latency 3.4 us
 *             over NVLink, 5.7 us over PCIe, ~14 us across the network.
 *             p2p_lat_us (a send/recv pair's base) is taken equal to the
 *             collective base latency: NCCL runs send/recv through the same
 *             kernel launch and proxy path.
 *
 * Bus bandwidth (nccl-tests convention): busbw = algbw * 2(n-1)/n for an
 * all-reduce, with algbw = B / T.  For large B the ring model gives busbw ->
 * bw, i.e. a 1 GB all-reduce on 8 NVLink3 GPUs shows ~297 GB/s.  Real
 * nccl-tests runs on DGX A100 reach ~230 GB/s: the model is the ideal link
 * figure, not a measured one.
 *
 * Known limits
 * ------------
 * - No protocol choice (LL/LL128), no channel count, no chunking or
 *   pipelining inside a collective beyond the formulas above; the three
 *   phases of a hierarchical collective are sequential, not overlapped.
 * - Link sharing is the static `concurrent` divisor: no congestion, no
 *   fat-tree oversubscription, no adaptive routing, no SHARP/NVLS offload.
 * - Unbalanced placements are priced as if balanced with max_per_node ranks
 *   per node.
 * - All-to-all charges every byte at the slowest link class's bandwidth
 *   (conservative across nodes) and n-1 sequential latency steps.
 * - PCIe GPUs' NIC traffic shares PCIe with intra-node traffic; ignored.
 */
#include "models/net.h"

#include <math.h>
#include <string.h>

G_DEFINE_QUARK(net-error-quark, net_error)

/* Conversion factors to SI units. */
#define GBPS_TO_BPS 1e9
#define US_TO_S 1e-6

/* ------------------------------------------------------------------------ */
/* Presets                                                                   */

typedef struct {
  const char *name;
  double intra_bw_gbps, intra_lat_us;
  double nic_bw_gbps;
  guint nics_per_node;
  double inter_lat_us, base_lat_us, p2p_lat_us;
  gboolean nvlink;
} NetPreset;

/* Sources: see the opening comment. */
static const NetPreset presets[] = {
  /* NVLink3 300 GB/s/dir; 8 x HDR 200 Gb/s = 25 GB/s; NCCL latencies. */
  { "dgx-a100", 300.0, 3.4, 25.0, 8, 14.0, 8.4, 8.4, TRUE },
  /* NVLink4 450 GB/s/dir; 8 x NDR 400 Gb/s = 50 GB/s. */
  { "dgx-h100", 450.0, 3.4, 50.0, 8, 14.0, 8.4, 8.4, TRUE },
  /* PCIe Gen4 x16 ~25 GB/s achievable; PCI ring step 5.7 us; 8 x HDR. */
  { "pcie", 25.0, 5.7, 25.0, 8, 14.0, 8.4, 8.4, FALSE },
};

static const char *const preset_names[] = { "dgx-a100", "dgx-h100", "pcie",
                                            NULL };

G_STATIC_ASSERT(G_N_ELEMENTS(presets) + 1 == G_N_ELEMENTS(preset_names));

const char *const *net_preset_names(void)
{
  return preset_names;
}

/* Returns a new NetSpec (caller owns) or NULL with NET_ERROR_UNKNOWN whose
 * message lists every preset name. */
const char *net_default_preset(const char *gpu)
{
  if (g_str_has_prefix(gpu, "H100") && strstr(gpu, "SXM") != NULL)
    return "dgx-h100";
  if (g_str_has_prefix(gpu, "A100") && strstr(gpu, "SXM") != NULL)
    return "dgx-a100";
  return "pcie";
}

NetSpec *net_preset(const char *name, GError **error)
{
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);

  for (guint i = 0; name != NULL && i < G_N_ELEMENTS(presets); i++) {
    const NetPreset *p = &presets[i];
    if (g_strcmp0(p->name, name) != 0)
      continue;
    NetSpec *s = g_new0(NetSpec, 1);
    s->name = g_strdup(p->name);
    s->intra_bw_gbps = p->intra_bw_gbps;
    s->intra_lat_us = p->intra_lat_us;
    s->nic_bw_gbps = p->nic_bw_gbps;
    s->nics_per_node = p->nics_per_node;
    s->inter_lat_us = p->inter_lat_us;
    s->base_lat_us = p->base_lat_us;
    s->p2p_lat_us = p->p2p_lat_us;
    s->nvlink = p->nvlink;
    return s;
  }

  g_autofree char *known = g_strjoinv(", ", (char **)preset_names);
  g_set_error(error, NET_ERROR, NET_ERROR_UNKNOWN,
              "unknown network preset '%s' (known: %s)",
              name != NULL ? name : "(null)", known);
  return NULL;
}

/* Deep copy (the name is duplicated); NULL gives NULL. */
NetSpec *net_spec_copy(const NetSpec *s)
{
  if (s == NULL)
    return NULL;
  NetSpec *c = g_new(NetSpec, 1);
  *c = *s;
  c->name = g_strdup(s->name);
  return c;
}

void net_spec_free(NetSpec *s)
{
  if (s == NULL)
    return;
  g_free(s->name);
  g_free(s);
}

/* Checks one bandwidth (finite, > 0) or latency (finite, >= 0) field. */
static gboolean check_field(const NetSpec *s, const char *field, double v,
                            gboolean positive, GError **error)
{
  if (isfinite(v) && (positive ? v > 0.0 : v >= 0.0))
    return TRUE;
  g_set_error(error, NET_ERROR, NET_ERROR_INVALID,
              "network '%s': %s = %g must be %s", s->name ? s->name : "?",
              field, v, positive ? "a finite number > 0" : "finite and >= 0");
  return FALSE;
}

/* Every bandwidth finite and positive, every latency finite and >= 0, at
 * least one NIC per node (and at most 64).  Returns FALSE with
 * NET_ERROR_INVALID naming the field on the first violation. */
gboolean net_spec_validate(const NetSpec *s, GError **error)
{
  g_return_val_if_fail(s != NULL, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);

  if (s->name == NULL || s->name[0] == '\0') {
    g_set_error(error, NET_ERROR, NET_ERROR_INVALID,
                "network spec: name must be a non-empty string");
    return FALSE;
  }
  if (!check_field(s, "intra_bw_gbps", s->intra_bw_gbps, TRUE, error) ||
      !check_field(s, "nic_bw_gbps", s->nic_bw_gbps, TRUE, error) ||
      !check_field(s, "intra_lat_us", s->intra_lat_us, FALSE, error) ||
      !check_field(s, "inter_lat_us", s->inter_lat_us, FALSE, error) ||
      !check_field(s, "base_lat_us", s->base_lat_us, FALSE, error) ||
      !check_field(s, "p2p_lat_us", s->p2p_lat_us, FALSE, error))
    return FALSE;
  if (s->nics_per_node < 1 || s->nics_per_node > 64) {
    g_set_error(error, NET_ERROR, NET_ERROR_INVALID,
                "network '%s': nics_per_node = %u must be in 1..64", s->name,
                s->nics_per_node);
    return FALSE;
  }
  return TRUE;
}

/* ------------------------------------------------------------------------ */
/* Building blocks (seconds; no base latency unless said so)                */

double net_ring_allreduce_s(double bytes, guint n, double bw_Bps,
                            double step_lat_s, double base_lat_s)
{
  if (n <= 1)
    return 0.0;
  double steps = 2.0 * (double)(n - 1);
  return base_lat_s + steps * step_lat_s +
         steps / (double)n * bytes / bw_Bps;
}

/* One ring pass of n-1 steps, each rank moving (n-1)/n of B: a
 * reduce-scatter or an all-gather without the base latency. */
static double ring_pass_s(double bytes, guint n, double bw, double lat)
{
  if (n <= 1)
    return 0.0;
  double steps = (double)(n - 1);
  return steps * lat + steps / (double)n * bytes / bw;
}

/* ceil(log2(n)) for n >= 1: the depth of a binary tree over n ranks. */
static guint tree_depth(guint n)
{
  guint d = 0;
  while (d < 32 && (G_GUINT64_CONSTANT(1) << d) < n)
    d++;
  return d;
}

/* Double-binary-tree all-reduce without the base latency: up and down the
 * tree, 2B through each rank's link (see the opening comment). */
static double tree_allreduce_s(double bytes, guint n, double bw, double lat)
{
  if (n <= 1)
    return 0.0;
  return 2.0 * (double)tree_depth(n) * lat + 2.0 * bytes / bw;
}

/* The links one collective sees, in SI units, bandwidths already divided
 * by the number of concurrent collectives. */
typedef struct {
  double bw_i, lat_i;   /* intra-node, per GPU and direction */
  double bw_nr, lat_n;  /* network: one rank's NIC share */
  double bw_node;       /* network: node aggregate used by the group */
  double base;
  guint n, nodes, k;    /* ranks, nodes, ranks per node */
} Links;

static void links_init(Links *L, const NetSpec *s, const NetGroupShape *g,
                       guint concurrent)
{
  double share = concurrent > 0 ? (double)concurrent : 1.0;
  L->n = g->n_ranks;
  L->nodes = CLAMP(g->n_nodes, 1u, MAX(g->n_ranks, 1u));
  L->k = CLAMP(g->max_per_node, 1u, MAX(g->n_ranks, 1u));
  guint nics = MAX(s->nics_per_node, 1u);

  L->bw_i = s->intra_bw_gbps * GBPS_TO_BPS / share;
  L->lat_i = s->intra_lat_us * US_TO_S;
  /* Each of the k local ranks gets min(1, nics / k) NICs. */
  double nic = s->nic_bw_gbps * GBPS_TO_BPS / share;
  L->bw_nr = nic * MIN(1.0, (double)nics / (double)L->k);
  L->bw_node = nic * (double)MIN(L->k, nics);
  L->lat_n = s->inter_lat_us * US_TO_S;
  L->base = s->base_lat_us * US_TO_S;
}

/* All-reduce under one algorithm (RING or TREE). */
static double allreduce_s(const Links *L, double bytes, NetAlgo algo)
{
  gboolean tree = algo == NET_ALGO_TREE;
  if (L->nodes <= 1) {
    if (!tree)
      return net_ring_allreduce_s(bytes, L->n, L->bw_i, L->lat_i, L->base);
    return L->base + tree_allreduce_s(bytes, L->n, L->bw_i, L->lat_i);
  }
  if (L->k <= 1) {
    if (!tree)
      return net_ring_allreduce_s(bytes, L->n, L->bw_nr, L->lat_n, L->base);
    return L->base + tree_allreduce_s(bytes, L->n, L->bw_nr, L->lat_n);
  }
  /* Hierarchical: RS intra, AR of the shard across nodes, AG intra. */
  double intra = 2.0 * ring_pass_s(bytes, L->k, L->bw_i, L->lat_i);
  double shard = bytes / (double)L->k;
  double inter = tree ? tree_allreduce_s(shard, L->nodes, L->bw_nr, L->lat_n)
                      : 2.0 * ring_pass_s(shard, L->nodes, L->bw_nr, L->lat_n);
  return L->base + intra + inter;
}

/* Reduce-scatter or all-gather (one ring pass; hierarchical across nodes). */
static double half_s(const Links *L, double bytes)
{
  if (L->nodes <= 1)
    return L->base + ring_pass_s(bytes, L->n, L->bw_i, L->lat_i);
  if (L->k <= 1)
    return L->base + ring_pass_s(bytes, L->n, L->bw_nr, L->lat_n);
  return L->base + ring_pass_s(bytes, L->k, L->bw_i, L->lat_i) +
         ring_pass_s(bytes / (double)L->k, L->nodes, L->bw_nr, L->lat_n);
}

/* Pipelined ring broadcast: every byte crosses the bottleneck once. */
static double broadcast_s(const Links *L, double bytes)
{
  if (L->nodes <= 1)
    return L->base + (double)(L->n - 1) * L->lat_i + bytes / L->bw_i;
  double bw = L->k > 1 ? MIN(L->bw_i, L->bw_node) : L->bw_node;
  return L->base + (double)(L->nodes - 1) * L->lat_n +
         (double)(L->k - 1) * L->lat_i + bytes / bw;
}

/* All-to-all: (n-1)/n of the buffer leaves each rank over the slowest link
 * class it uses, in n-1 exchange steps. */
static double alltoall_s(const Links *L, double bytes)
{
  double bw = L->bw_i, lat = L->lat_i;
  if (L->nodes > 1) {
    bw = MIN(L->bw_i, L->bw_nr);
    lat = L->lat_n;
  }
  double steps = (double)(L->n - 1);
  return L->base + steps * lat + steps / (double)L->n * bytes / bw;
}

double net_collective_time_s(const NetSpec *n, SimCollType type, double bytes,
                             const NetGroupShape *g, NetAlgo algo,
                             guint concurrent)
{
  g_return_val_if_fail(n != NULL && g != NULL, 0.0);
  g_return_val_if_fail(bytes >= 0.0 && isfinite(bytes), 0.0);
  if (g->n_ranks <= 1)
    return 0.0;

  Links L;
  links_init(&L, n, g, concurrent);

  switch (type) {
  case SIM_COLL_ALL_REDUCE:
    if (algo == NET_ALGO_AUTO)
      return MIN(allreduce_s(&L, bytes, NET_ALGO_RING),
                 allreduce_s(&L, bytes, NET_ALGO_TREE));
    return allreduce_s(&L, bytes, algo);
  case SIM_COLL_ALL_GATHER:
  case SIM_COLL_REDUCE_SCATTER:
    return half_s(&L, bytes);
  case SIM_COLL_BROADCAST:
    return broadcast_s(&L, bytes);
  case SIM_COLL_ALL_TO_ALL:
    return alltoall_s(&L, bytes);
  case SIM_COLL_SEND_RECV: {
    /* A pair exchange through a group: priced as one p2p transfer on the
     * link class the group spans, bandwidth shared like the rest. */
    gboolean same = L.nodes <= 1;
    double bw = same ? L.bw_i : L.bw_nr;
    return n->p2p_lat_us * US_TO_S + (same ? L.lat_i : L.lat_n) + bytes / bw;
  }
  case SIM_COLL_COUNT:
  default:
    break;
  }
  g_return_val_if_reached(0.0);
}

/* p2p: base latency of a send/recv, one hardware step on the link class,
 * and the bytes through one GPU's link (NVLink inside a node, its own NIC
 * across nodes). */
double net_p2p_time_s(const NetSpec *n, double bytes, gboolean same_node)
{
  g_return_val_if_fail(n != NULL, 0.0);
  g_return_val_if_fail(bytes >= 0.0 && isfinite(bytes), 0.0);
  double lat = same_node ? n->intra_lat_us : n->inter_lat_us;
  double bw = same_node ? n->intra_bw_gbps : n->nic_bw_gbps;
  return (n->p2p_lat_us + lat) * US_TO_S + bytes / (bw * GBPS_TO_BPS);
}

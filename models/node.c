/* models/node.c -- node presets and the node's energy (models/node.h).
 *
 * Sources (docs/lua-api.md, "Node and facility energy", has the table):
 * - DGX A100: 8 x A100-SXM4 (400 W), 2 x AMD EPYC 7742 (225 W TDP each),
 *   2 TB DDR4 in 32 DIMMs, 8 single-port + 2 dual-port ConnectX-6,
 *   6 NVSwitch (2nd gen); 6.5 kW maximum system power (DGX A100 User
 *   Guide, DU-09821-001, "Power Specifications").
 * - DGX H100: 8 x H100-SXM5 (700 W), 2 x Intel Xeon Platinum 8480C
 *   (350 W TDP each), 2 TB DDR5 in 32 DIMMs, 8 single-port + 2 dual-port
 *   ConnectX-7, 4 NVSwitch (3rd gen); 10.2 kW maximum system power (DGX
 *   H100 User Guide).
 * - HGX H100 (Latif et al., arXiv 2412.08602): an 8 x H100 HGX node whose
 *   wall power peaked at about 8.4 kW while training with the GPUs near
 *   full utilisation.  other_w is fitted on that figure: 8 x 700 W of GPUs,
 *   the CPUs at cpu_load, the NICs idle (one node: no inter-node traffic)
 *   and the NVSwitches active give 6744 W DC; 8400 W x 0.96 = 8064 W DC,
 *   so other_w = 1320 W.  Every other number below is a datasheet figure
 *   or an estimate, marked so (NODE_SOURCES, which run/trust.c reads).
 * - dgx-h100 and hgx-h100 carry the same figures: the DGX H100 is built on
 *   the HGX H100 8-GPU baseboard, Latif et al. give their node the same
 *   10.2 kW rating, and no source lists components of theirs that differ
 *   from the DGX H100 User Guide's.  They differ in what they are checked
 *   against (joulesim fidelity, published/node-power): hgx-h100 is fitted
 *   on the measured peak, dgx-h100 predicted against the rated maximum.
 */
#include "models/node.h"

#include <math.h>
#include <string.h>

G_DEFINE_QUARK(node-error-quark, node_error)

static const NodeSpec NODE_PRESETS[] = {
  {.name = "none", .psu_efficiency = 1.0},
  {
    .name = "dgx-a100",
    /* 2 x 225 W TDP (AMD EPYC 7742); idle estimate: 70 W a socket. */
    .cpu_idle_w = 140, .cpu_active_w = 450,
    .cpu_load = 0.5,             /* estimate: data loading and launches */
    /* estimate: 2.5 W idle, 5 W active per DDR4 RDIMM, 32 DIMMs. */
    .dram_idle_w = 80, .dram_active_w = 160,
    /* estimate: 12 W idle, 20 W active per ConnectX-6 card with optics,
     * 10 cards. */
    .nic_idle_w = 120, .nic_active_w = 200,
    /* estimate: 30 W idle, 60 W active per 2nd-gen NVSwitch, 6 chips. */
    .nvswitch_idle_w = 180, .nvswitch_active_w = 360,
    /* estimate: the HGX H100 fit (1320 W) scaled by GPU TDP, 400 / 700:
     * the fans move the GPUs' heat. */
    .other_w = 754,
    .psu_efficiency = 0.96,      /* estimate: Titanium-class at half load */
  },
  {
    .name = "dgx-h100",
    /* 2 x 350 W TDP (Intel Xeon Platinum 8480C); idle estimate: 100 W a
     * socket. */
    .cpu_idle_w = 200, .cpu_active_w = 700,
    .cpu_load = 0.5,             /* estimate, as dgx-a100 */
    /* estimate: 3 W idle, 6 W active per DDR5 RDIMM, 32 DIMMs. */
    .dram_idle_w = 96, .dram_active_w = 192,
    /* estimate: 15 W idle, 25 W active per ConnectX-7 card with its
     * optics (a 400G OSFP transceiver draws 9 W at most: NVIDIA
     * MMS4X00-NS400 specification), 10 cards. */
    .nic_idle_w = 150, .nic_active_w = 250,
    /* estimate: 40 W idle, 100 W active per 3rd-gen NVSwitch, 4 chips. */
    .nvswitch_idle_w = 160, .nvswitch_active_w = 400,
    .other_w = 1320,             /* hgx-h100's fit (same chassis class) */
    .psu_efficiency = 0.96,      /* estimate, as dgx-a100 */
  },
  {
    .name = "hgx-h100",
    /* Latif et al.'s node: the DGX H100 components (estimates above). */
    .cpu_idle_w = 200, .cpu_active_w = 700,
    .cpu_load = 0.5,
    .dram_idle_w = 96, .dram_active_w = 192,
    .nic_idle_w = 150, .nic_active_w = 250,
    .nvswitch_idle_w = 160, .nvswitch_active_w = 400,
    .other_w = 1320,             /* fitted on the 8.4 kW peak (above) */
    .psu_efficiency = 0.96,
  },
};

static const char *const NODE_NAMES[] = {"none", "dgx-a100", "dgx-h100",
                                         "hgx-h100", NULL};

/* What each preset's figures rest on, by the catalogue's convention
 * (models/catalogue.c): a source that begins with "fit" is a fit to the
 * measurement it names, "estimate" an estimate, anything else given.  One
 * row per preset of NODE_PRESETS but "none", its parts in NODE_PARTS'
 * order; the comments in NODE_PRESETS say where each number comes from. */
static const char *const NODE_PARTS[] = {
  "cpu_active_w", "cpu_idle_w", "cpu_load", "dram", "nic", "nvswitch",
  "other_w", "psu_efficiency", NULL};

#define PARTS (G_N_ELEMENTS(NODE_PARTS) - 1)

static const struct {
  const char *node;
  const char *source[PARTS];
} NODE_SOURCES[] = {
  {"dgx-a100", {
    "2 x 225 W TDP, AMD EPYC 7742 (DGX A100 User Guide)",
    "estimate: 70 W a socket",
    "estimate: data loading and kernel launches",
    "estimate: 2.5 / 5 W a DDR4 RDIMM, 32 DIMMs (DGX A100 User Guide)",
    "estimate: 12 / 20 W a ConnectX-6 card with its optics, 10 cards",
    "estimate: 30 / 60 W a 2nd-gen NVSwitch, 6 chips",
    "estimate: hgx-h100's fit (Latif et al.) x 400 / 700 W of GPU TDP",
    "estimate: a Titanium-class supply near half load"}},
  {"dgx-h100", {
    "2 x 350 W TDP, Intel Xeon Platinum 8480C (DGX H100 User Guide)",
    "estimate: 100 W a socket",
    "estimate: data loading and kernel launches",
    "estimate: 3 / 6 W a DDR5 RDIMM, 32 DIMMs (DGX H100 User Guide)",
    "estimate: 15 / 25 W a ConnectX-7 card with its optics, 10 cards",
    "estimate: 40 / 100 W a 3rd-gen NVSwitch, 4 chips",
    "fit on Latif et al.'s 8 x H100 HGX node (arXiv 2412.08602, 8.4 kW "
    "peak), the same 10.2 kW-rated HGX H100 baseboard system",
    "estimate: a Titanium-class supply near half load"}},
  {"hgx-h100", {
    "2 x 350 W TDP, the DGX H100's CPUs (DGX H100 User Guide)",
    "estimate: 100 W a socket",
    "estimate: data loading and kernel launches",
    "estimate: 3 / 6 W a DDR5 RDIMM, 32 DIMMs, as the DGX H100",
    "estimate: 15 / 25 W a ConnectX-7 card with its optics, 10 cards",
    "estimate: 40 / 100 W a 3rd-gen NVSwitch, 4 chips",
    "fit on Latif et al.'s 8.4 kW peak (arXiv 2412.08602)",
    "estimate: a Titanium-class supply near half load"}},
};

G_STATIC_ASSERT(G_N_ELEMENTS(NODE_SOURCES) + 1 == G_N_ELEMENTS(NODE_PRESETS));

const char *const *node_preset_names(void)
{
  return NODE_NAMES;
}

gboolean node_preset(const char *name, NodeSpec *out, GError **error)
{
  for (guint i = 0; i < G_N_ELEMENTS(NODE_PRESETS); i++) {
    if (name != NULL && strcmp(name, NODE_PRESETS[i].name) == 0) {
      *out = NODE_PRESETS[i];
      return TRUE;
    }
  }
  g_autofree char *names = g_strjoinv(", ", (char **)NODE_NAMES);
  g_set_error(error, NODE_ERROR, NODE_ERROR_UNKNOWN,
              "unknown node '%s' (known: %s)", name ? name : "(null)", names);
  return FALSE;
}

static gboolean check_pair(const char *what, double idle, double active,
                           GError **error)
{
  if (!isfinite(idle) || !isfinite(active) || idle < 0 || active < 0) {
    g_set_error(error, NODE_ERROR, NODE_ERROR_INVALID,
                "node: %s power must be finite and >= 0 W (idle %g, active "
                "%g)", what, idle, active);
    return FALSE;
  }
  if (active < idle) {
    g_set_error(error, NODE_ERROR, NODE_ERROR_INVALID,
                "node: %s active power %g W is below its idle power %g W",
                what, active, idle);
    return FALSE;
  }
  return TRUE;
}

gboolean node_validate(const NodeSpec *n, GError **error)
{
  if (!check_pair("cpu", n->cpu_idle_w, n->cpu_active_w, error) ||
      !check_pair("dram", n->dram_idle_w, n->dram_active_w, error) ||
      !check_pair("nic", n->nic_idle_w, n->nic_active_w, error) ||
      !check_pair("nvswitch", n->nvswitch_idle_w, n->nvswitch_active_w,
                  error) ||
      !check_pair("other", n->other_w, n->other_w, error))
    return FALSE;
  if (!(n->cpu_load >= 0 && n->cpu_load <= 1)) {
    g_set_error(error, NODE_ERROR, NODE_ERROR_INVALID,
                "node: cpu_load %g is outside [0, 1]", n->cpu_load);
    return FALSE;
  }
  if (!(n->psu_efficiency > 0 && n->psu_efficiency <= 1)) {
    g_set_error(error, NODE_ERROR, NODE_ERROR_INVALID,
                "node: psu_efficiency %g is outside (0, 1]",
                n->psu_efficiency);
    return FALSE;
  }
  return TRUE;
}

gboolean node_check_pue(double pue, GError **error)
{
  if (!(pue >= 1 && pue <= 10)) {
    g_set_error(error, NODE_ERROR, NODE_ERROR_INVALID,
                "pue %g is outside [1, 10] (facility power over IT power "
                "cannot be below 1)", pue);
    return FALSE;
  }
  return TRUE;
}

static double between(double idle, double active, double u)
{
  return idle + (active - idle) * u;
}

double node_rest_power_w(const NodeSpec *n, double nic_u, double nvswitch_u)
{
  return between(n->cpu_idle_w, n->cpu_active_w, n->cpu_load) +
         between(n->dram_idle_w, n->dram_active_w, n->cpu_load) +
         between(n->nic_idle_w, n->nic_active_w, nic_u) +
         between(n->nvswitch_idle_w, n->nvswitch_active_w, nvswitch_u) +
         n->other_w;
}

double node_energy_j(const NodeSpec *n, guint n_nodes, double time_s,
                     double gpu_energy_j, double nic_u, double nvswitch_u)
{
  double rest = node_rest_power_w(n, nic_u, nvswitch_u);
  return (gpu_energy_j + (double)n_nodes * rest * time_s) / n->psu_efficiency;
}

const char *node_part_source(const NodeSpec *n, guint i, const char **source)
{
  if (i >= PARTS)
    return NULL;
  *source = NULL;
  for (guint k = 0; k < G_N_ELEMENTS(NODE_SOURCES); k++)
    if (g_strcmp0(n->name, NODE_SOURCES[k].node) == 0)
      *source = NODE_SOURCES[k].source[i];
  return NODE_PARTS[i];
}

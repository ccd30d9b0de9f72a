/* models/node.h -- the rest of the node around its GPUs (CPU sockets,
 * DRAM, NICs, NVSwitch, fans and board, power supplies) and the facility
 * around the node (its power usage effectiveness).
 *
 * The GPUs' energy is the engine's (sim/engine.h).  Each other component
 * draws idle + (active - idle) * u, u its utilisation over the run; the
 * power supplies deliver that DC load at an efficiency, so the node draws
 * (GPUs + components) / psu_efficiency from the wall; the facility draws
 * node * pue.  The presets and their sources are in models/node.c and
 * docs/lua-api.md ("Node and facility energy").
 */
#ifndef MODELS_NODE_H
#define MODELS_NODE_H

#include <glib.h>

G_BEGIN_DECLS

/* Per node, all sockets / DIMMs / cards / chips together, in watts. */
typedef struct {
  const char *name;            /* static: a preset's name or "custom" */
  double cpu_idle_w, cpu_active_w;
  double cpu_load;             /* CPU utilisation while training, 0..1 */
  double dram_idle_w, dram_active_w;   /* follows cpu_load */
  double nic_idle_w, nic_active_w;     /* active: inter-node communication */
  double nvswitch_idle_w, nvswitch_active_w; /* active: any communication */
  double other_w;              /* fans, board, BMC, drives: constant */
  double psu_efficiency;       /* DC out / AC in, in (0, 1] */
} NodeSpec;

/* "none" (no component, efficiency 1: node energy = GPU energy),
 * "dgx-a100", "dgx-h100", "hgx-h100"; FALSE (NODE_ERROR_UNKNOWN, listing
 * the names) for any other name. */
gboolean node_preset(const char *name, NodeSpec *out, GError **error);
/* The preset names, NULL-terminated. */
const char *const *node_preset_names(void);
/* FALSE (NODE_ERROR_INVALID, naming the field) for a negative or
 * non-finite power, active below idle, cpu_load outside [0, 1] or an
 * efficiency outside (0, 1]. */
gboolean node_validate(const NodeSpec *n, GError **error);
/* The power of the node's components other than the GPUs (DC side),
 * with the NICs busy a fraction nic_u of the time and the NVSwitches a
 * fraction nvswitch_u. */
double node_rest_power_w(const NodeSpec *n, double nic_u, double nvswitch_u);
/* Wall energy of n_nodes nodes over time_s seconds whose GPUs drew
 * gpu_energy_j in all: (gpu_energy_j + n_nodes * rest * time_s) /
 * psu_efficiency. */
double node_energy_j(const NodeSpec *n, guint n_nodes, double time_s,
                     double gpu_energy_j, double nic_u, double nvswitch_u);
/* What node n's figures rest on, part i = 0, 1, ... until NULL: returns
 * the part's name ("cpu_active_w", "cpu_idle_w", "cpu_load", "dram",
 * "nic", "nvswitch", "other_w", "psu_efficiency"; an idle/active pair is
 * one part) and sets *source to the preset's source text, which begins
 * with "fit" for a fit to the measurement it names and "estimate" for an
 * estimate (else a given figure: a datasheet's), as the GPU catalogue's
 * (models/gpu.h, GpuBasis).  *source is NULL for a node that is no
 * preset ("none", or "custom": figures a script gave). */
const char *node_part_source(const NodeSpec *n, guint i, const char **source);

/* A PUE is finite and in [1, 10]; FALSE (NODE_ERROR_INVALID) otherwise. */
gboolean node_check_pue(double pue, GError **error);

#define NODE_ERROR (node_error_quark())
GQuark node_error_quark(void);
typedef enum {
  NODE_ERROR_UNKNOWN,   /* no preset of that name */
  NODE_ERROR_INVALID    /* a field out of range */
} NodeError;

G_END_DECLS

#endif

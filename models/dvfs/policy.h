/* models/dvfs/policy.h -- DVFS policies: turn a workload into a frequency
 * plan (DESIGN section 6).
 *
 * A policy is a small value (kind + parameters) that scripts build with
 * js.policy.NAME{...}; dvfs_plan() turns it into a SimPlan for one workload
 * on one cluster.  Definitions used throughout: baseline = the same workload
 * at auto clocks; energy saving = 1 - E/E_base; slowdown = T/T_base - 1.
 */
#ifndef MODELS_DVFS_POLICY_H
#define MODELS_DVFS_POLICY_H

#include <glib.h>
#include "sim/engine.h"
#include "models/cluster.h"

G_BEGIN_DECLS

typedef enum {
  DVFS_MAX = 0,   /* auto clocks everywhere: the baseline */
  DVFS_FIXED,     /* locked clocks everywhere */
  DVFS_KIND_COUNT
} DvfsKind;

typedef struct {
  DvfsKind kind;
  guint sm_mhz;   /* DVFS_FIXED: 0 = auto */
  guint mem_mhz;  /* DVFS_FIXED: 0 = auto */
} DvfsPolicy;

/* A short readable label: "max", "fixed(sm=1200)". Caller frees. */
char *dvfs_policy_label(const DvfsPolicy *p);

/* Checks the policy's parameters against the cluster's GPU (clocks within
 * range); errors name the parameter, its value and the allowed range. */
gboolean dvfs_policy_check(const DvfsPolicy *p, const Cluster *c,
                           GError **error);

/* Builds the plan for workload w on cluster c.  Caller owns the plan. */
SimPlan *dvfs_plan(const DvfsPolicy *p, const Cluster *c,
                   const SimWorkload *w, GError **error);

#define DVFS_ERROR (dvfs_error_quark())
GQuark dvfs_error_quark(void);
typedef enum { DVFS_ERROR_INVALID } DvfsError;

G_END_DECLS

#endif

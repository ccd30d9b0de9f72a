/* models/dvfs/zeus.h -- the Zeus baseline (You et al., NSDI'23) on a
 * computation DAG: one power limit for every GPU, chosen to minimise the
 * energy-time cost eta * E + (1 - eta) * MAXPOWER * T by simulating the
 * pipeline under every power limit of the GPU's range.  See
 * models/dvfs/zeus.c.
 */
#ifndef MODELS_DVFS_ZEUS_H
#define MODELS_DVFS_ZEUS_H

#include <glib.h>
#include "models/dvfs/perseus_dag.h"

G_BEGIN_DECLS

typedef struct {
  double eta;          /* weight of energy, [0, 1] */
  double power_min_w;  /* lowest limit tried */
  double power_max_w;  /* highest limit tried; also MAXPOWER in the cost */
  double step_w;       /* > 0 */
} ZeusConfig;

/* A group of identical pipelines: `count` copies whose DAG GPU g runs
 * factor[g] times slower (NULL: no straggler), in iteration `iteration`
 * (groups of one iteration end together; iterations add up). */
typedef struct {
  const double *factor;
  double count;
  guint iteration;
} ZeusPipelines;

typedef struct {
  double limit_w;      /* the chosen power limit */
  gint64 time_ns;      /* cluster iteration time under it */
  double energy_j;     /* all pipelines, waiting included */
  double cost;
  guint n_tried;
} ZeusChoice;

/* The plan of d under a power limit: every computation at its highest
 * clock whose mean power E/t fits the limit (its lowest clock when none
 * fits), as the GPU's power cap does.  Caller frees it. */
guint16 *zeus_plan_at(const PerseusDag *d, double limit_w);

/* Tries limits power_max_w, power_max_w - step, ... down to power_min_w
 * on the pipelines (in every iteration the cluster waits for its slowest
 * pipeline; every pipeline's GPUs block at P_block until then; iterations
 * add up) and keeps the lowest cost (the highest limit among equal
 * costs).  n_pipes 0 = one pipeline without stragglers.  Errors name the
 * bad parameter. */
gboolean zeus_choose(const PerseusDag *d, const ZeusConfig *cfg,
                     const ZeusPipelines *pipes, guint n_pipes,
                     ZeusChoice *out, GError **error);

G_END_DECLS

#endif

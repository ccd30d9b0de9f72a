/* run/trust.h -- how far a run's answer can be trusted, and why.
 *
 * Every run rests on parts of the model: the GPU's power terms, the power
 * limit it ran under, the driver's boost controller, the workload's op
 * costs, and the node's figures where a node is set (its node and
 * facility energy rest on them).  Each part is one of
 *
 *   validated   checked on measured data it was not fitted to, in the
 *               record of docs/fidelity.md (and within that record),
 *   calibrated  fitted to measurements, not checked on others,
 *   estimated   resting on estimates (scaled from another GPU, a power
 *               limit below the range the record checks, kernels without
 *               FLOPs or bytes at clocks they were not recorded at, ...),
 *
 * and a run is as trustworthy as its weakest part.  The rules are all
 * here, derived from the catalogue's sources (gpu_param_basis), its
 * held-out checks (gpu_heldout_check) and the workload's provenance, so
 * js.simulate, js.sweep's rows and `joulesim gpus NAME` agree.
 * docs/fidelity.md, "Trust levels", states them for users.
 */
#ifndef RUN_TRUST_H
#define RUN_TRUST_H

#include <glib.h>
#include "models/gpu.h"
#include "models/node.h"
#include "sim/workload.h"

G_BEGIN_DECLS

/* Ordered from strongest to weakest: a run's level is the largest of its
 * parts'. */
typedef enum {
  JS_TRUST_VALIDATED,
  JS_TRUST_CALIBRATED,
  JS_TRUST_ESTIMATED
} JsTrustLevel;

/* "validated", "calibrated", "estimated". */
const char *js_trust_level_name(JsTrustLevel level);

typedef struct {
  JsTrustLevel level;
  GPtrArray *reasons;  /* owned strings: the parts at `level`, each naming
                          the part and its evidence */
} JsTrust;

void js_trust_clear(JsTrust *t);

/* What a run rested on. */
typedef struct {
  const GpuSpec *gpu;        /* the cluster's GPU */
  double power_limit_w;      /* the limit it ran under; <= 0: the GPU's
                                default */
  gboolean boost_controller; /* the driver's controller held the limit */
  gboolean clocks_changed;   /* a policy set clocks, or a limit below the
                                default lowered them */
  const SimWorkload *w;      /* its provenance and shapes are read */
  const NodeSpec *node;      /* the node around the GPUs (node_energy_j
                                and facility_energy_j rest on it); NULL
                                or "none": none */
} JsTrustRun;

/* The trust of a run (t is overwritten; clear it with js_trust_clear). */
void js_trust_assess(const JsTrustRun *run, JsTrust *t);

/* The trust of g's power model alone. */
void js_trust_gpu(const GpuSpec *g, JsTrust *t);

/* Appends, for `joulesim gpus NAME`, g's power model's level, what each
 * power term rests on (its basis and source) and the power limits the
 * record checks. */
void js_trust_describe_gpu(const GpuSpec *g, GString *out);

G_END_DECLS

#endif

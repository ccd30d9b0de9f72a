/* models/dvfs/envpipe.h -- the EnvPipe baseline (Choi et al., USENIX ATC'23)
 * on a computation DAG: keep the pipeline's outer envelope at the maximum
 * clock and slow the inner computations into their slack.  See
 * models/dvfs/envpipe.c.
 */
#ifndef MODELS_DVFS_ENVPIPE_H
#define MODELS_DVFS_ENVPIPE_H

#include <glib.h>
#include "models/dvfs/perseus_dag.h"

G_BEGIN_DECLS

/* The EnvPipe plan of finished DAG d: an option index per node (caller
 * frees it).  Its iteration time equals the all-max plan's. */
guint16 *envpipe_plan(const PerseusDag *d);

G_END_DECLS

#endif

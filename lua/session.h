/* lua/session.h -- one scenario run's context and the orchestration shared
 * by the Lua binding, the CLI and the benchmark: cluster + workload + policy
 * -> machine -> plan -> engine -> result.  No global state: everything a
 * script needs lives in its JsSession.
 */
#ifndef LUA_SESSION_H
#define LUA_SESSION_H

#include <glib.h>
#include "sim/engine.h"
#include "models/gpu.h"
#include "models/cluster.h"
#include "models/dvfs/policy.h"

G_BEGIN_DECLS

typedef struct {
  GpuCatalogue *catalogue;  /* owned */
  guint64 seed;             /* --seed */
  char *scenario_path;      /* owned, may be NULL */
  char *scenario_source;    /* owned, may be NULL */
  gboolean quiet;
  guint jobs;
} JsSession;

JsSession *js_session_new(guint64 seed);
void js_session_free(JsSession *s);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(JsSession, js_session_free)

typedef struct {
  guint iterations;          /* >= 1 */
  guint64 seed;
  double switch_latency_ms;  /* < 0: the cluster's */
  SimObserver observer;      /* optional */
  gpointer observer_data;
} JsRunOptions;

/* Simulates w on c under policy p.  Returns a new result or NULL with an
 * error naming what failed. */
SimResult *js_simulate(JsSession *s, const Cluster *c, const SimWorkload *w,
                       const DvfsPolicy *p, const JsRunOptions *opt,
                       GError **error);

G_END_DECLS

#endif

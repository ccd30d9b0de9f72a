/* run/timeline.c -- a run with a timeline (JsRunOptions.timeline): the
 * file opened before the run as its observer, written when the run
 * succeeds, abandoned when it fails.  js.simulate{timeline} and
 * `joulesim trace export` both come here; see run/session.h. */
#include "run/session.h"

#include <string.h>

void js_timeline_spec_init(JsTimelineSpec *t)
{
  memset(t, 0, sizeof *t);
  t->t1_ns = -1;
}

/* Opens t's file for a replay of w on c. */
static TraceTimeline *timeline_open(const JsTimelineSpec *t, const Cluster *c,
                                    const SimWorkload *w, GError **error)
{
  g_autoptr(GArray) sel = NULL;
  TraceTimelineOptions topt;
  trace_timeline_options_init(&topt);
  if (t->gpus != NULL) {
    sel = trace_timeline_parse_gpus(t->gpus, w->n_ranks, error);
    if (sel == NULL) {
      if (t->gpus_context != NULL)
        g_prefix_error(error, "%s: ", t->gpus_context);
      return NULL;
    }
    topt.gpus = (const guint32 *)(void *)sel->data;
    topt.n_gpus = sel->len;
  }
  topt.t0_ns = t->t0_ns;
  topt.t1_ns = t->t1_ns;
  /* The baseline of the power counter: the machine's idle and blocked
   * powers (before per-GPU variability). */
  topt.idle_power_w = cluster_idle_power_w(c);
  topt.blocked_power_w = cluster_blocked_power_w(c);
  topt.label = t->label;
  return t->name != NULL
           ? trace_timeline_open_h5(t->path, t->name, t->replace, &t->meta, w,
                                    &topt, error)
           : trace_timeline_open(t->path, w, &topt, error);
}

SimResult *js_simulate_timeline(JsSession *s, const Cluster *c,
                                const SimWorkload *w, const DvfsPolicy *p,
                                const JsRunOptions *opt, JsRunReport *report,
                                GError **error)
{
  memset(report, 0, sizeof *report);
  TraceTimeline *tl = timeline_open(opt->timeline, c, w, error);
  if (tl == NULL)
    return NULL;
  JsRunOptions run = *opt;
  run.timeline = NULL;
  run.observer = trace_timeline_observe;
  run.observer_data = tl;
  SimResult *r = js_simulate_report(s, c, w, p, &run, report, error);
  if (r == NULL) {
    trace_timeline_abort(tl);
    return NULL;
  }
  if (!trace_timeline_close(tl, &report->timeline, error)) {
    sim_result_free(r);
    return NULL;
  }
  return r;
}

/* run/uncertainty.c -- a run's uncertainty interval from bootstrap
 * resamples of a measured profile (js.simulate{uncertainty}); see
 * run/session.h. */
#include "run/session.h"
#include "run/validate.h"

void js_uncertainty_spec_init(JsUncertaintySpec *u, const Profile *profile)
{
  *u = (JsUncertaintySpec){profile, 200, 0.9, FIT_ALL, 0, FALSE, 0};
}

/* One resample: its fitted GPU replaces the cluster's in a copy, and the
 * run is simulated again. */
typedef struct {
  JsSession *s;
  const Cluster *c;
  const SimWorkload *w;
  const DvfsPolicy *pol;
  JsRunOptions opt;
} BootRun;

static gboolean boot_simulate(const FitModel *m, gpointer data,
                              double *values, GError **error)
{
  BootRun *b = data;
  GpuSpec *spec = fit_model_to_gpu(m, b->c->gpu->name, "bootstrap fit");
  Cluster *cc = cluster_copy(b->c, error);
  if (cc == NULL) {
    gpu_spec_free(spec);
    return FALSE;
  }
  gpu_spec_free(cc->gpu);
  cc->gpu = spec;
  /* A resample's run is not one of the script's: its refitted GPU must
   * not weaken the trust js.sweep records for the point. */
  int trust = b->s->trust_weakest;
  SimResult *r = js_simulate_planned(b->s, cc, b->w, b->pol, &b->opt, NULL,
                                     error);
  b->s->trust_weakest = trust;
  cluster_free(cc);
  if (r == NULL)
    return FALSE;
  values[0] = r->energy_j;
  values[1] = (double)r->time_ns * 1e-9;
  sim_result_free(r);
  return TRUE;
}

gboolean js_simulate_intervals(JsSession *s, const Cluster *c,
                               const SimWorkload *w, const DvfsPolicy *p,
                               const JsRunOptions *opt,
                               const JsUncertaintySpec *u, FitInterval iv[2],
                               GError **error)
{
  BootRun b = {s, c, w, p, *opt};
  b.opt.timeline = NULL;
  b.opt.observer = NULL;
  b.opt.observer_data = NULL;
  JsFitInput in = {0};
  js_fit_input_from_profile(u->profile, &in);
  FitBootstrapOptions bopt = {u->mode, u->power_limit_w, u->samples, u->level,
                              u->seed_given ? u->seed : opt->seed};
  gboolean ok = fit_bootstrap(c->gpu, in.ops, in.n, &bopt, 2, boot_simulate,
                              &b, iv, error);
  js_fit_input_clear(&in);
  return ok;
}

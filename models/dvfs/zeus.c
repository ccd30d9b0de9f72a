/* models/dvfs/zeus.c -- the Zeus baseline: one power limit for all GPUs.
 *
 * Zeus (You, Chung, Chowdhury, "Zeus: Understanding and Optimizing GPU
 * Energy Consumption of DNN Training", NSDI'23) picks a GPU power limit by
 * minimising the energy-time cost
 *
 *   C(L) = eta * E(L) + (1 - eta) * MAXPOWER * T(L)
 *
 * where MAXPOWER is the GPU's maximum power limit (here times the number of
 * GPUs, so both terms are in joules for the whole cluster) and eta weighs
 * energy against time.  Zeus measures C online over power limits; here the
 * pipeline is simulated under each limit L = power_max, power_max - step,
 * ..., power_min:
 *
 *   - a computation runs at its highest clock f whose mean power
 *     E(f)/t(f) <= L (its lowest clock when none fits): the GPU's power cap
 *     seen through the measured profile, as models/table.c applies it;
 *   - each group of pipelines is evaluated on the DAG with its straggler
 *     factors; an iteration ends with its slowest pipeline and every GPU
 *     blocks at P_block until then; iterations add up:
 *       T = sum_it max_p T_p,
 *       E = sum_p count_p (sum_i E_i + P_block (n T_it(p) - sum t_i)).
 * The cheapest limit wins (ties: the higher limit).
 *
 * Known limits: Zeus also tunes the batch size (fixed here), and a real
 * power cap acts on a ~100 ms power window, not on each computation's mean
 * power.
 */
#include "models/dvfs/zeus.h"

#include <math.h>

guint16 *zeus_plan_at(const PerseusDag *d, double limit_w)
{
  guint n = perseus_dag_n_nodes(d);
  guint16 *c = g_new0(guint16, MAX(n, 1u));
  for (guint i = 0; i < n; i++) {
    guint no = perseus_dag_n_options(d, i);
    gint best = -1;
    guint lowest = 0;
    for (guint k = 0; k < no; k++) {
      const PerseusOption *o = perseus_dag_option(d, i, k);
      if (o->sm_mhz < perseus_dag_option(d, i, lowest)->sm_mhz)
        lowest = k;
      double p = o->energy_j / ((double)o->time_ns * 1e-9);
      if (p <= limit_w &&
          (best < 0 || o->sm_mhz > perseus_dag_option(d, i, (guint)best)->sm_mhz))
        best = (gint)k;
    }
    c[i] = (guint16)(best >= 0 ? (guint)best : lowest);
  }
  return c;
}

gboolean zeus_choose(const PerseusDag *d, const ZeusConfig *cfg,
                     const ZeusPipelines *pipes, guint n_pipes,
                     ZeusChoice *out, GError **error)
{
  g_return_val_if_fail(d != NULL && cfg != NULL && out != NULL, FALSE);
  if (!(cfg->eta >= 0.0 && cfg->eta <= 1.0)) {
    g_set_error(error, PERSEUS_ERROR, PERSEUS_ERROR_INVALID,
                "zeus: eta = %g must be in [0, 1]", cfg->eta);
    return FALSE;
  }
  if (!(cfg->step_w > 0.0 && isfinite(cfg->step_w)) ||
      !(cfg->power_min_w > 0.0 && cfg->power_max_w >= cfg->power_min_w &&
        isfinite(cfg->power_max_w))) {
    g_set_error(error, PERSEUS_ERROR, PERSEUS_ERROR_INVALID,
                "zeus: power range %g..%g W in steps of %g W is not valid",
                cfg->power_min_w, cfg->power_max_w, cfg->step_w);
    return FALSE;
  }
  ZeusPipelines one = {NULL, 1.0, 0};
  if (n_pipes == 0) {
    pipes = &one;
    n_pipes = 1;
  }
  guint n_iter = 0;
  for (guint q = 0; q < n_pipes; q++)
    n_iter = MAX(n_iter, pipes[q].iteration + 1);
  /* GPUs of one iteration (the same in all of them for a real cluster). */
  double n_gpus = 0.0;
  for (guint q = 0; q < n_pipes; q++)
    if (pipes[q].iteration == 0)
      n_gpus += pipes[q].count * perseus_dag_n_gpus(d);
  double p_block = perseus_dag_p_block(d);
  guint G = perseus_dag_n_gpus(d);
  gboolean have = FALSE;
  guint tried = 0;
  g_autofree gint64 *tq = g_new(gint64, n_pipes);
  g_autofree double *eq = g_new(double, n_pipes);
  g_autofree gint64 *tit = g_new(gint64, n_iter);
  guint n_steps = (guint)floor((cfg->power_max_w - cfg->power_min_w) /
                               cfg->step_w + 1e-9) + 1;
  for (guint j = 0; j < n_steps; j++) {
    double L = cfg->power_max_w - cfg->step_w * j;
    g_autofree guint16 *plan = zeus_plan_at(d, L);
    for (guint it = 0; it < n_iter; it++)
      tit[it] = 0;
    for (guint q = 0; q < n_pipes; q++) {
      perseus_dag_eval(d, plan, pipes[q].factor, &tq[q], &eq[q]);
      tit[pipes[q].iteration] = MAX(tit[pipes[q].iteration], tq[q]);
    }
    double E = 0.0;
    gint64 T = 0;
    for (guint it = 0; it < n_iter; it++)
      T += tit[it];
    for (guint q = 0; q < n_pipes; q++)
      /* Each pipeline blocks from its own end until its iteration's. */
      E += pipes[q].count *
           (eq[q] + p_block * G *
                      (double)(tit[pipes[q].iteration] - tq[q]) * 1e-9);
    double cost = cfg->eta * E +
                  (1.0 - cfg->eta) * cfg->power_max_w * n_gpus *
                    (double)T * 1e-9;
    tried++;
    if (!have || cost < out->cost) {
      have = TRUE;
      out->limit_w = L;
      out->time_ns = T;
      out->energy_j = E;
      out->cost = cost;
    }
  }
  out->n_tried = tried;
  return TRUE;
}

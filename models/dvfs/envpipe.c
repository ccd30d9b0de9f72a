/* models/dvfs/envpipe.c -- the EnvPipe baseline.
 *
 * EnvPipe (Choi et al., "EnvPipe: Performance-preserving DNN Training
 * Framework for Saving Energy", USENIX ATC'23) keeps the computations that
 * form the pipeline's outer envelope -- those that set the iteration time
 * at the maximum clock -- at that clock, and lowers the SM clock of the
 * inner computations until their path meets the envelope, never below a
 * computation's most energy-efficient clock.  On the computation DAG:
 *
 *   1. Every node at its highest clock; T_env = the iteration time.
 *   2. Latest finishes lf for deadline T_env; then, in topological order,
 *      every node takes the LOWEST clock that (a) still fits between its
 *      earliest start and its latest finish and (b) is not below its
 *      minimum-energy clock f*_i = argmin_k E_ik (the slowest useful
 *      clock: lower clocks cost more energy and more time).
 * Envelope nodes have no slack, so they keep the maximum clock; the
 * iteration time stays T_env exactly.
 *
 * Differences from Perseus' fastest frontier point: EnvPipe minimises each
 * computation's own energy E_i and ignores that time a GPU spends computing
 * is time it does not spend blocked at P_block (Perseus minimises E_i -
 * P_block t_i), and it fills slack greedily in one pass instead of
 * planning the whole frontier.
 *
 * Known limits: EnvPipe also reorders the pipeline schedule to enlarge the
 * slack; here the schedule is the workload's (the DAG's) and only clocks
 * change.
 */
#include "models/dvfs/envpipe.h"

guint16 *envpipe_plan(const PerseusDag *d)
{
  g_return_val_if_fail(d != NULL, NULL);
  guint n = perseus_dag_n_nodes(d);
  guint16 *choice = perseus_dag_max_choice(d);
  g_autofree gint64 *t = g_new(gint64, MAX(n, 1u));
  for (guint i = 0; i < n; i++)
    t[i] = perseus_dag_option(d, i, choice[i])->time_ns;

  const Dag *g = perseus_dag_graph(d);
  const guint32 *topo = g->topo, *pred_off = g->pred_off, *pred = g->pred;
  g_autofree gint64 *es = g_new(gint64, MAX(n, 1u));
  g_autofree gint64 *lf = g_new(gint64, MAX(n, 1u));
  gint64 T = dag_earliest(g, t, es);
  dag_latest(g, t, T, lf);
  for (guint q = 0; q < n; q++) {
    guint i = topo[q];
    gint64 e = 0;
    for (guint k = pred_off[i]; k < pred_off[i + 1]; k++)
      e = MAX(e, es[pred[k]] + t[pred[k]]);
    es[i] = e;
    gint64 window = lf[i] - e;
    guint no = perseus_dag_n_options(d, i);
    /* The minimum-energy clock. */
    guint best_e = 0;
    for (guint k = 1; k < no; k++) {
      const PerseusOption *o = perseus_dag_option(d, i, k);
      const PerseusOption *b = perseus_dag_option(d, i, best_e);
      if (o->energy_j < b->energy_j ||
          (o->energy_j == b->energy_j && o->sm_mhz > b->sm_mhz))
        best_e = k;
    }
    guint floor_mhz = perseus_dag_option(d, i, best_e)->sm_mhz;
    guint pick = choice[i];
    for (guint k = 0; k < no; k++) {
      const PerseusOption *o = perseus_dag_option(d, i, k);
      const PerseusOption *c = perseus_dag_option(d, i, pick);
      if (o->sm_mhz >= floor_mhz && o->time_ns <= window &&
          o->sm_mhz < c->sm_mhz)
        pick = k;
    }
    choice[i] = (guint16)pick;
    t[i] = perseus_dag_option(d, i, pick)->time_ns;
  }
  return choice;
}

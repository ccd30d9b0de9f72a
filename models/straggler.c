/* models/straggler.c -- stragglers and the machine wrapper applying them.
 *
 * Model
 * -----
 * A straggler multiplies the duration of every kernel of one GPU in one
 * iteration by a factor F >= 1 (thermal throttling, a slow node, noisy
 * neighbours): the wrapper returns time_scale * F(g, iter) and leaves the
 * kernel's power unchanged, so a straggling kernel also costs F times its
 * energy.  Communication is not slowed.  The factor of a GPU is the largest
 * of all stragglers that cover it in that iteration (they do not compound).
 *
 * Explicit stragglers cover one GPU or every GPU of one data-parallel
 * pipeline (dp index of the rank in Megatron order, rank = tp_i + tp *
 * (dp_i + dp * pp_i)) for iterations from_iteration..to_iteration
 * (inclusive, 0-based).
 *
 * Random stragglers.  GPU g walks the iterations 0..n-1 with its own PCG
 * stream, sim_pcg_for_entity(seed, SIM_PCG_STRAGGLER, k << 32 | g) for the
 * k-th random model added (k = 0 for the first): at an iteration where it
 * is not straggling it draws u; if u < rate an episode starts there, with
 * slowdown lo + (hi - lo) * u2 and length dur_lo + bounded(dur_hi - dur_lo
 * + 1) iterations; the walk resumes after the episode.  So a GPU's episodes
 * depend only on (seed, k, g): adding GPUs or iterations never changes
 * another GPU's draws, and the expected fraction of straggling iterations
 * is rate * d / (1 + rate * d) for a mean length d.
 *
 * The wrapper's iteration_begin first runs the inner machine's, then the
 * hook (a straggler-aware policy).  Because the engine drops its price
 * cache at every iteration when iteration_begin is set, the factor of the
 * current iteration always applies.
 *
 * Known limits
 * ------------
 * - Slowdowns act at iteration granularity (the engine's iteration
 *   boundary), not mid-iteration.
 * - Power is unchanged while straggling: a throttled GPU (lower clock,
 *   lower power) would in reality cost less energy per kernel than F times
 *   its normal energy.
 */
#include "models/straggler.h"

#include <math.h>

#include "sim/pcg.h"

G_DEFINE_QUARK(straggler-error-quark, straggler_error)

typedef struct {
  guint from, to;      /* inclusive */
  double slowdown;
} Episode;

struct StragglerSet {
  guint n_gpus, tp, dp, n_iterations;
  GArray *explicit_;   /* StragglerSpec */
  GArray **episodes;   /* per GPU: Episode, ascending, non-overlapping per
                          random model; NULL when none */
  guint n_random;      /* random models added */
};

StragglerSet *straggler_set_new(guint n_gpus, guint tp, guint dp,
                                guint n_iterations, GError **error)
{
  if (n_gpus == 0 || tp == 0 || dp == 0 || n_gpus % (tp * dp) != 0) {
    g_set_error(error, STRAGGLER_ERROR, STRAGGLER_ERROR_INVALID,
                "stragglers: %u GPUs do not form tp = %u x dp = %u x pp "
                "pipelines", n_gpus, tp, dp);
    return NULL;
  }
  StragglerSet *s = g_new0(StragglerSet, 1);
  s->n_gpus = n_gpus;
  s->tp = tp;
  s->dp = dp;
  s->n_iterations = MAX(n_iterations, 1u);
  s->explicit_ = g_array_new(FALSE, FALSE, sizeof(StragglerSpec));
  s->episodes = g_new0(GArray *, n_gpus);
  return s;
}

void straggler_set_free(StragglerSet *s)
{
  if (s == NULL)
    return;
  g_array_unref(s->explicit_);
  for (guint g = 0; g < s->n_gpus; g++)
    if (s->episodes[g] != NULL)
      g_array_unref(s->episodes[g]);
  g_free(s->episodes);
  g_free(s);
}

static gboolean check_slowdown(const char *what, double v, GError **error)
{
  if (isfinite(v) && v >= 1.0 && v <= STRAGGLER_MAX_SLOWDOWN)
    return TRUE;
  g_set_error(error, STRAGGLER_ERROR, STRAGGLER_ERROR_INVALID,
              "stragglers: %s = %g must be in [1, %g] (a time factor)", what,
              v, STRAGGLER_MAX_SLOWDOWN);
  return FALSE;
}

gboolean straggler_set_add(StragglerSet *s, const StragglerSpec *spec,
                           GError **error)
{
  g_return_val_if_fail(s != NULL && spec != NULL, FALSE);
  if ((spec->gpu >= 0) == (spec->pipeline >= 0)) {
    g_set_error(error, STRAGGLER_ERROR, STRAGGLER_ERROR_INVALID,
                "stragglers: give exactly one of 'gpu' and 'pipeline'");
    return FALSE;
  }
  if (spec->gpu >= 0 && (guint)spec->gpu >= s->n_gpus) {
    g_set_error(error, STRAGGLER_ERROR, STRAGGLER_ERROR_INVALID,
                "stragglers: gpu = %d is out of range (the cluster has %u "
                "GPUs, numbered from 1)", spec->gpu + 1, s->n_gpus);
    return FALSE;
  }
  if (spec->pipeline >= 0 && (guint)spec->pipeline >= s->dp) {
    g_set_error(error, STRAGGLER_ERROR, STRAGGLER_ERROR_INVALID,
                "stragglers: pipeline = %d is out of range (the workload has "
                "%u data-parallel pipelines, numbered from 1)",
                spec->pipeline + 1, s->dp);
    return FALSE;
  }
  if (!check_slowdown("slowdown", spec->slowdown, error))
    return FALSE;
  if (spec->to_iteration < spec->from_iteration) {
    g_set_error(error, STRAGGLER_ERROR, STRAGGLER_ERROR_INVALID,
                "stragglers: to_iteration (%u) is before from_iteration (%u)",
                spec->to_iteration, spec->from_iteration);
    return FALSE;
  }
  g_array_append_val(s->explicit_, *spec);
  return TRUE;
}

gboolean straggler_set_add_random(StragglerSet *s, const StragglerRandom *r,
                                  guint64 seed, GError **error)
{
  g_return_val_if_fail(s != NULL && r != NULL, FALSE);
  if (!(r->rate >= 0.0 && r->rate <= 1.0)) {
    g_set_error(error, STRAGGLER_ERROR, STRAGGLER_ERROR_INVALID,
                "stragglers: rate = %g must be in [0, 1] (probability per "
                "GPU and iteration)", r->rate);
    return FALSE;
  }
  if (!check_slowdown("slowdown[1]", r->slow_lo, error) ||
      !check_slowdown("slowdown[2]", r->slow_hi, error))
    return FALSE;
  if (r->slow_hi < r->slow_lo) {
    g_set_error(error, STRAGGLER_ERROR, STRAGGLER_ERROR_INVALID,
                "stragglers: slowdown = {%g, %g} must be {lo, hi} with lo <= "
                "hi", r->slow_lo, r->slow_hi);
    return FALSE;
  }
  if (r->dur_lo < 1 || r->dur_hi < r->dur_lo) {
    g_set_error(error, STRAGGLER_ERROR, STRAGGLER_ERROR_INVALID,
                "stragglers: duration = {%u, %u} must be {lo, hi} iterations "
                "with 1 <= lo <= hi", r->dur_lo, r->dur_hi);
    return FALSE;
  }
  guint k = s->n_random++;
  for (guint g = 0; g < s->n_gpus; g++) {
    SimPcg rng;
    sim_pcg_for_entity(&rng, seed, SIM_PCG_STRAGGLER, (guint64)k << 32 | g);
    for (guint it = 0; it < s->n_iterations;) {
      double u = sim_pcg_double(&rng);
      if (!(u < r->rate)) {
        it++;
        continue;
      }
      Episode ep;
      ep.slowdown = r->slow_lo + (r->slow_hi - r->slow_lo) *
                                   sim_pcg_double(&rng);
      guint len = r->dur_lo + sim_pcg_bounded(&rng, r->dur_hi - r->dur_lo + 1);
      ep.from = it;
      ep.to = it + len - 1 < it ? G_MAXUINT : it + len - 1;
      if (s->episodes[g] == NULL)
        s->episodes[g] = g_array_new(FALSE, FALSE, sizeof(Episode));
      g_array_append_val(s->episodes[g], ep);
      if (ep.to == G_MAXUINT)
        break;
      it = ep.to + 1;
    }
  }
  return TRUE;
}

guint straggler_pipeline_of(const StragglerSet *s, guint gpu)
{
  return (gpu / s->tp) % s->dp;
}

double straggler_factor(const StragglerSet *s, guint gpu, guint iter)
{
  if (s == NULL || gpu >= s->n_gpus)
    return 1.0;
  double f = 1.0;
  guint pipe = straggler_pipeline_of(s, gpu);
  for (guint i = 0; i < s->explicit_->len; i++) {
    const StragglerSpec *sp = &g_array_index(s->explicit_, StragglerSpec, i);
    if (iter < sp->from_iteration || iter > sp->to_iteration)
      continue;
    if ((sp->gpu >= 0 && (guint)sp->gpu == gpu) ||
        (sp->pipeline >= 0 && (guint)sp->pipeline == pipe))
      f = MAX(f, sp->slowdown);
  }
  const GArray *eps = s->episodes[gpu];
  if (eps != NULL)
    for (guint i = 0; i < eps->len; i++) {
      const Episode *e = &g_array_index(eps, Episode, i);
      if (iter >= e->from && iter <= e->to)
        f = MAX(f, e->slowdown);
    }
  return f;
}

gboolean straggler_set_empty(const StragglerSet *s)
{
  if (s == NULL)
    return TRUE;
  if (s->explicit_->len > 0)
    return FALSE;
  for (guint g = 0; g < s->n_gpus; g++)
    if (s->episodes[g] != NULL && s->episodes[g]->len > 0)
      return FALSE;
  return TRUE;
}

guint straggler_set_n_gpus(const StragglerSet *s)
{
  return s->n_gpus;
}

/* ---- the machine wrapper --------------------------------------------- */

struct StragglerMachine {
  SimMachine sim;           /* the engine's view; ctx points here */
  const SimMachine *inner;
  const StragglerSet *set;
  StragglerHook hook;
  gpointer hook_data;
};

static void wrap_kernel_cost(gpointer ctx, guint gpu, guint32 shape,
                             SimClocks req, guint iter, SimCost *out)
{
  StragglerMachine *m = ctx;
  m->inner->kernel_cost(m->inner->ctx, gpu, shape, req, iter, out);
  out->time_scale *= straggler_factor(m->set, gpu, iter);
}

static gint64 wrap_collective_ns(gpointer ctx, guint32 group, double bytes,
                                 SimCollType coll, gint64 start_ns)
{
  StragglerMachine *m = ctx;
  return m->inner->collective_ns(m->inner->ctx, group, bytes, coll, start_ns);
}

static gint64 wrap_p2p_ns(gpointer ctx, guint src, guint dst, double bytes,
                          gint64 start_ns)
{
  StragglerMachine *m = ctx;
  return m->inner->p2p_ns(m->inner->ctx, src, dst, bytes, start_ns);
}

static gboolean wrap_iteration_begin(gpointer ctx, guint iter, SimPlan **plan,
                                     GError **error)
{
  StragglerMachine *m = ctx;
  if (m->inner->iteration_begin != NULL &&
      !m->inner->iteration_begin(m->inner->ctx, iter, plan, error))
    return FALSE;
  if (m->hook != NULL)
    return m->hook(m->hook_data, iter, plan, error);
  return TRUE;
}

StragglerMachine *straggler_machine_new(const SimMachine *inner,
                                        const StragglerSet *set,
                                        StragglerHook hook,
                                        gpointer hook_data)
{
  g_return_val_if_fail(inner != NULL, NULL);
  g_return_val_if_fail(set == NULL || set->n_gpus == inner->n_gpus, NULL);
  StragglerMachine *m = g_new0(StragglerMachine, 1);
  m->inner = inner;
  m->set = set;
  m->hook = hook;
  m->hook_data = hook_data;
  m->sim = *inner;
  m->sim.ctx = m;
  m->sim.kernel_cost = wrap_kernel_cost;
  m->sim.collective_ns = wrap_collective_ns;
  m->sim.p2p_ns = wrap_p2p_ns;
  m->sim.iteration_begin = wrap_iteration_begin;
  m->sim.uniform_pricing = FALSE; /* slowed GPUs are priced apart */
  return m;
}

void straggler_machine_free(StragglerMachine *m)
{
  g_free(m);
}

const SimMachine *straggler_machine_sim(StragglerMachine *m)
{
  g_return_val_if_fail(m != NULL, NULL);
  return &m->sim;
}

/* models/fit_validate.c -- validating the fitted model on held-out clocks
 * (fit_validate) and its uncertainty by bootstrap (fit_bootstrap).
 *
 * Validation: the distinct SM clocks of the profile are shuffled by the PCG
 * stream (seed, SIM_PCG_HOLDOUT, 0); a fraction is held out (at least 1,
 * leaving at least 2), or the shuffled clocks are dealt into k folds.
 * Every point of a held-out clock is predicted by the model fitted on the
 * others (models/fit.c); errors are relative, pred/meas - 1.  The stages
 * are the functions below in order: distinct clocks, folds, rows with the
 * out-of-box predictions, fits per fold, summaries.
 *
 * Bootstrap: each resample draws every op's points with replacement (PCG
 * stream SIM_PCG_HOLDOUT/1+b), refits and evaluates the caller's what-if.
 */
#include "models/fit.h"
#include "models/fit-private.h"
#include "sim/pcg.h"

#include <math.h>
#include <string.h>

void fit_report_free(FitReport *r)
{
  if (r == NULL)
    return;
  if (r->rows != NULL)
    g_array_unref(r->rows);
  if (r->summary != NULL) {
    for (guint i = 0; i < r->summary->len; i++)
      g_free(g_array_index(r->summary, FitSummary, i).name);
    g_array_unref(r->summary);
  }
  fit_model_free(r->oob);
  fit_model_free(r->fitted_all);
  g_free(r);
}

static gint cmp_uint(gconstpointer a, gconstpointer b)
{
  guint x = *(const guint *)a, y = *(const guint *)b;
  return x < y ? -1 : x > y;
}

/* Accumulates relative errors. */
typedef struct {
  guint n;
  double st, mt, bt, se, me, be;
} ErrAcc;

static void err_add(ErrAcc *a, double t, double tm, double e, double em)
{
  double rt = t / tm - 1, re = e / em - 1;
  a->n++;
  a->st += fabs(rt);
  a->bt += rt;
  a->mt = MAX(a->mt, fabs(rt));
  a->se += fabs(re);
  a->be += re;
  a->me = MAX(a->me, fabs(re));
}

static FitErr err_get(const ErrAcc *a)
{
  FitErr e = {0};
  e.n = a->n;
  if (a->n == 0) {
    e.time_mape = e.time_max = e.time_bias = NAN;
    e.energy_mape = e.energy_max = e.energy_bias = NAN;
    return e;
  }
  e.time_mape = a->st / a->n;
  e.time_max = a->mt;
  e.time_bias = a->bt / a->n;
  e.energy_mape = a->se / a->n;
  e.energy_max = a->me;
  e.energy_bias = a->be / a->n;
  return e;
}

/* One point of an energy curve: clocks (memory effective) and the
 * measured, out-of-box and fitted energies. */
typedef struct {
  guint sm, mem;
  double e, eo, ef;
} Curve;

static gint cmp_curve(gconstpointer a, gconstpointer b)
{
  const Curve *x = a, *y = b;
  if (x->mem != y->mem)
    return x->mem < y->mem ? -1 : 1;
  return x->sm < y->sm ? -1 : x->sm > y->sm;
}

/* Min-energy points and the savings at the measured one against the top
 * clock pair: fills the summary's min/saving fields. */
static void curve_summary(const Curve *c, guint n, FitSummary *s)
{
  s->saving_meas = s->saving_oob = s->saving_fit = NAN;
  s->regret_oob = s->regret_fit = NAN;
  if (n == 0)
    return;
  guint im = 0, io = 0, ifit = 0, top = 0;
  for (guint k = 1; k < n; k++) {
    if (c[k].e < c[im].e)
      im = k;
    if (c[k].eo < c[io].eo)
      io = k;
    if (c[k].ef < c[ifit].ef)
      ifit = k;
    if (c[k].mem > c[top].mem || (c[k].mem == c[top].mem && c[k].sm > c[top].sm))
      top = k;
  }
  s->min_sm_meas = c[im].sm;
  s->min_mem_meas = c[im].mem;
  s->min_sm_oob = c[io].sm;
  s->min_sm_fit = c[ifit].sm;
  s->saving_meas = 1 - c[im].e / c[top].e;
  s->saving_oob = 1 - c[im].eo / c[top].eo;
  s->saving_fit = 1 - c[im].ef / c[top].ef;
  s->regret_oob = c[io].e / c[im].e - 1;
  s->regret_fit = c[ifit].e / c[im].e - 1;
}

/* Stage 1: the distinct SM clocks of the profile, sorted. */
static GArray *distinct_clocks(const FitOp *ops, guint n_ops)
{
  GArray *clocks = g_array_new(FALSE, FALSE, sizeof(guint));
  g_autoptr(GHashTable) seen = g_hash_table_new(g_direct_hash, g_direct_equal);
  for (guint i = 0; i < n_ops; i++)
    for (guint j = 0; j < ops[i].n_points; j++) {
      guint s = ops[i].points[j].sm_mhz;
      if (g_hash_table_add(seen, GUINT_TO_POINTER(s)))
        g_array_append_val(clocks, s);
    }
  g_array_sort(clocks, cmp_uint);
  return clocks;
}

/* Stage 2: the fold of each clock, shuffled by the PCG stream (seed,
 * SIM_PCG_HOLDOUT, 0): k-fold deals the shuffled clocks round robin; a
 * holdout puts the first k in fold 0 (held out), the rest in fold 1.
 * Sets r->n_heldout_clocks and r->folds. */
static gboolean assign_folds(const FitOptions *opt, GArray *clocks,
                             GHashTable *fold_of, FitReport *r,
                             GError **error)
{
  guint nc = clocks->len;
  if (nc < 3) {
    g_set_error(error, FIT_ERROR, FIT_ERROR_TOO_FEW,
                "the profile has %u distinct SM clock%s (%u MHz%s): "
                "fitting and holding out clocks needs at least 3",
                nc, nc == 1 ? "" : "s", g_array_index(clocks, guint, 0),
                nc > 1 ? ", ..." : "");
    return FALSE;
  }
  SimPcg rng;
  sim_pcg_for_entity(&rng, opt->seed, SIM_PCG_HOLDOUT, 0);
  guint *order = (guint *)clocks->data;
  g_autofree guint *shuf = g_memdup2(order, nc * sizeof(guint));
  for (guint i = nc - 1; i > 0; i--) {
    guint j = sim_pcg_bounded(&rng, i + 1);
    guint tmp = shuf[i];
    shuf[i] = shuf[j];
    shuf[j] = tmp;
  }
  if (opt->folds >= 2) {
    guint folds = opt->folds;
    if (folds > nc || nc - (nc + folds - 1) / folds < 2) {
      g_set_error(error, FIT_ERROR, FIT_ERROR_INVALID,
                  "--folds %u: the profile has %u SM clocks; each fold "
                  "must leave at least 2 to train on",
                  folds, nc);
      return FALSE;
    }
    for (guint i = 0; i < nc; i++)
      g_hash_table_insert(fold_of, GUINT_TO_POINTER(shuf[i]),
                          GUINT_TO_POINTER(i % folds));
    r->n_heldout_clocks = nc;
    r->folds = folds;
    return TRUE;
  }
  if (!(opt->holdout > 0 && opt->holdout < 1)) {
    g_set_error(error, FIT_ERROR, FIT_ERROR_INVALID,
                "holdout fraction %g must be in (0, 1)", opt->holdout);
    return FALSE;
  }
  long k = lround(opt->holdout * nc);
  k = CLAMP(k, 1, (long)nc - 2);
  for (guint i = 0; i < nc; i++)
    g_hash_table_insert(fold_of, GUINT_TO_POINTER(shuf[i]),
                        GUINT_TO_POINTER(i < (guint)k ? 0 : 1));
  r->n_heldout_clocks = (guint)k;
  return TRUE;
}

/* Stage 3: one row per point with its out-of-box prediction and fold. */
static void add_rows(const GpuSpec *gpu, const FitOp *ops, guint n_ops,
                     FitMode mode, GHashTable *fold_of, FitReport *r)
{
  for (guint i = 0; i < n_ops; i++)
    for (guint j = 0; j < ops[i].n_points; j++) {
      const FitPoint *p = &ops[i].points[j];
      FitRow row = {0};
      row.op = i;
      row.sm_mhz = p->sm_mhz;
      row.mem_mhz = (guint)fit_eff_mem(gpu, p->mem_mhz);
      row.time_s = p->time_s;
      row.energy_j = p->energy_j;
      fit_model_predict(r->oob, i, p->sm_mhz, p->mem_mhz, &row.oob_time_s,
                        &row.oob_energy_j, NULL);
      if (mode == FIT_NONE) {
        row.heldout = TRUE;
        row.fit_time_s = row.oob_time_s;
        row.fit_energy_j = row.oob_energy_j;
      } else {
        row.fold = GPOINTER_TO_UINT(
            g_hash_table_lookup(fold_of, GUINT_TO_POINTER(p->sm_mhz)));
        row.heldout = r->folds > 0 || row.fold == 0;
        if (r->folds == 0)
          row.fold = 0;
      }
      g_array_append_val(r->rows, row);
    }
}

/* Stage 4: a model fitted without each fold (holdout: without fold 0)
 * predicts that fold's rows; then the model on every point. */
static gboolean fit_folds(const GpuSpec *gpu, const FitOp *ops, guint n_ops,
                          const FitOptions *opt, GHashTable *fold_of,
                          FitReport *r, GError **error)
{
  guint folds = r->folds;
  guint n_models = folds > 0 ? folds : 1;
  g_autofree double **w = g_new0(double *, n_ops);
  for (guint i = 0; i < n_ops; i++)
    w[i] = g_new(double, ops[i].n_points);
  gboolean ok = TRUE;
  for (guint f = 0; f < n_models && ok; f++) {
    for (guint i = 0; i < n_ops; i++)
      for (guint j = 0; j < ops[i].n_points; j++) {
        guint fo = GPOINTER_TO_UINT(g_hash_table_lookup(
            fold_of, GUINT_TO_POINTER(ops[i].points[j].sm_mhz)));
        w[i][j] = fo == f ? 0 : 1;
      }
    g_autoptr(FitModel) m =
        fit_model_fit(gpu, ops, n_ops, (const double *const *)w, opt->mode,
                      opt->power_limit_w, error);
    if (m == NULL) {
      ok = FALSE;
      break;
    }
    for (guint k = 0; k < r->rows->len; k++) {
      FitRow *row = &g_array_index(r->rows, FitRow, k);
      if (folds > 0 && row->fold != f)
        continue;
      fit_model_predict(m, row->op, row->sm_mhz, row->mem_mhz,
                        &row->fit_time_s, &row->fit_energy_j, NULL);
    }
  }
  for (guint i = 0; i < n_ops; i++)
    g_free(w[i]);
  if (!ok)
    return FALSE;
  r->fitted_all = fit_model_fit(gpu, ops, n_ops, NULL, opt->mode,
                                opt->power_limit_w, error);
  return r->fitted_all != NULL;
}

/* Error accumulators of the overall summary. */
typedef struct {
  ErrAcc o, f, oa;  /* out of the box and fitted on held-out points, out of
                       the box on all */
} AllAcc;

/* Stage 5a: the summary of op i (rows from *k on, which it advances);
 * adds its rows to `all` and its count-weighted energies to `sums` (by
 * clock pair). */
static void summarise_op(const FitOp *op, const FitReport *r, guint *k,
                         AllAcc *all, GHashTable *sums, FitSummary *sm)
{
  ErrAcc ao = {0}, af = {0}, aoa = {0};
  g_autofree Curve *c = g_new(Curve, op->n_points);
  for (guint j = 0; j < op->n_points; j++, (*k)++) {
    const FitRow *row = &g_array_index(r->rows, FitRow, *k);
    err_add(&aoa, row->oob_time_s, row->time_s, row->oob_energy_j,
            row->energy_j);
    err_add(&all->oa, row->oob_time_s, row->time_s, row->oob_energy_j,
            row->energy_j);
    if (row->heldout) {
      err_add(&ao, row->oob_time_s, row->time_s, row->oob_energy_j,
              row->energy_j);
      err_add(&af, row->fit_time_s, row->time_s, row->fit_energy_j,
              row->energy_j);
      err_add(&all->o, row->oob_time_s, row->time_s, row->oob_energy_j,
              row->energy_j);
      err_add(&all->f, row->fit_time_s, row->time_s, row->fit_energy_j,
              row->energy_j);
    }
    c[j] = (Curve){row->sm_mhz, row->mem_mhz, row->energy_j,
                   row->oob_energy_j, row->fit_energy_j};
    gint64 key = ((gint64)row->mem_mhz << 32) | row->sm_mhz;
    Curve *s = g_hash_table_lookup(sums, &key);
    if (s == NULL) {
      gint64 *kp = g_new(gint64, 1);
      *kp = key;
      s = g_new0(Curve, 1);
      s->sm = row->sm_mhz;
      s->mem = row->mem_mhz;
      g_hash_table_insert(sums, kp, s);
    }
    s->e += op->count * row->energy_j;
    s->eo += op->count * row->oob_energy_j;
    s->ef += op->count * row->fit_energy_j;
  }
  memset(sm, 0, sizeof *sm);
  sm->name = g_strdup(op->name);
  sm->oob = err_get(&ao);
  sm->fit = err_get(&af);
  sm->oob_all = err_get(&aoa);
  curve_summary(c, op->n_points, sm);
}

/* Stage 5b: the summed curve's clock pairs that every op has, in clock
 * order (hash iteration order is not deterministic). */
static GArray *common_curve(const GpuSpec *gpu, const FitOp *ops,
                            guint n_ops, GHashTable *sums)
{
  GArray *common = g_array_new(FALSE, FALSE, sizeof(Curve));
  GHashTableIter it;
  gpointer key, val;
  g_hash_table_iter_init(&it, sums);
  while (g_hash_table_iter_next(&it, &key, &val)) {
    const Curve *s = val;
    gboolean everywhere = TRUE;
    for (guint i = 0; i < n_ops && everywhere; i++) {
      gboolean has = FALSE;
      for (guint j = 0; j < ops[i].n_points && !has; j++)
        has = ops[i].points[j].sm_mhz == s->sm &&
              (guint)fit_eff_mem(gpu, ops[i].points[j].mem_mhz) == s->mem;
      everywhere = has;
    }
    if (everywhere)
      g_array_append_val(common, *s);
  }
  g_array_sort(common, cmp_curve);
  return common;
}

/* Stage 5: summaries per op, then overall. */
static void summarise(const GpuSpec *gpu, const FitOp *ops, guint n_ops,
                      FitReport *r)
{
  AllAcc all = {{0}, {0}, {0}};
  guint k = 0;
  g_autoptr(GHashTable) sums = g_hash_table_new_full(g_int64_hash, g_int64_equal,
                                                     g_free, g_free);
  for (guint i = 0; i < n_ops; i++) {
    FitSummary sm;
    summarise_op(&ops[i], r, &k, &all, sums, &sm);
    g_array_append_val(r->summary, sm);
  }
  g_autoptr(GArray) common = common_curve(gpu, ops, n_ops, sums);
  FitSummary ov = {0};
  ov.name = g_strdup("overall");
  ov.oob = err_get(&all.o);
  ov.fit = err_get(&all.f);
  ov.oob_all = err_get(&all.oa);
  curve_summary((const Curve *)common->data, common->len, &ov);
  g_array_append_val(r->summary, ov);
}

FitReport *fit_validate(const GpuSpec *gpu, const FitOp *ops, guint n_ops,
                        const FitOptions *opt, GError **error)
{
  g_return_val_if_fail(gpu != NULL && opt != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  if (!fit_check_input(gpu, ops, n_ops, error))
    return NULL;
  if ((guint)opt->mode > FIT_ALL) {
    g_set_error(error, FIT_ERROR, FIT_ERROR_INVALID, "unknown fit mode %d",
                (int)opt->mode);
    return NULL;
  }
  g_autoptr(GArray) clocks = distinct_clocks(ops, n_ops);
  g_autoptr(FitReport) r = g_new0(FitReport, 1);
  r->mode = opt->mode;
  r->n_clocks = clocks->len;
  r->rows = g_array_new(FALSE, TRUE, sizeof(FitRow));
  r->summary = g_array_new(FALSE, TRUE, sizeof(FitSummary));
  r->oob = fit_model_oob(gpu, ops, n_ops, opt->power_limit_w, error);
  if (r->oob == NULL)
    return NULL;
  g_autoptr(GHashTable) fold_of = g_hash_table_new(g_direct_hash, g_direct_equal);
  if (opt->mode != FIT_NONE &&
      !assign_folds(opt, clocks, fold_of, r, error))
    return NULL;
  add_rows(gpu, ops, n_ops, opt->mode, fold_of, r);
  if (opt->mode != FIT_NONE &&
      !fit_folds(gpu, ops, n_ops, opt, fold_of, r, error))
    return NULL;
  summarise(gpu, ops, n_ops, r);
  return g_steal_pointer(&r);
}

/* ---------------------------------------------------------------------- */
/* Bootstrap                                                               */

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Linear-interpolated quantile of sorted v[n]. */
static double quantile(const double *v, guint n, double q)
{
  if (n == 1)
    return v[0];
  double pos = q * (n - 1);
  guint i = (guint)floor(pos);
  if (i + 1 >= n)
    return v[n - 1];
  double w = pos - i;
  return v[i] * (1 - w) + v[i + 1] * w;
}

gboolean fit_bootstrap(const GpuSpec *gpu, const FitOp *ops, guint n_ops,
                       const FitBootstrapOptions *opt, guint n_values,
                       FitWhatIf fn, gpointer data, FitInterval *out,
                       GError **error)
{
  g_return_val_if_fail(gpu != NULL && opt != NULL, FALSE);
  g_return_val_if_fail(fn != NULL && out != NULL, FALSE);
  g_return_val_if_fail(n_values >= 1, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
  guint samples = opt->samples;
  double level = opt->level;
  if (samples < 2 || !(level > 0 && level < 1)) {
    g_set_error(error, FIT_ERROR, FIT_ERROR_INVALID,
                "bootstrap: samples (%u) must be >= 2 and level (%g) in "
                "(0, 1)",
                samples, level);
    return FALSE;
  }
  memset(out, 0, n_values * sizeof *out);
  g_autoptr(FitModel) full =
      fit_model_fit(gpu, ops, n_ops, NULL, opt->mode, opt->power_limit_w,
                    error);
  if (full == NULL)
    return FALSE;
  g_autofree double *est = g_new(double, n_values);
  if (!fn(full, data, est, error))
    return FALSE;
  /* vals[v * samples + b]: value v of resample b. */
  g_autofree double *vals = g_new(double, (gsize)n_values * samples);
  g_autofree double *one = g_new(double, n_values);
  g_autofree double **w = g_new0(double *, n_ops);
  for (guint i = 0; i < n_ops; i++)
    w[i] = g_new0(double, ops[i].n_points);
  gboolean ok = TRUE;
  for (guint b = 0; b < samples && ok; b++) {
    SimPcg rng;
    sim_pcg_for_entity(&rng, opt->seed, SIM_PCG_HOLDOUT, 1 + (guint64)b);
    for (guint i = 0; i < n_ops; i++) {
      guint np = ops[i].n_points;
      /* Redraw until the op keeps 2 distinct SM clocks (when it has). */
      for (int tries = 0; tries < 100; tries++) {
        memset(w[i], 0, np * sizeof(double));
        for (guint k = 0; k < np; k++)
          w[i][sim_pcg_bounded(&rng, np)] += 1;
        guint first = G_MAXUINT;
        gboolean two = FALSE;
        for (guint j = 0; j < np && !two; j++) {
          if (!(w[i][j] > 0))
            continue;
          if (first == G_MAXUINT)
            first = ops[i].points[j].sm_mhz;
          else if (ops[i].points[j].sm_mhz != first)
            two = TRUE;
        }
        if (two || np < 2)
          break;
      }
    }
    g_autoptr(FitModel) m =
        fit_model_fit(gpu, ops, n_ops, (const double *const *)w, opt->mode,
                      opt->power_limit_w, error);
    if (m == NULL || !fn(m, data, one, error)) {
      ok = FALSE;
      break;
    }
    for (guint v = 0; v < n_values; v++)
      vals[(gsize)v * samples + b] = one[v];
  }
  for (guint i = 0; i < n_ops; i++)
    g_free(w[i]);
  if (!ok)
    return FALSE;
  for (guint v = 0; v < n_values; v++) {
    double *x = vals + (gsize)v * samples;
    FitInterval *o = &out[v];
    double sum = 0, sq = 0;
    for (guint b = 0; b < samples; b++)
      sum += x[b];
    o->estimate = est[v];
    o->mean = sum / samples;
    for (guint b = 0; b < samples; b++)
      sq += (x[b] - o->mean) * (x[b] - o->mean);
    o->sd = sqrt(sq / (samples - 1));
    qsort(x, samples, sizeof(double), cmp_double);
    o->lo = quantile(x, samples, (1 - level) / 2);
    o->hi = quantile(x, samples, (1 + level) / 2);
    o->samples = samples;
  }
  return TRUE;
}

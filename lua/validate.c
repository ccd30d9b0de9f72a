/* lua/validate.c -- measured profiles against the model: `joulesim
 * validate`, js.profile, js.validate, js.validate_interval and
 * js.validate_run.
 *
 * The work is done by traces/profile.c (loading) and models/fit.c (fitting
 * and held-out prediction); this file converts a Profile into FitOp
 * records, formats the readable report, writes the HDF5 tables and saves
 * fitted catalogue entries (models/gpufile.c).  See docs/validation.md.
 *
 * HDF5 tables written by --out / out=:
 *   validate_points   one row per measured point: measured, out-of-box and
 *                     fitted time/energy, relative residuals, held out or
 *                     not, fold
 *   validate_summary  one row per op and one "overall": MAPE / max / bias
 *                     (in %) of both models on the held-out points, the
 *                     minimum-energy clocks, savings and regrets
 *   validate_model    the fitted model: one row per op (time coefficients,
 *                     saturation clock, dynamic and DRAM energy) and one
 *                     row "gpu" with the GPU-level power parameters
 * Each table is replaced when it exists (other tables of the file stay).
 */
#include "cli/commands.h"
#include "lua/luautil.h"
#include "io/results.h"
#include "models/fit.h"
#include "models/gpufile.h"
#include "traces/profile.h"

#include <errno.h>
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROFILE_MT "joulesim.Profile"
#define FITMODEL_MT "joulesim.FitModel"
#define REPORTBOX_MT "joulesim.FitReportBox"

#define EXIT_USER 1
#define EXIT_USAGE 2

/* ---------------------------------------------------------------------- */
/* Profile -> fit input                                                    */

/* FitOp records for a profile; points are copied (the profile may go).
 * Exported through lua/luautil.h (js.simulate's uncertainty). */
typedef JslFitInput FitInput;

void jsl_fit_input_clear(FitInput *in)
{
  for (guint i = 0; i < in->n; i++) {
    g_free(in->points[i]);
    g_free((gpointer)in->ops[i].kernels);
  }
  g_free(in->points);
  g_free(in->ops);
  memset(in, 0, sizeof *in);
}

/* Op names stay borrowed from p. */
void jsl_fit_input_from_profile(const Profile *p, FitInput *in)
{
  in->n = p->ops->len;
  in->ops = g_new0(FitOp, in->n);
  in->points = g_new0(FitPoint *, in->n);
  for (guint i = 0; i < in->n; i++) {
    const ProfileOp *op = g_ptr_array_index(p->ops, i);
    FitOp *f = &in->ops[i];
    f->name = op->name;
    f->klass = op->klass;
    f->count = op->count;
    FitKernel mix[PROFILE_OP_KERNELS_MAX];
    f->n_kernels = profile_op_kernels(op, mix);
    f->kernels = g_memdup2(mix, f->n_kernels * sizeof *mix);
    in->points[i] = g_new(FitPoint, op->points->len);
    for (guint j = 0; j < op->points->len; j++) {
      const ProfilePoint *pp = &g_array_index(op->points, ProfilePoint, j);
      in->points[i][j] =
          (FitPoint){pp->sm_mhz, pp->mem_mhz, pp->time_s, pp->energy_j};
    }
    f->points = in->points[i];
    f->n_points = op->points->len;
  }
}

/* ---------------------------------------------------------------------- */
/* The validation run shared by the CLI and js.validate                    */

typedef struct {
  const char *gpu;          /* catalogue name */
  FitMode mode;
  double holdout;
  guint folds;
  guint64 seed;
  double power_limit_w;     /* <= 0: the GPU's default */
  const char *out;          /* HDF5 path or NULL */
  const char *save_gpu;     /* name of the fitted entry or NULL */
  gboolean force;           /* --force: an existing `out` that is not a
                               results file is replaced, not refused */
} ValidateCfg;

static const char *format_name(ProfileFormat f)
{
  return f == PROFILE_PERSEUS ? "perseus" : "kernel";
}

static double pct(double x)
{
  return 100 * x;
}

/* The readable report. */
static void report_text(const Profile *p, const GpuSpec *g,
                        const ValidateCfg *cfg, const FitReport *r,
                        gboolean points, GString *o)
{
  const FitModel *oob = r->oob;
  guint lo = G_MAXUINT, hi = 0;
  for (guint k = 0; k < r->rows->len; k++) {
    const FitRow *row = &g_array_index(r->rows, FitRow, k);
    lo = MIN(lo, row->sm_mhz);
    hi = MAX(hi, row->sm_mhz);
  }
  g_string_append_printf(
      o, "profile %s (%s form): %u ops, %u SM clocks %u-%u MHz\n", p->path,
      format_name(p->format), p->ops->len, r->n_clocks, lo, hi);
  g_string_append_printf(o, "GPU %s, power limit %.0f W; fit: %s", g->name,
                         oob->power_limit_w, fit_mode_name(r->mode));
  if (r->mode == FIT_NONE)
    g_string_append(o, " (out of the box only, every point)\n");
  else if (r->folds > 0)
    g_string_append_printf(o, ", %u-fold over SM clocks (seed %" G_GUINT64_FORMAT
                              ")\n",
                           r->folds, cfg->seed);
  else {
    g_string_append_printf(o, ", %u of %u clocks held out (seed %" G_GUINT64_FORMAT
                              "):",
                           r->n_heldout_clocks, r->n_clocks, cfg->seed);
    g_autoptr(GHashTable) seen = g_hash_table_new(g_direct_hash, g_direct_equal);
    g_autoptr(GArray) hc = g_array_new(FALSE, FALSE, sizeof(guint));
    for (guint k = 0; k < r->rows->len; k++) {
      const FitRow *row = &g_array_index(r->rows, FitRow, k);
      if (row->heldout && g_hash_table_add(seen, GUINT_TO_POINTER(row->sm_mhz)))
        g_array_append_val(hc, row->sm_mhz);
    }
    for (guint i = 0; i < hc->len; i++)
      for (guint j = i + 1; j < hc->len; j++)
        if (g_array_index(hc, guint, j) < g_array_index(hc, guint, i)) {
          guint t = g_array_index(hc, guint, i);
          g_array_index(hc, guint, i) = g_array_index(hc, guint, j);
          g_array_index(hc, guint, j) = t;
        }
    for (guint i = 0; i < hc->len; i++)
      g_string_append_printf(o, " %u", g_array_index(hc, guint, i));
    g_string_append(o, "\n");
  }

  gboolean fitted = r->mode != FIT_NONE;
  g_string_append(o, "\nErrors on held-out points (%, pred/meas - 1)\n");
  /* Columns: name (22) pts (6), then per model 36 characters. */
  int n_models = fitted ? 2 : 1;
  static const char *const titles[2] = {"------- out of the box -------",
                                        "----------- fitted -----------"};
  g_string_append_printf(o, "%-28s", "");
  for (int m = 0; m < n_models; m++)
    g_string_append_printf(o, "%s %-35s", m == 1 ? "  " : "", titles[m]);
  g_string_append_printf(o, "\n%-28s", "");
  for (int m = 0; m < n_models; m++)
    g_string_append_printf(o, "%s %-17s %-17s", m == 1 ? "  " : "", "time",
                           "energy");
  g_string_append_printf(o, "\n%-22s %5s", "op", "pts");
  for (int m = 0; m < n_models; m++)
    g_string_append_printf(o, "%s %5s %5s %5s %5s %5s %5s", m == 1 ? "  " : "",
                           "MAPE", "max", "bias", "MAPE", "max", "bias");
  g_string_append(o, "\n");
  for (guint i = 0; i < r->summary->len; i++) {
    const FitSummary *s = &g_array_index(r->summary, FitSummary, i);
    g_string_append_printf(o, "%-22.22s %5u", s->name, s->fit.n);
    const FitErr *e[2] = {&s->oob, &s->fit};
    for (int m = 0; m < (fitted ? 2 : 1); m++) {
      g_string_append_printf(o, "%s %5.2f %5.2f %+5.2f %5.2f %5.2f %+5.2f",
                             m == 1 ? "  " : "", pct(e[m]->time_mape),
                             pct(e[m]->time_max), pct(e[m]->time_bias),
                             pct(e[m]->energy_mape), pct(e[m]->energy_max),
                             pct(e[m]->energy_bias));
    }
    g_string_append(o, "\n");
  }

  g_string_append(o, "\nMinimum-energy SM clock (MHz), energy saving there "
                     "vs the top clock (%),\nregret = measured energy at the "
                     "predicted minimum over the measured minimum - 1 (%)\n");
  g_string_append_printf(o, "%-22s %5s %5s %5s  %6s %6s %6s  %6s %6s\n", "op",
                         "meas", "oob", "fit", "meas", "oob", "fit",
                         "r.oob", "r.fit");
  for (guint i = 0; i < r->summary->len; i++) {
    const FitSummary *s = &g_array_index(r->summary, FitSummary, i);
    if (isnan(s->saving_meas)) {
      g_string_append_printf(o, "%-22.22s (no clock pair common to every op)\n",
                             s->name);
      continue;
    }
    g_string_append_printf(o,
                           "%-22.22s %5u %5u %5u  %6.2f %6.2f %6.2f  %6.2f "
                           "%6.2f\n",
                           s->name, s->min_sm_meas, s->min_sm_oob,
                           s->min_sm_fit, pct(s->saving_meas),
                           pct(s->saving_oob), pct(s->saving_fit),
                           pct(s->regret_oob), pct(s->regret_fit));
  }
  if (r->fitted_all != NULL) {
    const FitModel *m = r->fitted_all;
    g_string_append_printf(o, "\nModel fitted on every point (%s):\n",
                           fit_mode_name(m->mode));
    if (m->mode == FIT_POWER || m->mode == FIT_ALL)
      g_string_append_printf(
          o,
          "  P_const %.1f W (catalogue %.1f), P_leak %.1f W (%.1f), v_min/v_max "
          "%.3f (%.3f), f_knee %.0f MHz (%.0f), P_dyn x %.3f\n",
          m->p_const_w, g->p_const_w.v, m->p_leak_w, g->p_leak_w.v,
          m->v_ratio, g->v_min.v / g->v_max.v, m->f_knee_mhz,
          g->f_knee_mhz.v, m->dyn_scale);
    g_string_append_printf(o,
                           "  training RMS error: time %.2f%%, energy %.2f%%\n",
                           pct(m->rms_rel_time), pct(m->rms_rel_energy));
    g_string_append_printf(o, "  %-22s %9s %6s %6s %6s %6s\n", "op", "t0 (s)",
                           "a_c", "a_m", "a_o", "sat");
    for (guint i = 0; i < m->n_ops; i++) {
      const FitOpModel *om = &m->ops[i];
      g_string_append_printf(o, "  %-22.22s %9.5f %6.3f %6.3f %6.3f ",
                             ((const ProfileOp *)g_ptr_array_index(p->ops, i))
                                 ->name,
                             om->t0_s, om->a_c, om->a_m, om->a_o);
      if (om->sat_mhz > 0)
        g_string_append_printf(o, "%6.0f\n", om->sat_mhz);
      else
        g_string_append_printf(o, "%6s\n", "-");
    }
  }
  if (points) {
    g_string_append_printf(o, "\nPoints (H = held out)\n%-22s %5s %5s  %10s "
                              "%7s %7s  %10s %7s %7s\n",
                           "op", "sm", "mem", "time (s)", "oob%", "fit%",
                           "energy (J)", "oob%", "fit%");
    for (guint k = 0; k < r->rows->len; k++) {
      const FitRow *w = &g_array_index(r->rows, FitRow, k);
      g_string_append_printf(
          o, "%-22.22s %5u %5u%c %10.5f %+7.2f %+7.2f  %10.4f %+7.2f %+7.2f\n",
          ((const ProfileOp *)g_ptr_array_index(p->ops, w->op))->name,
          w->sm_mhz, w->mem_mhz, w->heldout ? 'H' : ' ', w->time_s,
          pct(w->oob_time_s / w->time_s - 1),
          pct(w->fit_time_s / w->time_s - 1), w->energy_j,
          pct(w->oob_energy_j / w->energy_j - 1),
          pct(w->fit_energy_j / w->energy_j - 1));
    }
  }
}

/* Row builder for res_table_append. */
typedef struct {
  ResValue v[48];
  guint n;
} Row;

static void row_s(Row *r, const char *name, const char *s)
{
  g_assert(r->n < G_N_ELEMENTS(r->v));
  r->v[r->n++] = (ResValue){.name = name, .type = RES_STRING, .s = s};
}
static void row_i(Row *r, const char *name, gint64 i)
{
  g_assert(r->n < G_N_ELEMENTS(r->v));
  r->v[r->n++] = (ResValue){.name = name, .type = RES_INT, .i = i};
}
static void row_b(Row *r, const char *name, gboolean b)
{
  g_assert(r->n < G_N_ELEMENTS(r->v));
  r->v[r->n++] = (ResValue){.name = name, .type = RES_BOOL, .i = b ? 1 : 0};
}
static void row_f(Row *r, const char *name, double f)
{
  g_assert(r->n < G_N_ELEMENTS(r->v));
  r->v[r->n++] = (ResValue){.name = name, .type = RES_FLOAT, .f = f};
}

static void row_err(Row *r, const char *const names[6], const FitErr *e)
{
  row_f(r, names[0], pct(e->time_mape));
  row_f(r, names[1], pct(e->time_max));
  row_f(r, names[2], pct(e->time_bias));
  row_f(r, names[3], pct(e->energy_mape));
  row_f(r, names[4], pct(e->energy_max));
  row_f(r, names[5], pct(e->energy_bias));
}

static gboolean write_tables(const Profile *p, const GpuSpec *g,
                             const ValidateCfg *cfg, const FitReport *r,
                             GError **error)
{
  ResMeta meta = {JOULESIM_VERSION, p->path, NULL, cfg->seed};
  const char *mode = fit_mode_name(r->mode);
  /* Points. */
  {
    g_autoptr(ResTable) t = res_table_open(cfg->out, "validate_points",
                                           RES_MODE_REPLACE, &meta, error);
    if (t == NULL)
      return FALSE;
    for (guint k = 0; k < r->rows->len; k++) {
      const FitRow *w = &g_array_index(r->rows, FitRow, k);
      const ProfileOp *op = g_ptr_array_index(p->ops, w->op);
      Row row = {0};
      row_s(&row, "profile", p->path);
      row_s(&row, "gpu", g->name);
      row_s(&row, "fit", mode);
      row_s(&row, "op", op->name);
      row_i(&row, "stage", op->stage);
      row_s(&row, "instruction", op->instruction != NULL ? op->instruction : "");
      row_i(&row, "sm_mhz", w->sm_mhz);
      row_i(&row, "mem_mhz", w->mem_mhz);
      row_b(&row, "heldout", w->heldout);
      row_i(&row, "fold", w->fold);
      row_f(&row, "time_s", w->time_s);
      row_f(&row, "energy_j", w->energy_j);
      row_f(&row, "power_w", w->energy_j / w->time_s);
      row_f(&row, "oob_time_s", w->oob_time_s);
      row_f(&row, "oob_energy_j", w->oob_energy_j);
      row_f(&row, "fit_time_s", w->fit_time_s);
      row_f(&row, "fit_energy_j", w->fit_energy_j);
      row_f(&row, "oob_time_err_pct", pct(w->oob_time_s / w->time_s - 1));
      row_f(&row, "oob_energy_err_pct",
            pct(w->oob_energy_j / w->energy_j - 1));
      row_f(&row, "fit_time_err_pct", pct(w->fit_time_s / w->time_s - 1));
      row_f(&row, "fit_energy_err_pct",
            pct(w->fit_energy_j / w->energy_j - 1));
      if (!res_table_append(t, row.v, row.n, error))
        return FALSE;
    }
    if (!res_table_close(g_steal_pointer(&t), error))
      return FALSE;
  }
  /* Summary. */
  {
    g_autoptr(ResTable) t = res_table_open(cfg->out, "validate_summary",
                                           RES_MODE_REPLACE, &meta, error);
    if (t == NULL)
      return FALSE;
    static const char *const oob_names[6] = {
      "oob_time_mape_pct", "oob_time_max_pct", "oob_time_bias_pct",
      "oob_energy_mape_pct", "oob_energy_max_pct", "oob_energy_bias_pct"};
    static const char *const fit_names[6] = {
      "fit_time_mape_pct", "fit_time_max_pct", "fit_time_bias_pct",
      "fit_energy_mape_pct", "fit_energy_max_pct", "fit_energy_bias_pct"};
    static const char *const all_names[6] = {
      "oob_all_time_mape_pct", "oob_all_time_max_pct",
      "oob_all_time_bias_pct", "oob_all_energy_mape_pct",
      "oob_all_energy_max_pct", "oob_all_energy_bias_pct"};
    for (guint i = 0; i < r->summary->len; i++) {
      const FitSummary *s = &g_array_index(r->summary, FitSummary, i);
      Row row = {0};
      row_s(&row, "profile", p->path);
      row_s(&row, "gpu", g->name);
      row_s(&row, "fit", mode);
      row_f(&row, "holdout", r->folds > 0 ? 0 : cfg->holdout);
      row_i(&row, "folds", r->folds);
      row_i(&row, "seed", (gint64)cfg->seed);
      row_f(&row, "power_limit_w", r->oob->power_limit_w);
      row_s(&row, "op", s->name);
      row_i(&row, "n_heldout", s->fit.n);
      row_err(&row, oob_names, &s->oob);
      row_err(&row, fit_names, &s->fit);
      row_err(&row, all_names, &s->oob_all);
      row_i(&row, "min_sm_meas_mhz", s->min_sm_meas);
      row_i(&row, "min_sm_oob_mhz", s->min_sm_oob);
      row_i(&row, "min_sm_fit_mhz", s->min_sm_fit);
      row_f(&row, "saving_meas_pct", pct(s->saving_meas));
      row_f(&row, "saving_oob_pct", pct(s->saving_oob));
      row_f(&row, "saving_fit_pct", pct(s->saving_fit));
      row_f(&row, "regret_oob_pct", pct(s->regret_oob));
      row_f(&row, "regret_fit_pct", pct(s->regret_fit));
      if (!res_table_append(t, row.v, row.n, error))
        return FALSE;
    }
    if (!res_table_close(g_steal_pointer(&t), error))
      return FALSE;
  }
  /* Model. */
  const FitModel *m = r->fitted_all != NULL ? r->fitted_all : r->oob;
  {
    g_autoptr(ResTable) t = res_table_open(cfg->out, "validate_model",
                                           RES_MODE_REPLACE, &meta, error);
    if (t == NULL)
      return FALSE;
    for (guint i = 0; i <= m->n_ops; i++) {
      Row row = {0};
      gboolean gpu_row = i == m->n_ops;
      const FitOpModel *om = gpu_row ? NULL : &m->ops[i];
      row_s(&row, "fit", fit_mode_name(m->mode));
      row_s(&row, "op",
            gpu_row ? "gpu"
                    : ((const ProfileOp *)g_ptr_array_index(p->ops, i))->name);
      row_f(&row, "t0_s", gpu_row ? NAN : om->t0_s);
      row_f(&row, "a_c", gpu_row ? NAN : om->a_c);
      row_f(&row, "a_m", gpu_row ? NAN : om->a_m);
      row_f(&row, "a_o", gpu_row ? NAN : om->a_o);
      row_f(&row, "sat_mhz", gpu_row ? NAN : om->sat_mhz);
      row_f(&row, "dyn_j", gpu_row ? NAN : om->dyn_j);
      row_f(&row, "mem_j", gpu_row ? NAN : om->mem_j);
      row_f(&row, "p_const_w", gpu_row ? m->p_const_w : NAN);
      row_f(&row, "p_leak_w", gpu_row ? m->p_leak_w : NAN);
      row_f(&row, "v_ratio", gpu_row ? m->v_ratio : NAN);
      row_f(&row, "f_knee_mhz", gpu_row ? m->f_knee_mhz : NAN);
      row_f(&row, "dyn_scale", gpu_row ? m->dyn_scale : NAN);
      row_f(&row, "rms_time_pct", gpu_row ? pct(m->rms_rel_time) : NAN);
      row_f(&row, "rms_energy_pct", gpu_row ? pct(m->rms_rel_energy) : NAN);
      if (!res_table_append(t, row.v, row.n, error))
        return FALSE;
    }
    if (!res_table_close(g_steal_pointer(&t), error))
      return FALSE;
  }
  return TRUE;
}

/* The three tables go into a copy of the target (or a new file) under a
 * temporary name, renamed into place only when all are written: an error
 * part-way leaves the target as it was. */
static gboolean write_hdf5(const Profile *p, const GpuSpec *g,
                           const ValidateCfg *cfg, const FitReport *r,
                           GError **error)
{
  g_autofree char *tmp = g_strdup_printf("%s.tmp-%d", cfg->out, (int)getpid());
  if (g_file_test(cfg->out, G_FILE_TEST_EXISTS) &&
      !g_file_test(cfg->out, G_FILE_TEST_IS_REGULAR)) {
    g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_ISDIR,
                "%s: cannot open results file: not a regular file", cfg->out);
    return FALSE;
  }
  g_unlink(tmp);
  /* Tables are added to an existing results file; anything else is
   * refused by the callers' js_output_check, or (--force) replaced. */
  if (g_file_test(cfg->out, G_FILE_TEST_EXISTS) &&
      !(cfg->force && !res_file_probe(cfg->out))) {
    g_autoptr(GFile) src = g_file_new_for_path(cfg->out);
    g_autoptr(GFile) dst = g_file_new_for_path(tmp);
    GError *err = NULL;
    if (!g_file_copy(src, dst, G_FILE_COPY_OVERWRITE, NULL, NULL, NULL,
                     &err)) {
      g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_FAILED,
                  "%s: cannot copy it to update it: %s", cfg->out,
                  err->message);
      g_error_free(err);
      g_unlink(tmp);
      return FALSE;
    }
  }
  ValidateCfg c = *cfg;
  c.out = tmp;
  if (!write_tables(p, g, &c, r, error)) {
    g_unlink(tmp);
    return FALSE;
  }
  if (g_rename(tmp, cfg->out) != 0) {
    int e = errno;
    g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(e),
                "%s: cannot replace it: %s", cfg->out, g_strerror(e));
    g_unlink(tmp);
    return FALSE;
  }
  return TRUE;
}

/* Runs the validation of p on the catalogue's cfg->gpu.  Returns the
 * report (caller frees) with *gpu_out borrowed from cat. */
static FitReport *run_validation(const GpuCatalogue *cat, const Profile *p,
                                 const ValidateCfg *cfg,
                                 const GpuSpec **gpu_out, GError **error)
{
  const GpuSpec *g = gpu_catalogue_lookup(cat, cfg->gpu, error);
  if (g == NULL)
    return NULL;
  FitInput in = {0};
  jsl_fit_input_from_profile(p, &in);
  FitOptions opt = {cfg->mode, cfg->holdout, cfg->folds, cfg->seed,
                    cfg->power_limit_w};
  GError *err = NULL;
  FitReport *r = fit_validate(g, in.ops, in.n, &opt, &err);
  jsl_fit_input_clear(&in);
  if (r == NULL) {
    g_set_error(error, err->domain, err->code, "%s: %s", p->path,
                err->message);
    g_error_free(err);
    return NULL;
  }
  *gpu_out = g;
  return r;
}

/* The fitted entry for --save-gpu / save_gpu=. */
static GpuSpec *fitted_spec(const FitReport *r, const Profile *p,
                            const char *name, GError **error)
{
  if (r->fitted_all == NULL) {
    g_set_error(error, FIT_ERROR, FIT_ERROR_INVALID,
                "save_gpu '%s': nothing was fitted (fit = none)", name);
    return NULL;
  }
  g_autofree char *base = g_path_get_basename(p->path);
  g_autofree char *src = g_strdup_printf(
      "fit (%s) to %s by joulesim validate", fit_mode_name(r->mode), base);
  GpuSpec *s = fit_model_to_gpu(r->fitted_all, name, src);
  if (!gpu_spec_validate(s, error)) {
    gpu_spec_free(s);
    return NULL;
  }
  return s;
}

/* ---------------------------------------------------------------------- */
/* Command line                                                            */

static const char usage_validate[] =
  "usage: joulesim validate PROFILE.csv --gpu NAME [options]\n"
  "       joulesim validate --nvml SAMPLES.csv WINDOWS.csv --gpu NAME "
  "[options]\n"
  "\n"
  "Compares a measured time/energy profile with the model: out of the box\n"
  "(the catalogue entry, anchored at the top clock's measured time) and\n"
  "fitted on a training subset of the clocks, predicting the others.\n"
  "PROFILE.csv: `stage,instruction,frequency,time,energy` (Perseus/Zeus) or\n"
  "`kernel,sm_mhz,mem_mhz,time_s,energy_j[,count,class]`.  With --nvml,\n"
  "an nvidia-smi power/clock sample series and `kernel,start,end` windows.\n"
  "\n"
  "  --gpu NAME          catalogue GPU to compare with (joulesim gpus)\n"
  "  --fit MODE          none | time | power | all (default all)\n"
  "  --holdout F         fraction of the SM clocks held out (default 0.25)\n"
  "  --folds K           K-fold over the SM clocks instead of --holdout\n"
  "  --seed N            PCG seed choosing the held-out clocks (default 1)\n"
  "  --power-limit W     the card's power limit during the measurement\n"
  "                      (default: the GPU's default limit)\n"
  "  --points            also print every point\n"
  "  --out FILE.h5       write validate_points, validate_summary and\n"
  "                      validate_model tables\n"
  "  --save-gpu NAME     save the power model fitted on every point as\n"
  "                      catalogue entry NAME, in NAME.gpu under --gpu-dir\n"
  "  --gpu-dir DIR       where --save-gpu writes (default: the first\n"
  "                      directory of $JOULESIM_GPU_PATH, else .)\n"
  "  --force             replace an existing --out or NAME.gpu that is not\n"
  "                      a joulesim file of that kind (refused otherwise)\n"
  "\n"
  "Entries in the directories of JOULESIM_GPU_PATH (colon-separated) are\n"
  "part of the catalogue.  See docs/validation.md.\n";

static int usage_error(const char *fmt, const char *arg)
{
  fprintf(stderr, "joulesim validate: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n(see joulesim validate --help)\n");
  return EXIT_USAGE;
}

static gboolean parse_double_arg(const char *s, double *out)
{
  char *end = NULL;
  if (s == NULL || *s == '\0')
    return FALSE;
  double v = g_ascii_strtod(s, &end);
  if (*end != '\0' || !isfinite(v))
    return FALSE;
  *out = v;
  return TRUE;
}

static gboolean parse_uint_arg(const char *s, guint64 *out)
{
  char *end = NULL;
  if (s == NULL || *s == '\0' || *s == '-')
    return FALSE;
  guint64 v = g_ascii_strtoull(s, &end, 10);
  if (*end != '\0')
    return FALSE;
  *out = v;
  return TRUE;
}

int js_cmd_validate(int argc, char **argv)
{
  ValidateCfg cfg = {NULL, FIT_ALL, 0.25, 0, 1, 0, NULL, NULL, FALSE};
  const char *profile_path = NULL, *nvml = NULL, *gpu_dir = NULL;
  gboolean points = FALSE;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(usage_validate, stdout);
      return 0;
    }
    if (a[0] != '-' || a[1] == '\0') {
      if (profile_path != NULL)
        return usage_error("unexpected argument '%s'", a);
      profile_path = a;
      continue;
    }
    if (strcmp(a, "--points") == 0) {
      points = TRUE;
      continue;
    }
    if (strcmp(a, "--force") == 0) {
      cfg.force = TRUE;
      continue;
    }
    if (v == NULL)
      return usage_error("option %s needs a value", a);
    i++;
    if (strcmp(a, "--gpu") == 0) {
      cfg.gpu = v;
    } else if (strcmp(a, "--fit") == 0) {
      int m = fit_mode_from_name(v);
      if (m < 0)
        return usage_error("--fit must be none, time, power or all (got "
                           "'%s')",
                           v);
      cfg.mode = (FitMode)m;
    } else if (strcmp(a, "--holdout") == 0) {
      if (!parse_double_arg(v, &cfg.holdout) || !(cfg.holdout > 0) ||
          !(cfg.holdout < 1))
        return usage_error("--holdout must be a fraction in (0, 1) (got "
                           "'%s')",
                           v);
    } else if (strcmp(a, "--folds") == 0) {
      guint64 k;
      if (!parse_uint_arg(v, &k) || k < 2 || k > 1000)
        return usage_error("--folds must be an integer in 2..1000 (got '%s')",
                           v);
      cfg.folds = (guint)k;
    } else if (strcmp(a, "--seed") == 0) {
      if (!parse_uint_arg(v, &cfg.seed))
        return usage_error("--seed must be a non-negative integer (got '%s')",
                           v);
    } else if (strcmp(a, "--power-limit") == 0) {
      if (!parse_double_arg(v, &cfg.power_limit_w) ||
          !(cfg.power_limit_w > 0) || cfg.power_limit_w > 1e5)
        return usage_error("--power-limit must be watts > 0 (got '%s')", v);
    } else if (strcmp(a, "--out") == 0) {
      cfg.out = v;
    } else if (strcmp(a, "--save-gpu") == 0) {
      cfg.save_gpu = v;
    } else if (strcmp(a, "--gpu-dir") == 0) {
      gpu_dir = v;
    } else if (strcmp(a, "--nvml") == 0) {
      nvml = v;
    } else {
      return usage_error("unknown option '%s'", a);
    }
  }
  if (profile_path == NULL)
    return usage_error("%s", nvml != NULL ? "missing WINDOWS.csv after "
                                            "--nvml SAMPLES.csv"
                                          : "missing PROFILE.csv");
  if (cfg.gpu == NULL)
    return usage_error("%s", "missing --gpu NAME (see joulesim gpus)");

  GError *err = NULL;
  /* An output that would replace someone else's file is refused before
   * any work (run/confine.h). */
  if (cfg.out != NULL && !cfg.force &&
      !js_output_check(cfg.out, JS_FILE_RESULTS, "--force replaces it",
                       &err)) {
    fprintf(stderr, "joulesim validate: --out: %s\n", err->message);
    g_error_free(err);
    return EXIT_USER;
  }
  g_autoptr(GpuCatalogue) cat = gpu_catalogue_new();
  /* The GPU first: a misspelt name is refused before a long load, and the
   * message names the option. */
  if (gpu_catalogue_lookup(cat, cfg.gpu, &err) == NULL) {
    fprintf(stderr, "joulesim validate: --gpu: %s\n", err->message);
    g_error_free(err);
    return EXIT_USER;
  }
  g_autoptr(Profile) p = nvml != NULL
                             ? profile_load_nvml(nvml, profile_path, &err)
                             : profile_load(profile_path, &err);
  if (p == NULL) {
    fprintf(stderr, "joulesim validate: %s\n", err->message);
    g_error_free(err);
    return EXIT_USER;
  }
  const GpuSpec *g = NULL;
  g_autoptr(FitReport) r = run_validation(cat, p, &cfg, &g, &err);
  if (r == NULL) {
    fprintf(stderr, "joulesim validate: %s\n", err->message);
    g_error_free(err);
    return EXIT_USER;
  }
  g_autoptr(GString) text = g_string_new(NULL);
  report_text(p, g, &cfg, r, points, text);
  fputs(text->str, stdout);
  if (cfg.out != NULL && !write_hdf5(p, g, &cfg, r, &err)) {
    fprintf(stderr, "joulesim validate: %s\n", err->message);
    g_error_free(err);
    return EXIT_USER;
  }
  if (cfg.save_gpu != NULL) {
    g_autoptr(GpuSpec) s = fitted_spec(r, p, cfg.save_gpu, &err);
    g_autofree char *dir = NULL;
    if (gpu_dir != NULL) {
      dir = g_strdup(gpu_dir);
    } else {
      const char *env = g_getenv(GPU_PATH_ENV);
      g_auto(GStrv) dirs = env != NULL ? g_strsplit(env, ":", -1) : NULL;
      for (guint i = 0; dirs != NULL && dirs[i] != NULL && dir == NULL; i++)
        if (dirs[i][0] != '\0')
          dir = g_strdup(dirs[i]);
      if (dir == NULL)
        dir = g_strdup(".");
    }
    g_autofree char *file = g_strconcat(cfg.save_gpu, GPU_FILE_EXT, NULL);
    g_autofree char *path = g_build_filename(dir, file, NULL);
    if (s != NULL && !cfg.force &&
        !js_output_check(path, JS_FILE_GPU, "--force replaces it", &err))
      g_clear_pointer(&s, gpu_spec_free);
    if (s == NULL || !gpu_spec_save_keyfile(s, path, &err)) {
      fprintf(stderr, "joulesim validate: %s\n", err->message);
      g_error_free(err);
      return EXIT_USER;
    }
    printf("\nsaved GPU '%s' to %s (use it with JOULESIM_GPU_PATH=%s)\n",
           cfg.save_gpu, path, dir);
  }
  return 0;
}

/* ---------------------------------------------------------------------- */
/* Lua: profiles                                                           */

typedef struct {
  Profile *p;
} LProfile;

static int reportbox_gc(lua_State *L)
{
  FitReport **box = luaL_checkudata(L, 1, REPORTBOX_MT);
  g_clear_pointer(box, fit_report_free);
  return 0;
}

static int profile_gc(lua_State *L)
{
  LProfile *u = luaL_checkudata(L, 1, PROFILE_MT);
  g_clear_pointer(&u->p, profile_free);
  return 0;
}

static Profile *check_profile(lua_State *L, int idx, const char *fn)
{
  LProfile *u = luaL_testudata(L, idx, PROFILE_MT);
  if (u == NULL || u->p == NULL)
    luaL_error(L, "%s: expected a profile from js.profile.load (got %s)", fn,
               luaL_typename(L, idx));
  return u->p;
}

static void push_profile(lua_State *L, Profile *p)
{
  LProfile *u = lua_newuserdatauv(L, sizeof *u, 0);
  u->p = p;
  luaL_setmetatable(L, PROFILE_MT);
}

static void set_str(lua_State *L, const char *k, const char *v)
{
  lua_pushstring(L, v);
  lua_setfield(L, -2, k);
}

static void push_op(lua_State *L, const ProfileOp *op)
{
  lua_createtable(L, 0, 7);
  set_str(L, "name", op->name);
  if (op->instruction != NULL) {
    jsl_set_int(L, "stage", op->stage);
    set_str(L, "instruction", op->instruction);
  }
  set_str(L, "class", sim_class_name(op->klass));
  jsl_set_num(L, "count", op->count);
  lua_createtable(L, (int)op->points->len, 0);
  for (guint j = 0; j < op->points->len; j++) {
    const ProfilePoint *pt = &g_array_index(op->points, ProfilePoint, j);
    lua_createtable(L, 0, 4);
    jsl_set_int(L, "sm_mhz", pt->sm_mhz);
    jsl_set_int(L, "mem_mhz", pt->mem_mhz);
    jsl_set_num(L, "time_s", pt->time_s);
    jsl_set_num(L, "energy_j", pt->energy_j);
    lua_rawseti(L, -2, j + 1);
  }
  lua_setfield(L, -2, "points");
}

/* p:at(op_name, sm_mhz[, mem_mhz]) -> time_s, energy_j (interpolated). */
static int profile_at(lua_State *L)
{
  const char *fn = "profile:at";
  Profile *p = check_profile(L, 1, fn);
  const char *name = luaL_checkstring(L, 2);
  lua_Integer sm = luaL_checkinteger(L, 3);
  lua_Integer mem = luaL_optinteger(L, 4, 0);
  if (sm <= 0 || sm > 100000 || mem < 0 || mem > 100000)
    return luaL_error(L, "%s: clocks must be in 1..100000 MHz", fn);
  const ProfileOp *op = profile_find(p, name);
  if (op == NULL)
    return luaL_error(L, "%s: no op '%s' in %s", fn, name, p->path);
  double t, e;
  GError *err = NULL;
  if (!profile_op_at(op, (guint)sm, (guint)mem, &t, &e, &err))
    return jsl_raise_gerror(L, fn, err);
  lua_pushnumber(L, t);
  lua_pushnumber(L, e);
  return 2;
}

/* p:op(name) -> the op table or nil. */
static int profile_op(lua_State *L)
{
  Profile *p = check_profile(L, 1, "profile:op");
  const ProfileOp *op = profile_find(p, luaL_checkstring(L, 2));
  if (op == NULL)
    lua_pushnil(L);
  else
    push_op(L, op);
  return 1;
}

static int profile_index(lua_State *L)
{
  Profile *p = check_profile(L, 1, "profile");
  const char *k = luaL_checkstring(L, 2);
  if (strcmp(k, "path") == 0) {
    lua_pushstring(L, p->path);
  } else if (strcmp(k, "format") == 0) {
    lua_pushstring(L, format_name(p->format));
  } else if (strcmp(k, "stages") == 0) {
    lua_pushinteger(L, p->n_stages);
  } else if (strcmp(k, "ops") == 0) {
    lua_createtable(L, (int)p->ops->len, 0);
    for (guint i = 0; i < p->ops->len; i++) {
      push_op(L, g_ptr_array_index(p->ops, i));
      lua_rawseti(L, -2, i + 1);
    }
  } else if (strcmp(k, "clocks") == 0) {
    /* Distinct SM clocks, ascending. */
    GArray *all = g_array_new(FALSE, FALSE, sizeof(guint));
    for (guint i = 0; i < p->ops->len; i++) {
      const ProfileOp *op = g_ptr_array_index(p->ops, i);
      for (guint j = 0; j < op->points->len; j++)
        g_array_append_val(all,
                           g_array_index(op->points, ProfilePoint, j).sm_mhz);
    }
    guint *v = (guint *)all->data;
    for (guint i = 1; i < all->len; i++) /* insertion sort: small */
      for (guint j = i; j > 0 && v[j - 1] > v[j]; j--) {
        guint t = v[j];
        v[j] = v[j - 1];
        v[j - 1] = t;
      }
    lua_createtable(L, (int)all->len, 0);
    int n = 0;
    for (guint i = 0; i < all->len; i++)
      if (i == 0 || v[i] != v[i - 1]) {
        lua_pushinteger(L, v[i]);
        lua_rawseti(L, -2, ++n);
      }
    g_array_unref(all);
  } else if (strcmp(k, "at") == 0) {
    lua_pushcfunction(L, profile_at);
  } else if (strcmp(k, "op") == 0) {
    lua_pushcfunction(L, profile_op);
  } else {
    lua_pushnil(L);
  }
  return 1;
}

static int profile_tostring(lua_State *L)
{
  Profile *p = check_profile(L, 1, "profile");
  lua_pushfstring(L, "profile %s (%s form, %d ops)", p->path,
                  format_name(p->format), (int)p->ops->len);
  return 1;
}

static int l_profile_load(lua_State *L)
{
  const char *path = luaL_checkstring(L, 1);
  jsl_check_read(L, "js.profile.load", path);
  GError *err = NULL;
  Profile *p = profile_load(path, &err);
  if (p == NULL)
    return jsl_raise_gerror(L, "js.profile.load", err);
  push_profile(L, p);
  return 1;
}

static int l_profile_load_nvml(lua_State *L)
{
  const char *samples = luaL_checkstring(L, 1);
  const char *windows = luaL_checkstring(L, 2);
  jsl_check_read(L, "js.profile.load_nvml", samples);
  jsl_check_read(L, "js.profile.load_nvml", windows);
  GError *err = NULL;
  Profile *p = profile_load_nvml(samples, windows, &err);
  if (p == NULL)
    return jsl_raise_gerror(L, "js.profile.load_nvml", err);
  push_profile(L, p);
  return 1;
}

/* The profile argument `key` of the table at idx: a path (loaded; the
 * returned profile is then pushed as a userdata so it is collected) or a
 * profile userdata.  Leaves one value on the stack. */
static Profile *arg_profile(lua_State *L, int idx, const char *fn)
{
  int t = lua_getfield(L, idx, "profile");
  if (t == LUA_TSTRING) {
    const char *path = lua_tostring(L, -1);
    jsl_check_read(L, fn, path);
    GError *err = NULL;
    Profile *p = profile_load(path, &err);
    if (p == NULL)
      return (jsl_raise_gerror(L, fn, err), NULL);
    lua_pop(L, 1);
    push_profile(L, p);
    return p;
  }
  if (t == LUA_TNIL)
    luaL_error(L, "%s: argument 'profile' is required (a path or a profile "
                  "from js.profile.load)",
               fn);
  return check_profile(L, lua_gettop(L), fn);
}

Profile *jsl_check_profile(lua_State *L, int idx, const char *fn)
{
  return arg_profile(L, idx, fn);
}

/* ---------------------------------------------------------------------- */
/* Lua: js.validate                                                        */

static void push_err(lua_State *L, const char *k, const FitErr *e)
{
  lua_createtable(L, 0, 7);
  jsl_set_int(L, "n", e->n);
  jsl_set_num(L, "time_mape", e->time_mape);
  jsl_set_num(L, "time_max", e->time_max);
  jsl_set_num(L, "time_bias", e->time_bias);
  jsl_set_num(L, "energy_mape", e->energy_mape);
  jsl_set_num(L, "energy_max", e->energy_max);
  jsl_set_num(L, "energy_bias", e->energy_bias);
  lua_setfield(L, -2, k);
}

static void push_summary(lua_State *L, const FitSummary *s)
{
  lua_createtable(L, 0, 16);
  set_str(L, "name", s->name);
  push_err(L, "oob", &s->oob);
  push_err(L, "fit", &s->fit);
  push_err(L, "oob_all", &s->oob_all);
  jsl_set_int(L, "min_sm_meas", s->min_sm_meas);
  jsl_set_int(L, "min_mem_meas", s->min_mem_meas);
  jsl_set_int(L, "min_sm_oob", s->min_sm_oob);
  jsl_set_int(L, "min_sm_fit", s->min_sm_fit);
  jsl_set_num(L, "saving_meas", s->saving_meas);
  jsl_set_num(L, "saving_oob", s->saving_oob);
  jsl_set_num(L, "saving_fit", s->saving_fit);
  jsl_set_num(L, "regret_oob", s->regret_oob);
  jsl_set_num(L, "regret_fit", s->regret_fit);
}

static void push_model(lua_State *L, const FitModel *m, const Profile *p)
{
  lua_createtable(L, 0, 10);
  set_str(L, "fit", fit_mode_name(m->mode));
  jsl_set_num(L, "p_const_w", m->p_const_w);
  jsl_set_num(L, "p_leak_w", m->p_leak_w);
  jsl_set_num(L, "v_ratio", m->v_ratio);
  jsl_set_num(L, "f_knee_mhz", m->f_knee_mhz);
  jsl_set_num(L, "dyn_scale", m->dyn_scale);
  jsl_set_num(L, "rms_time", m->rms_rel_time);
  jsl_set_num(L, "rms_energy", m->rms_rel_energy);
  lua_createtable(L, (int)m->n_ops, 0);
  for (guint i = 0; i < m->n_ops; i++) {
    const FitOpModel *om = &m->ops[i];
    lua_createtable(L, 0, 8);
    set_str(L, "name",
            ((const ProfileOp *)g_ptr_array_index(p->ops, i))->name);
    jsl_set_num(L, "t0_s", om->t0_s);
    jsl_set_num(L, "a_c", om->a_c);
    jsl_set_num(L, "a_m", om->a_m);
    jsl_set_num(L, "a_o", om->a_o);
    jsl_set_num(L, "sat_mhz", om->sat_mhz);
    jsl_set_num(L, "dyn_j", om->dyn_j);
    jsl_set_num(L, "mem_j", om->mem_j);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "ops");
}

static const char *const validate_keys[] = {
  "profile", "gpu", "holdout", "folds", "fit", "seed", "power_limit_w",
  "out", "save_gpu", "save_gpu_file", "points", NULL};

/* js.validate{ profile =, gpu =, holdout =, folds =, fit =, seed =,
 *              power_limit_w =, out =, save_gpu =, save_gpu_file = } */
static int l_validate(lua_State *L)
{
  const char *fn = "js.validate";
  JsSession *s = jsl_session(L);
  luaL_checktype(L, 1, LUA_TTABLE);
  jsl_check_keys(L, 1, fn, validate_keys);
  ValidateCfg cfg = {0};
  cfg.gpu = jsl_opt_str(L, 1, fn, "gpu", NULL);
  if (cfg.gpu == NULL)
    return luaL_error(L, "%s: argument 'gpu' is required (a catalogue name)",
                      fn);
  cfg.holdout = jsl_opt_num(L, 1, fn, "holdout", 0.25, 1e-9, 1 - 1e-9);
  cfg.folds = (guint)jsl_opt_int(L, 1, fn, "folds", 0, 0, 1000);
  if (cfg.folds == 1)
    return luaL_error(L, "%s: argument 'folds' must be 0 (holdout) or >= 2",
                      fn);
  cfg.mode = (FitMode)jsl_opt_choice(L, 1, fn, "fit", FIT_ALL,
                                     (const char *const[]){"none", "time",
                                                           "power", "all",
                                                           NULL});
  cfg.seed = (guint64)jsl_opt_int(L, 1, fn, "seed", (lua_Integer)s->seed, 0,
                                  G_MAXINT64);
  cfg.power_limit_w = jsl_opt_num(L, 1, fn, "power_limit_w", 0, 0, 1e5);
  cfg.out = jsl_opt_str(L, 1, fn, "out", NULL);
  cfg.save_gpu = jsl_opt_str(L, 1, fn, "save_gpu", NULL);
  const char *save_file = jsl_opt_str(L, 1, fn, "save_gpu_file", NULL);
  gboolean points = jsl_opt_bool(L, 1, fn, "points", FALSE);
  if (save_file != NULL && cfg.save_gpu == NULL)
    return luaL_error(L, "%s: argument 'save_gpu_file' needs 'save_gpu' (the "
                         "entry's name)",
                      fn);
  if (cfg.out != NULL)
    jsl_check_write(L, fn, cfg.out, JS_FILE_RESULTS);
  if (save_file != NULL)
    jsl_check_write(L, fn, save_file, JS_FILE_GPU);
  Profile *p = arg_profile(L, 1, fn);  /* anchored on the stack */

  GError *err = NULL;
  const GpuSpec *g = NULL;
  FitReport *r = run_validation(s->catalogue, p, &cfg, &g, &err);
  if (r == NULL)
    return jsl_raise_gerror(L, fn, err);
  gboolean ok = TRUE;
  if (cfg.out != NULL)
    ok = write_hdf5(p, g, &cfg, r, &err);
  if (ok && cfg.save_gpu != NULL) {
    GpuSpec *spec = fitted_spec(r, p, cfg.save_gpu, &err);
    ok = spec != NULL && gpu_catalogue_define(s->catalogue, spec, &err) &&
         (save_file == NULL || gpu_spec_save_keyfile(spec, save_file, &err));
    gpu_spec_free(spec);
    g = NULL; /* the catalogue may have moved; not used below */
  }
  if (!ok) {
    fit_report_free(r);
    return jsl_raise_gerror(L, fn, err);
  }
  /* The report goes into a collectable box: building the result may raise
   * (memory) and must not leak it. */
  FitReport **box = lua_newuserdatauv(L, sizeof *box, 0);
  *box = r;
  luaL_setmetatable(L, REPORTBOX_MT);
  const GpuSpec *gg = gpu_catalogue_lookup(s->catalogue, cfg.gpu, NULL);
  GString *text = g_string_new(NULL);
  report_text(p, gg, &cfg, r, points, text);
  lua_createtable(L, 0, 12);
  lua_pushlstring(L, text->str, text->len);
  g_string_free(text, TRUE);
  lua_setfield(L, -2, "text");
  set_str(L, "gpu", cfg.gpu);
  set_str(L, "fit", fit_mode_name(r->mode));
  set_str(L, "profile", p->path);
  jsl_set_num(L, "power_limit_w", r->oob->power_limit_w);
  jsl_set_int(L, "n_clocks", r->n_clocks);
  jsl_set_int(L, "heldout_clocks", r->n_heldout_clocks);
  jsl_set_int(L, "folds", r->folds);
  lua_createtable(L, (int)r->summary->len - 1, 0);
  for (guint i = 0; i + 1 < r->summary->len; i++) {
    push_summary(L, &g_array_index(r->summary, FitSummary, i));
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "ops");
  push_summary(L, &g_array_index(r->summary, FitSummary, r->summary->len - 1));
  lua_setfield(L, -2, "overall");
  push_model(L, r->fitted_all != NULL ? r->fitted_all : r->oob, p);
  lua_setfield(L, -2, "model");
  lua_createtable(L, (int)r->rows->len, 0);
  for (guint k = 0; k < r->rows->len; k++) {
    const FitRow *w = &g_array_index(r->rows, FitRow, k);
    lua_createtable(L, 0, 11);
    set_str(L, "op", ((const ProfileOp *)g_ptr_array_index(p->ops, w->op))->name);
    jsl_set_int(L, "sm_mhz", w->sm_mhz);
    jsl_set_int(L, "mem_mhz", w->mem_mhz);
    lua_pushboolean(L, w->heldout);
    lua_setfield(L, -2, "heldout");
    jsl_set_num(L, "time_s", w->time_s);
    jsl_set_num(L, "energy_j", w->energy_j);
    jsl_set_num(L, "oob_time_s", w->oob_time_s);
    jsl_set_num(L, "oob_energy_j", w->oob_energy_j);
    jsl_set_num(L, "fit_time_s", w->fit_time_s);
    jsl_set_num(L, "fit_energy_j", w->fit_energy_j);
    lua_rawseti(L, -2, k + 1);
  }
  lua_setfield(L, -2, "points");
  g_clear_pointer(box, fit_report_free);
  return 1;
}

/* ---------------------------------------------------------------------- */
/* Lua: js.validate_interval (bootstrap)                                   */

/* The model handed to the what-if function; valid during the call only. */
typedef struct {
  const FitModel *m;
  const Profile *p;
  const char *gpu_name;
} LFitModel;

static LFitModel *check_fitmodel(lua_State *L, int idx, const char *fn)
{
  LFitModel *u = luaL_checkudata(L, idx, FITMODEL_MT);
  if (u->m == NULL)
    luaL_error(L, "%s: this model was only valid inside the function it was "
                  "passed to",
               fn);
  return u;
}

/* m:predict(op_name, sm_mhz[, mem_mhz]) -> time_s, energy_j */
static int fitmodel_predict(lua_State *L)
{
  const char *fn = "model:predict";
  LFitModel *u = check_fitmodel(L, 1, fn);
  const char *name = luaL_checkstring(L, 2);
  lua_Integer sm = luaL_checkinteger(L, 3);
  lua_Integer mem = luaL_optinteger(L, 4, 0);
  const GpuSpec *g = u->m->gpu;
  if (sm < g->sm_min_mhz.v || sm > g->sm_max_mhz.v || mem < 0 || mem > 100000)
    return luaL_error(L, "%s: SM clock %d MHz outside %s's %.0f-%.0f MHz", fn,
                      (int)sm, g->name, g->sm_min_mhz.v, g->sm_max_mhz.v);
  for (guint i = 0; i < u->p->ops->len; i++)
    if (strcmp(((const ProfileOp *)g_ptr_array_index(u->p->ops, i))->name,
               name) == 0) {
      double t, e;
      fit_model_predict(u->m, i, (guint)sm, (guint)mem, &t, &e, NULL);
      lua_pushnumber(L, t);
      lua_pushnumber(L, e);
      return 2;
    }
  return luaL_error(L, "%s: no op '%s' in the profile", fn, name);
}

static int fitmodel_index(lua_State *L)
{
  LFitModel *u = check_fitmodel(L, 1, "model");
  const char *k = luaL_checkstring(L, 2);
  if (strcmp(k, "predict") == 0)
    lua_pushcfunction(L, fitmodel_predict);
  else if (strcmp(k, "gpu") == 0)
    lua_pushstring(L, u->gpu_name);
  else if (strcmp(k, "p_const_w") == 0)
    lua_pushnumber(L, u->m->p_const_w);
  else if (strcmp(k, "p_leak_w") == 0)
    lua_pushnumber(L, u->m->p_leak_w);
  else if (strcmp(k, "v_ratio") == 0)
    lua_pushnumber(L, u->m->v_ratio);
  else if (strcmp(k, "f_knee_mhz") == 0)
    lua_pushnumber(L, u->m->f_knee_mhz);
  else if (strcmp(k, "dyn_scale") == 0)
    lua_pushnumber(L, u->m->dyn_scale);
  else
    lua_pushnil(L);
  return 1;
}

typedef struct {
  lua_State *L;
  int fn_idx;     /* the Lua function */
  int ud_idx;     /* the LFitModel userdata */
  JsSession *s;
  const char *gpu_name;
  const char *source;
} BootCtx;

/* FitWhatIf: defines the fitted GPU as ctx->gpu_name in the session
 * catalogue, then calls the Lua function under lua_pcall. */
static gboolean boot_eval(const FitModel *m, gpointer data, double *value,
                          GError **error)
{
  BootCtx *c = data;
  lua_State *L = c->L;
  GpuSpec *spec = fit_model_to_gpu(m, c->gpu_name, c->source);
  gboolean ok = gpu_catalogue_define(c->s->catalogue, spec, error);
  gpu_spec_free(spec);
  if (!ok)
    return FALSE;
  LFitModel *u = lua_touserdata(L, c->ud_idx);
  u->m = m;
  lua_pushvalue(L, c->fn_idx);
  lua_pushvalue(L, c->ud_idx);
  int rc = lua_pcall(L, 1, 1, 0);
  u->m = NULL;
  if (rc != LUA_OK) {
    g_set_error(error, FIT_ERROR, FIT_ERROR_INVALID, "fn: %s",
                lua_tostring(L, -1) != NULL ? lua_tostring(L, -1)
                                            : "(error object)");
    lua_pop(L, 1);
    return FALSE;
  }
  int isnum = 0;
  double v = lua_tonumberx(L, -1, &isnum);
  lua_pop(L, 1);
  if (!isnum || !isfinite(v)) {
    g_set_error(error, FIT_ERROR, FIT_ERROR_INVALID,
                "fn must return a finite number");
    return FALSE;
  }
  *value = v;
  return TRUE;
}

static const char *const interval_keys[] = {
  "profile", "gpu", "fit", "samples", "level", "seed", "power_limit_w",
  "fn", "gpu_name", NULL};

/* js.validate_interval{ profile =, gpu =, fn = function(model) -> number,
 *   fit = "all", samples = 200, level = 0.9, seed =, power_limit_w =,
 *   gpu_name = "<gpu>~fit" } -> { estimate, lo, hi, mean, sd, samples } */
static int l_validate_interval(lua_State *L)
{
  const char *fn = "js.validate_interval";
  JsSession *s = jsl_session(L);
  luaL_checktype(L, 1, LUA_TTABLE);
  jsl_check_keys(L, 1, fn, interval_keys);
  const char *gpu = jsl_opt_str(L, 1, fn, "gpu", NULL);
  if (gpu == NULL)
    return luaL_error(L, "%s: argument 'gpu' is required", fn);
  int mode = jsl_opt_choice(L, 1, fn, "fit", FIT_ALL,
                            (const char *const[]){"none", "time", "power",
                                                  "all", NULL});
  if (mode == FIT_NONE)
    return luaL_error(L, "%s: argument 'fit' must fit something (time, power "
                         "or all) for an interval",
                      fn);
  guint samples = (guint)jsl_opt_int(L, 1, fn, "samples", 200, 2, 100000);
  double level = jsl_opt_num(L, 1, fn, "level", 0.9, 1e-6, 1 - 1e-6);
  guint64 seed = (guint64)jsl_opt_int(L, 1, fn, "seed", (lua_Integer)s->seed,
                                      0, G_MAXINT64);
  double limit = jsl_opt_num(L, 1, fn, "power_limit_w", 0, 0, 1e5);
  if (lua_getfield(L, 1, "fn") != LUA_TFUNCTION)
    return luaL_error(L, "%s: argument 'fn' must be a function(model) "
                         "returning a number (got %s)",
                      fn, luaL_typename(L, -1));
  int fn_idx = lua_gettop(L);
  lua_pushfstring(L, "%s~fit", gpu);
  const char *gpu_name = jsl_opt_str(L, 1, fn, "gpu_name", lua_tostring(L, -1));
  Profile *p = arg_profile(L, 1, fn);
  LFitModel *u = lua_newuserdatauv(L, sizeof *u, 0);
  u->m = NULL;
  u->p = p;
  u->gpu_name = gpu_name;
  luaL_setmetatable(L, FITMODEL_MT);
  int ud_idx = lua_gettop(L);

  GError *err = NULL;
  const GpuSpec *g = gpu_catalogue_lookup(s->catalogue, gpu, &err);
  if (g == NULL)
    return jsl_raise_gerror(L, fn, err);
  /* The fitted entries replace gpu_name; the base must survive that. */
  if (strcmp(gpu_name, gpu) == 0)
    return luaL_error(L, "%s: argument 'gpu_name' must differ from 'gpu'", fn);
  char *base = g_path_get_basename(p->path);
  char *src = g_strdup_printf("bootstrap fit to %s", base);
  g_free(base);
  GpuSpec *gcopy = gpu_spec_copy(g);
  FitInput in = {0};
  jsl_fit_input_from_profile(p, &in);
  BootCtx ctx = {L, fn_idx, ud_idx, s, gpu_name, src};
  FitInterval iv;
  gboolean ok = fit_bootstrap(gcopy, in.ops, in.n, (FitMode)mode, limit,
                              samples, level, seed, boot_eval, &ctx, &iv,
                              &err);
  jsl_fit_input_clear(&in);
  gpu_spec_free(gcopy);
  g_free(src);
  if (!ok)
    return jsl_raise_gerror(L, fn, err);
  lua_createtable(L, 0, 7);
  jsl_set_num(L, "estimate", iv.estimate);
  jsl_set_num(L, "lo", iv.lo);
  jsl_set_num(L, "hi", iv.hi);
  jsl_set_num(L, "mean", iv.mean);
  jsl_set_num(L, "sd", iv.sd);
  jsl_set_num(L, "level", level);
  jsl_set_int(L, "samples", iv.samples);
  return 1;
}

/* ---------------------------------------------------------------------- */
/* Lua: js.validate_run (whole-run validation)                             */

/* Reads number field k of the table at idx; raises when absent. */
static double field_num(lua_State *L, int idx, const char *k, const char *fn)
{
  lua_getfield(L, idx, k);
  int isnum = 0;
  double v = lua_tonumberx(L, -1, &isnum);
  lua_pop(L, 1);
  if (!isnum)
    luaL_error(L, "%s: the result has no number '%s' (pass a table from "
                  "js.simulate)",
               fn, k);
  return v;
}

static const char *const run_keys[] = {"measured", "result", NULL};

/* js.validate_run{ measured = "iteration.csv", result = r } compares a
 * measured iteration (rank,time_s,energy_j) with a js.simulate result of
 * the same plan: per rank, time = the simulated iteration time and energy
 * = the GPU's energy per simulated iteration. */
static int l_validate_run(lua_State *L)
{
  const char *fn = "js.validate_run";
  luaL_checktype(L, 1, LUA_TTABLE);
  jsl_check_keys(L, 1, fn, run_keys);
  const char *path = jsl_opt_str(L, 1, fn, "measured", NULL);
  if (path == NULL)
    return luaL_error(L, "%s: argument 'measured' is required (a CSV "
                         "rank,time_s,energy_j)",
                      fn);
  if (lua_getfield(L, 1, "result") != LUA_TTABLE)
    return luaL_error(L, "%s: argument 'result' must be a table from "
                         "js.simulate (got %s)",
                      fn, luaL_typename(L, -1));
  int res = lua_gettop(L);
  double iter_t = field_num(L, res, "iteration_time_s", fn);
  lua_getfield(L, res, "iterations");
  lua_Integer n_iter = lua_istable(L, -1) ? luaL_len(L, -1) : 0;
  lua_pop(L, 1);
  if (n_iter < 1)
    return luaL_error(L, "%s: the result has no iterations", fn);
  if (lua_getfield(L, res, "per_gpu") != LUA_TTABLE)
    return luaL_error(L, "%s: the result has no per_gpu table", fn);
  int per = lua_gettop(L);
  lua_Integer n_gpu = luaL_len(L, per);

  jsl_check_read(L, fn, path);
  GError *err = NULL;
  GArray *ranks = profile_load_run(path, &err);
  if (ranks == NULL)
    return jsl_raise_gerror(L, fn, err);
  if ((lua_Integer)ranks->len != n_gpu) {
    guint n = ranks->len;
    g_array_unref(ranks);
    return luaL_error(L, "%s: %s has %d ranks, the simulation %d GPUs", fn,
                      path, (int)n, (int)n_gpu);
  }
  /* Copy into Lua memory, so no C allocation is live while Lua may raise
   * (the per_gpu entries are the caller's tables). */
  guint n = ranks->len;
  ProfileRank *rk = lua_newuserdatauv(L, n * sizeof(ProfileRank), 0);
  memcpy(rk, ranks->data, n * sizeof(ProfileRank));
  g_array_unref(ranks);
  lua_createtable(L, 0, 10);
  int out = lua_gettop(L);
  lua_createtable(L, (int)n, 0);
  double st = 0, se = 0, mt = 0, me = 0, sum_meas = 0, sum_sim = 0;
  double tmax_meas = 0;
  for (guint i = 0; i < n; i++) {
    ProfileRank pr = rk[i];
    lua_rawgeti(L, per, (lua_Integer)i + 1);
    lua_getfield(L, -1, "energy_j");
    double e_sim = lua_tonumber(L, -1) / (double)n_iter;
    lua_pop(L, 2);
    double et = iter_t / pr.time_s - 1, ee = e_sim / pr.energy_j - 1;
    st += fabs(et);
    se += fabs(ee);
    mt = MAX(mt, fabs(et));
    me = MAX(me, fabs(ee));
    sum_meas += pr.energy_j;
    sum_sim += e_sim;
    tmax_meas = MAX(tmax_meas, pr.time_s);
    lua_createtable(L, 0, 7);
    jsl_set_int(L, "rank", pr.rank);
    jsl_set_num(L, "time_s", pr.time_s);
    jsl_set_num(L, "energy_j", pr.energy_j);
    jsl_set_num(L, "sim_time_s", iter_t);
    jsl_set_num(L, "sim_energy_j", e_sim);
    jsl_set_num(L, "time_err", et);
    jsl_set_num(L, "energy_err", ee);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, out, "ranks");
  lua_pushvalue(L, out);
  jsl_set_num(L, "time_mape", st / n);
  jsl_set_num(L, "time_max", mt);
  jsl_set_num(L, "energy_mape", se / n);
  jsl_set_num(L, "energy_max", me);
  jsl_set_num(L, "iteration_time_s", tmax_meas);
  jsl_set_num(L, "sim_iteration_time_s", iter_t);
  jsl_set_num(L, "iteration_time_err", iter_t / tmax_meas - 1);
  jsl_set_num(L, "energy_j", sum_meas);
  jsl_set_num(L, "sim_energy_j", sum_sim);
  jsl_set_num(L, "energy_err", sum_sim / sum_meas - 1);
  char *text = g_strdup_printf(
      "measured %s vs simulated (%u ranks): iteration time %.4f s vs %.4f s "
      "(%+.2f%%), energy %.1f J vs %.1f J (%+.2f%%); per rank MAPE time "
      "%.2f%%, energy %.2f%% (max %.2f%%)",
      path, n, tmax_meas, iter_t, 100 * (iter_t / tmax_meas - 1), sum_meas,
      sum_sim, 100 * (sum_sim / sum_meas - 1), 100 * st / n, 100 * se / n,
      100 * me);
  lua_pushstring(L, text);
  g_free(text);
  lua_setfield(L, -2, "text");
  return 1;
}

/* ---------------------------------------------------------------------- */
/* Registration                                                            */

void jsl_register_profile(lua_State *L)
{
  if (luaL_newmetatable(L, PROFILE_MT)) {
    lua_pushcfunction(L, profile_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, profile_index);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, profile_tostring);
    lua_setfield(L, -2, "__tostring");
  }
  lua_pop(L, 1);
  if (luaL_newmetatable(L, REPORTBOX_MT)) {
    lua_pushcfunction(L, reportbox_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  if (luaL_newmetatable(L, FITMODEL_MT)) {
    lua_pushcfunction(L, fitmodel_index);
    lua_setfield(L, -2, "__index");
  }
  lua_pop(L, 1);
  lua_createtable(L, 0, 2);
  lua_pushcfunction(L, l_profile_load);
  lua_setfield(L, -2, "load");
  lua_pushcfunction(L, l_profile_load_nvml);
  lua_setfield(L, -2, "load_nvml");
  lua_setfield(L, -2, "profile");
  lua_pushcfunction(L, l_validate);
  lua_setfield(L, -2, "validate");
  lua_pushcfunction(L, l_validate_interval);
  lua_setfield(L, -2, "validate_interval");
  lua_pushcfunction(L, l_validate_run);
  lua_setfield(L, -2, "validate_run");
}

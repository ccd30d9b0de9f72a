/* run/validate.c -- see run/validate.h. */
#include "run/validate.h"
#include "io/atomic.h"
#include "io/results.h"
#include "models/gpufile.h"

#include <errno.h>
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------------- */
/* Profile -> fit input                                                    */

void js_fit_input_clear(JsFitInput *in)
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
void js_fit_input_from_profile(const Profile *p, JsFitInput *in)
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

const char *js_profile_format_name(ProfileFormat f)
{
  return f == PROFILE_PERSEUS ? "perseus" : "kernel";
}

static double pct(double x)
{
  return 100 * x;
}

/* The report's parts, in order: what was compared, the errors on the
 * held-out points, the minimum-energy clocks, the model fitted on every
 * point, and (on request) every point. */
static void report_header(const Profile *p, const GpuSpec *g,
                          const JsValidateCfg *cfg, const FitReport *r,
                          GString *o)
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
      js_profile_format_name(p->format), p->ops->len, r->n_clocks, lo, hi);
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
}

static void report_errors(const FitReport *r, GString *o)
{
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
}

static void report_min_energy(const FitReport *r, GString *o)
{
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
}

static void report_model(const Profile *p, const GpuSpec *g,
                         const FitReport *r, GString *o)
{
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

static void report_points(const Profile *p, const FitReport *r, GString *o)
{
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

void js_validate_report(const Profile *p, const GpuSpec *g,
                        const JsValidateCfg *cfg, const FitReport *r,
                        gboolean points, GString *o)
{
  report_header(p, g, cfg, r, o);
  report_errors(r, o);
  report_min_energy(r, o);
  if (r->fitted_all != NULL)
    report_model(p, g, r, o);
  if (points)
    report_points(p, r, o);
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

/* The three tables, each built under cfg->out (the temporary copy). */
static gboolean write_points(const Profile *p, const GpuSpec *g,
                             const JsValidateCfg *cfg, const FitReport *r,
                             const ResMeta *meta, const char *mode,
                             GError **error)
{
  g_autoptr(ResTable) t = res_table_open(cfg->out, "validate_points",
                                         RES_MODE_REPLACE, meta, error);
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
  return res_table_close(g_steal_pointer(&t), error);
}

static gboolean write_summary(const Profile *p, const GpuSpec *g,
                              const JsValidateCfg *cfg, const FitReport *r,
                              const ResMeta *meta, const char *mode,
                              GError **error)
{
  g_autoptr(ResTable) t = res_table_open(cfg->out, "validate_summary",
                                         RES_MODE_REPLACE, meta, error);
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
  return res_table_close(g_steal_pointer(&t), error);
}

static gboolean write_model(const Profile *p, const GpuSpec *g,
                            const JsValidateCfg *cfg, const FitReport *r,
                            const ResMeta *meta, const char *mode,
                            GError **error)
{
  const FitModel *m = r->fitted_all != NULL ? r->fitted_all : r->oob;
  g_autoptr(ResTable) t = res_table_open(cfg->out, "validate_model",
                                         RES_MODE_REPLACE, meta, error);
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
  return res_table_close(g_steal_pointer(&t), error);
}

static gboolean write_tables(const Profile *p, const GpuSpec *g,
                             const JsValidateCfg *cfg, const FitReport *r,
                             GError **error)
{
  ResMeta meta = {JOULESIM_VERSION, p->path, NULL, cfg->seed, NULL, NULL};
  const char *mode = fit_mode_name(r->mode);
  return write_points(p, g, cfg, r, &meta, mode, error) &&
         write_summary(p, g, cfg, r, &meta, mode, error) &&
         write_model(p, g, cfg, r, &meta, mode, error);
}

/* The tables go into a copy of the target (see run/validate.h), built
 * under io/atomic.h's temporary name and moved into place when complete. */
gboolean js_validate_write(const Profile *p, const GpuSpec *g,
                           const JsValidateCfg *cfg, const FitReport *r,
                           GError **error)
{
  if (g_file_test(cfg->out, G_FILE_TEST_EXISTS) &&
      !g_file_test(cfg->out, G_FILE_TEST_IS_REGULAR)) {
    g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_ISDIR,
                "%s: cannot open results file: not a regular file", cfg->out);
    return FALSE;
  }
  IoAtomic a;
  int e = io_atomic_open(&a, cfg->out, "validate");
  if (e != 0) {
    g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(e),
                "%s: cannot create a temporary file in %s: %s", cfg->out,
                a.dir, g_strerror(e));
    io_atomic_abort(&a);
    return FALSE;
  }
  close(a.fd);
  a.fd = -1;
  /* Tables are added to an existing results file; anything else is
   * refused by the callers' js_output_check, or (--force) replaced.  With
   * nothing to add to, the results writer creates the file itself (it
   * takes an existing empty file for a damaged HDF5 one). */
  if (g_file_test(cfg->out, G_FILE_TEST_EXISTS) &&
      !(cfg->force && !res_file_probe(cfg->out))) {
    g_autoptr(GFile) src = g_file_new_for_path(cfg->out);
    g_autoptr(GFile) dst = g_file_new_for_path(a.tmp);
    GError *err = NULL;
    if (!g_file_copy(src, dst, G_FILE_COPY_OVERWRITE, NULL, NULL, NULL,
                     &err)) {
      g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_FAILED,
                  "%s: cannot copy it to update it: %s", cfg->out,
                  err->message);
      g_error_free(err);
      io_atomic_abort(&a);
      return FALSE;
    }
  } else {
    g_unlink(a.tmp);
  }
  JsValidateCfg c = *cfg;
  c.out = a.tmp;
  if (!write_tables(p, g, &c, r, error)) {
    io_atomic_abort(&a);
    return FALSE;
  }
  e = io_atomic_sync(&a);
  if (e == 0)
    e = io_atomic_commit(&a, IO_ATOMIC_REPLACE);
  else
    io_atomic_abort(&a);
  if (e != 0) {
    g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(e),
                "%s: cannot replace it: %s", cfg->out, g_strerror(e));
    return FALSE;
  }
  return TRUE;
}

FitReport *js_validate_run(const GpuCatalogue *cat, const Profile *p,
                           const JsValidateCfg *cfg, const GpuSpec **gpu_out,
                           GError **error)
{
  const GpuSpec *g = gpu_catalogue_lookup(cat, cfg->gpu, error);
  if (g == NULL || !profile_check_power(p, g, cfg->power_limit_w, error))
    return NULL;
  JsFitInput in = {0};
  js_fit_input_from_profile(p, &in);
  FitOptions opt = {cfg->mode, cfg->holdout, cfg->folds, cfg->seed,
                    cfg->power_limit_w};
  GError *err = NULL;
  FitReport *r = fit_validate(g, in.ops, in.n, &opt, &err);
  js_fit_input_clear(&in);
  if (r == NULL) {
    g_set_error(error, err->domain, err->code, "%s: %s", p->path,
                err->message);
    g_error_free(err);
    return NULL;
  }
  *gpu_out = g;
  return r;
}

GpuSpec *js_validate_fitted_spec(const FitReport *r, const Profile *p,
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


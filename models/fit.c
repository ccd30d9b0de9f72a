/* models/fit.c -- fitting the DVFS time/power model to a measured profile.
 *
 * The op model (the single-kernel form of models/gpu.c)
 * -----------------------------------------------------
 * An op measured at SM clock f and memory clock m runs for
 *
 *   t(f, m) = t0 (a_c f0/f + a_m m0/m + a_o),  a_c + a_m + a_o = 1, a_* >= 0
 *
 * with f0 = sm_max and m0 = the highest memory clock of the GPU (DESIGN
 * section 5).  Its power is models/gpu.c's for a kernel without counters:
 * u_s = t0 a_c f0/f / t, u_m = t0 a_m m0/m / t, so that the energy of one
 * run is
 *
 *   E(f, m) = t (P_const + P_leak v^3) + D v^2 + C,     v = V(f) / V_max
 *   D = P_dyn x activity x a_c x t0    (dynamic energy: f-independent but
 *                                       for the voltage)
 *   C = P_mem x a_m x t0               (DRAM energy: clock-independent)
 *
 * and V(f) is the piecewise-linear voltage curve: v = v_min/v_max up to
 * f_knee, then linear to 1 at sm_max.  The power cap then applies as in
 * models/gpu.c: when E/t at the requested clock exceeds the limit, the op
 * runs at the highest SM grid clock whose power fits.
 *
 * Out of the box (fit_model_oob)
 * ------------------------------
 * The catalogue alone, anchored at one measurement: the op's time at its
 * highest measured clock pair.  An op without a kernel mix is one kernel
 * of its class without counters (class-default time fractions, gpu.c's
 * gpu_class_time_fractions).  An op with a mix (FitOp.kernels: a Perseus
 * forward or backward stage gets one transformer layer's kernels from
 * traces/gpt.c's gpt_layer_kernels, see traces/profile.c) is the sum of
 * its kernels, each priced by gpu_kernel_cost with its FLOPs and bytes and
 * capped per kernel.  Time and energy are both scaled by the anchor ratio
 * (measured / model time at the top clock), so power is the model's own.
 *
 * Fitting (fit_model_fit), least squares on relative residuals
 * -------------------------------------------------------------
 * Time, per op: t = c1 f0/f + c2 m0/m + c3 is linear in c = (c1, c2, c3)
 * >= 0 (c = t0 (a_c, a_m, a_o)); weighted by 1/t_measured (so the
 * objective is the sum of squared relative errors) it is solved exactly by
 * enumerating the passive sets of this 3-variable NNLS (the optimum is the
 * unconstrained solution on its passive set).  With a single memory clock
 * a_m and a_o cannot be told apart: c2 is dropped and the non-SM share is
 * split between a_m and a_o in the class-default ratio (OTHER: 2:1).
 *
 * Power, all ops jointly: for a fixed voltage curve (v_min/v_max, f_knee),
 * E - C is linear in (P_const, P_leak, D_1..D_n) >= 0, with the model's
 * time t(f, m) (fitted, or the catalogue's in FIT_POWER).  The D_i are
 * eliminated op by op (variable projection on 4x4 Gram matrices), leaving
 * a 2-variable NNLS solved by enumeration, inside an active-set loop for
 * D_i >= 0.  The voltage parameters are found by a zooming grid over
 * v_min/v_max in [0.5, 1] and f_knee in [lowest training clock, sm_max]
 * (13 x 13, five levels each 3x finer) and a Nelder-Mead polish.  One
 * prior row, weight 3 (relative), pulls P_const + P_leak towards the
 * catalogue's blocked power: a GPU spinning in NCCL at full clock with idle
 * SMs draws the model's floor (docs/gpu-model.md); a second, weight 1,
 * pulls their split towards the catalogue's, because the stage curves
 * alone barely tell P_const from P_leak (without it the fit drifts to
 * P_const = 0).  P_mem stays the catalogue's
 * estimate.  The saved catalogue entry takes P_const, P_leak, the voltage
 * curve, and P_dyn x dyn_scale, dyn_scale = sum D_i / sum D_i(catalogue)
 * (count-weighted): the per-class activities keep their catalogue ratios.
 *
 * Validation and bootstrap
 * ------------------------
 * In models/fit_validate.c; the 3x3 solve, the small NNLS and Nelder-Mead
 * are models/numeric.c's.
 *
 * Known limits
 * ------------
 * - One op = one kernel-like curve: a stage that mixes capped GEMMs with
 *   uncapped vector kernels (A100 at 500 W) shows a flat time top the form
 *   A/f + B cannot follow; measured effect on the shared profiles in
 *   docs/validation.md.
 * - A measured curve that is not monotone (A40 backward gets 6% faster
 *   between 975 and 960 MHz) cannot be followed by any monotone model.
 * - P_const vs P_leak rests on the blocked-power prior.
 * - The bootstrap resamples points, which assumes independent errors per
 *   clock; drift over a measurement campaign (temperature) is correlated.
 */
#include "models/fit.h"
#include "models/fit-private.h"
#include "models/numeric.h"

#include <math.h>
#include <string.h>

G_DEFINE_QUARK(fit-error-quark, fit_error)

#define LEAK_EXP 3.0       /* as models/gpu.c */
#define PRIOR_WEIGHT 3.0   /* weight of the blocked-power prior row */
#define SPLIT_WEIGHT 1.0   /* weight of the P_const:P_leak split prior */
#define GRID_N 13
#define GRID_LEVELS 5
#define RATIO_LO 0.5
#define RATIO_HI 1.0

static const char *const mode_names[] = {"none", "time", "power", "all",
                                         NULL};

const char *fit_mode_name(FitMode m)
{
  return (guint)m <= FIT_ALL ? mode_names[m] : "?";
}

int fit_mode_from_name(const char *s)
{
  for (int i = 0; mode_names[i] != NULL; i++)
    if (s != NULL && strcmp(s, mode_names[i]) == 0)
      return i;
  return -1;
}

/* ---------------------------------------------------------------------- */
/* The out-of-box model of one op                                          */

/* The op's kernels: its mix, or one kernel of its class without counters
 * (class-default time fractions).  Sets *n. */
static const FitKernel *oob_kernels(SimOpClass klass, const FitKernel *mix,
                                    guint n_mix, FitKernel *one, guint *n)
{
  if (n_mix > 0) {
    *n = n_mix;
    return mix;
  }
  one->kernel = (GpuKernel){klass, 0, 0, FALSE};
  one->count = 1;
  *n = 1;
  return one;
}

/* Out-of-box time and energy of one run before anchoring. */
static void oob_raw(const GpuSpec *g, SimOpClass klass, const FitKernel *mix,
                    guint n_mix, guint sm, guint mem, double limit, double *t,
                    double *e)
{
  FitKernel one;
  guint n;
  const FitKernel *ks = oob_kernels(klass, mix, n_mix, &one, &n);
  /* Measured clocks need not be the model's steps (V100's 7-8 MHz). */
  sm = sm != 0 ? gpu_snap_sm(g, sm) : 0;
  mem = mem != 0 ? gpu_snap_mem(g, mem) : 0;
  double tt = 0, ee = 0;
  for (guint i = 0; i < n; i++) {
    GpuCost c;
    gpu_kernel_cost(g, &ks[i].kernel, sm, mem, limit, &c);
    tt += ks[i].count * c.time_s;
    ee += ks[i].count * c.time_s * c.power_w;
  }
  *t = tt;
  *e = ee;
}

/* The catalogue's D (dynamic energy at sm_max, top memory clock, uncapped,
 * where v = 1) before anchoring. */
static double oob_raw_dyn(const GpuSpec *g, SimOpClass klass,
                          const FitKernel *mix, guint n_mix)
{
  FitKernel one;
  guint n;
  const FitKernel *ks = oob_kernels(klass, mix, n_mix, &one, &n);
  double d = 0;
  for (guint i = 0; i < n; i++) {
    GpuCost c;
    gpu_kernel_cost(g, &ks[i].kernel, (guint)lround(g->sm_max_mhz.v), 0,
                    GPU_POWER_UNCAPPED, &c);
    d += ks[i].count * g->p_dyn_w.v * gpu_kernel_activity(g, &ks[i].kernel) *
         c.util_compute * c.time_s;
  }
  return d;
}

/* ---------------------------------------------------------------------- */
/* Models                                                                  */

void fit_model_free(FitModel *m)
{
  if (m == NULL)
    return;
  gpu_spec_free(m->gpu);
  for (guint i = 0; i < m->n_ops; i++)
    g_free(m->ops[i].kernels);
  g_free(m->ops);
  g_free(m);
}

/* Index of the op's highest clock pair (memory first, then SM). */
static guint top_point(const GpuSpec *g, const FitOp *op)
{
  guint best = 0;
  for (guint j = 1; j < op->n_points; j++) {
    double mb = fit_eff_mem(g, op->points[best].mem_mhz);
    double mj = fit_eff_mem(g, op->points[j].mem_mhz);
    if (mj > mb || (mj == mb && op->points[j].sm_mhz > op->points[best].sm_mhz))
      best = j;
  }
  return best;
}

gboolean fit_check_input(const GpuSpec *g, const FitOp *ops, guint n_ops,
                         GError **error)
{
  if (n_ops == 0) {
    g_set_error(error, FIT_ERROR, FIT_ERROR_INVALID, "no ops to fit");
    return FALSE;
  }
  double fmin = g->sm_min_mhz.v, fmax = g->sm_max_mhz.v;
  for (guint i = 0; i < n_ops; i++) {
    const FitOp *op = &ops[i];
    const char *name = op->name != NULL ? op->name : "(unnamed)";
    if (op->n_points == 0 || op->points == NULL) {
      g_set_error(error, FIT_ERROR, FIT_ERROR_INVALID,
                  "op '%s' has no measured points", name);
      return FALSE;
    }
    if (!(op->count > 0) || (guint)op->klass >= SIM_CLASS_COUNT) {
      g_set_error(error, FIT_ERROR, FIT_ERROR_INVALID,
                  "op '%s': count must be > 0 and the class valid", name);
      return FALSE;
    }
    if (op->n_kernels > 0 && op->kernels == NULL) {
      g_set_error(error, FIT_ERROR, FIT_ERROR_INVALID,
                  "op '%s': %u mix kernels but none given", name,
                  op->n_kernels);
      return FALSE;
    }
    for (guint j = 0; j < op->n_points; j++) {
      const FitPoint *p = &op->points[j];
      if (p->sm_mhz < fmin || p->sm_mhz > fmax) {
        g_set_error(error, FIT_ERROR, FIT_ERROR_INVALID,
                    "op '%s': SM clock %u MHz is outside %s's range "
                    "%.0f-%.0f MHz (wrong --gpu?)",
                    name, p->sm_mhz, g->name, fmin, fmax);
        return FALSE;
      }
      if (!(p->time_s > 0) || !(p->energy_j > 0) || !isfinite(p->time_s) ||
          !isfinite(p->energy_j)) {
        g_set_error(error, FIT_ERROR, FIT_ERROR_INVALID,
                    "op '%s': point at %u MHz: time and energy must be "
                    "finite and > 0",
                    name, p->sm_mhz);
        return FALSE;
      }
    }
  }
  return TRUE;
}

/* A model holding the out-of-box parts and the catalogue's power
 * parameters; the time coefficients are left to the caller. */
static FitModel *model_base(const GpuSpec *g, const FitOp *ops, guint n_ops,
                            double power_limit_w)
{
  FitModel *m = g_new0(FitModel, 1);
  m->gpu = gpu_spec_copy(g);
  m->mode = FIT_NONE;
  m->power_limit_w = power_limit_w > 0 ? power_limit_w : g->power_limit_w.v;
  m->p_const_w = g->p_const_w.v;
  m->p_leak_w = g->p_leak_w.v;
  m->p_mem_w = g->p_mem_w.v;
  m->v_ratio = g->v_min.v / g->v_max.v;
  m->f_knee_mhz = g->f_knee_mhz.v;
  m->dyn_scale = 1;
  m->n_ops = n_ops;
  m->ops = g_new0(FitOpModel, n_ops);
  for (guint i = 0; i < n_ops; i++) {
    const FitOp *op = &ops[i];
    FitOpModel *om = &m->ops[i];
    om->klass = op->klass;
    om->n_kernels = op->n_kernels;
    om->kernels = g_memdup2(op->kernels, op->n_kernels * sizeof(FitKernel));
    const FitPoint *top = &op->points[top_point(g, op)];
    double t, e;
    oob_raw(g, op->klass, om->kernels, om->n_kernels, top->sm_mhz,
            top->mem_mhz, m->power_limit_w, &t, &e);
    om->oob_scale = top->time_s / t;
    om->oob_dyn_j =
        om->oob_scale * oob_raw_dyn(g, op->klass, om->kernels, om->n_kernels);
  }
  return m;
}

/* Out-of-box time/energy (anchored) at requested clocks; limit as given. */
static void oob_at(const FitModel *m, guint op, guint sm, guint mem,
                   double limit, double *t, double *e)
{
  const FitOpModel *om = &m->ops[op];
  oob_raw(m->gpu, om->klass, om->kernels, om->n_kernels, sm, mem, limit, t,
          e);
  *t *= om->oob_scale;
  *e *= om->oob_scale;
}

/* Single-op form time. */
static double form_time(const FitModel *m, const FitOpModel *om, double f,
                        double mem)
{
  if (om->sat_mhz > 0 && f > om->sat_mhz)
    f = om->sat_mhz;
  return om->t0_s * (om->a_c * m->gpu->sm_max_mhz.v / f +
                     om->a_m * fit_top_mem(m->gpu) / mem + om->a_o);
}

/* Time function of the model's mode, uncapped. */
static double model_time(const FitModel *m, guint op, guint sm, guint mem)
{
  if (m->mode == FIT_TIME || m->mode == FIT_ALL)
    return form_time(m, &m->ops[op], sm, fit_eff_mem(m->gpu, mem));
  double t, e;
  oob_at(m, op, sm, mem, GPU_POWER_UNCAPPED, &t, &e);
  return t;
}

/* Energy of the op's stalled SM cycles at SM clock f (v = V(f)/V_max) for
 * time t: the catalogue's stall term of models/gpu.c, P_dyn x activity x
 * stall_activity x (f/f_max) v^2 x (1 - u_s) t, with u_s t = t0 a_c
 * f_max/f.  Known, not fitted, like the static memory power. */
static double stall_j(const FitModel *m, const FitOpModel *om, double f,
                      double v, double t)
{
  const GpuSpec *g = m->gpu;
  double s = g->stall_activity.v;
  if (!(s > 0))
    return 0;
  double busy = MAX(0.0, t * f / g->sm_max_mhz.v - om->t0_s * om->a_c);
  return g->p_dyn_w.v * g->activity[om->klass].v * s * v * v * busy;
}

/* Fitted-power energy at (sm, mem) for time t, uncapped.  The memory
 * interface's static power (models/gpu.c, P_mem_static * m / m_max) is the
 * catalogue's, not fitted (0 on the parts whose fits hold it in P_const,
 * the A100 SXM4 and the A40); a profile's computations all move DRAM
 * data, so it is drawn throughout. */
static double model_energy(const FitModel *m, guint op, double sm, guint mem,
                           double t)
{
  const FitOpModel *om = &m->ops[op];
  if (om->sat_mhz > 0 && sm > om->sat_mhz)
    sm = om->sat_mhz;
  double v = gpu_voltage_ratio(m->v_ratio, m->f_knee_mhz, m->gpu->sm_max_mhz.v,
                               m->gpu->v_curve_exp.v, sm);
  double mem_static = m->gpu->p_mem_static_w.v * fit_eff_mem(m->gpu, mem) /
                      fit_top_mem(m->gpu);
  return t * (m->p_const_w + m->p_leak_w * pow(v, LEAK_EXP) + mem_static) +
         om->dyn_j * v * v + om->mem_j + stall_j(m, om, sm, v, t);
}

void fit_model_predict(const FitModel *m, guint op, guint sm_mhz,
                       guint mem_mhz, double *time_s, double *energy_j,
                       guint *sm_run)
{
  g_return_if_fail(m != NULL && op < m->n_ops);
  double t, e;
  guint f = sm_mhz;
  switch (m->mode) {
  case FIT_NONE:
    oob_at(m, op, sm_mhz, mem_mhz, m->power_limit_w, &t, &e);
    break;
  case FIT_TIME: {
    double to, eo;
    oob_at(m, op, sm_mhz, mem_mhz, m->power_limit_w, &to, &eo);
    t = model_time(m, op, sm_mhz, mem_mhz);
    e = t * (eo / to);
    break;
  }
  case FIT_POWER:
  case FIT_ALL:
  default: {
    t = model_time(m, op, f, mem_mhz);
    e = model_energy(m, op, f, mem_mhz, t);
    if (e / t > m->power_limit_w) {
      /* Power does not rise as the clock falls (E/t = P_const + P_leak v^3
       * + (D v^2 + C)/t, t non-increasing in f): walk the grid down. */
      const GpuSpec *g = m->gpu;
      double fmin = g->sm_min_mhz.v, step = g->sm_step_mhz.v;
      long k = (long)floor((f - fmin) / step + 1e-9);
      if (fmin + k * step >= f)
        k--;
      for (; k >= 0; k--) {
        guint fk = (guint)lround(fmin + k * step);
        double tk = model_time(m, op, fk, mem_mhz);
        double ek = model_energy(m, op, fk, mem_mhz, tk);
        f = fk;
        t = tk;
        e = ek;
        if (ek / tk <= m->power_limit_w)
          break;
      }
    }
    break;
  }
  }
  if (time_s != NULL)
    *time_s = t;
  if (energy_j != NULL)
    *energy_j = e;
  if (sm_run != NULL)
    *sm_run = f;
}

FitModel *fit_model_oob(const GpuSpec *gpu, const FitOp *ops, guint n_ops,
                        double power_limit_w, GError **error)
{
  g_return_val_if_fail(gpu != NULL, NULL);
  if (!fit_check_input(gpu, ops, n_ops, error))
    return NULL;
  FitModel *m = model_base(gpu, ops, n_ops, power_limit_w);
  /* Time coefficients of the catalogue's curve, for information and for
   * the DRAM energy term of FIT_POWER models built on it. */
  for (guint i = 0; i < n_ops; i++) {
    FitOpModel *om = &m->ops[i];
    gpu_class_time_fractions(om->klass, &om->a_c, &om->a_m, &om->a_o);
    om->t0_s = om->oob_scale;
    om->dyn_j = om->oob_dyn_j;
    om->mem_j = m->p_mem_w * om->a_m * om->t0_s;
  }
  return m;
}

/* ---------------------------------------------------------------------- */
/* Time fit                                                                */

/* An op's training points: distinct SM clocks (the first 512 in sms, all
 * counted in n_sm), distinct memory clocks, points, and the last point's
 * memory clock. */
typedef struct {
  guint n_sm, n_mem, n_pts;
  guint sms[512];
  guint fixed_mem;
} TrainClocks;

/* The training clocks of op under weights w (NULL = every point). */
static void training_clocks(const GpuSpec *g, const FitOp *op,
                            const double *w, TrainClocks *tc)
{
  guint n_sm = 0, n_mem = 0, n_pts = 0;
  guint *sms = tc->sms, mems[8];
  guint fixed_mem = 0;
  for (guint j = 0; j < op->n_points; j++) {
    if (w != NULL && !(w[j] > 0))
      continue;
    n_pts++;
    guint s = op->points[j].sm_mhz;
    guint mm = (guint)fit_eff_mem(g, op->points[j].mem_mhz);
    gboolean seen = FALSE;
    for (guint k = 0; k < MIN(n_sm, G_N_ELEMENTS(tc->sms)); k++)
      seen = seen || sms[k] == s;
    if (!seen) {
      if (n_sm < G_N_ELEMENTS(tc->sms))
        sms[n_sm] = s;
      n_sm++;
    }
    seen = FALSE;
    for (guint k = 0; k < MIN(n_mem, G_N_ELEMENTS(mems)); k++)
      seen = seen || mems[k] == mm;
    if (!seen) {
      if (n_mem < G_N_ELEMENTS(mems))
        mems[n_mem] = mm;
      n_mem++;
    }
    fixed_mem = mm;
  }
  tc->n_sm = n_sm;
  tc->n_mem = n_mem;
  tc->n_pts = n_pts;
  tc->fixed_mem = fixed_mem;
}

/* Fits the single-op time form of op i to the targets tgt[j] (measured or
 * catalogue times at the op's points) with weights w[j] (NULL = 1).
 * Errors: too few distinct clocks. */
static gboolean fit_time_op(const GpuSpec *g, const FitOp *op,
                            const double *tgt, const double *w,
                            FitOpModel *om, GError **error)
{
  double f0 = g->sm_max_mhz.v, m0 = fit_top_mem(g);
  TrainClocks tc;
  training_clocks(g, op, w, &tc);
  guint n_sm = tc.n_sm, n_mem = tc.n_mem, n_pts = tc.n_pts;
  const guint *sms = tc.sms;
  guint fixed_mem = tc.fixed_mem;
  if (n_sm < 2) {
    g_set_error(error, FIT_ERROR, FIT_ERROR_TOO_FEW,
                "op '%s': %u distinct training SM clock%s; fitting the time "
                "model needs at least 2",
                op->name, n_sm, n_sm == 1 ? "" : "s");
    return FALSE;
  }
  gboolean mem_varies = n_mem > 1;
  guint nv = mem_varies ? 3 : 2;
  /* Candidate saturation clocks: none, then each training SM clock in the
   * upper half of the training range except the highest.  A cap is kept
   * only when it pays for its parameter (BIC: n ln(SSE) + k ln n). */
  double fmin_t = G_MAXDOUBLE, fmax_t = 0;
  for (guint k = 0; k < MIN(n_sm, G_N_ELEMENTS(tc.sms)); k++) {
    fmin_t = MIN(fmin_t, sms[k]);
    fmax_t = MAX(fmax_t, sms[k]);
  }
  double c[3] = {0, 0, 0};
  double best_bic = INFINITY, best_sat = 0;
  gboolean any = FALSE;
  for (guint cand = 0; cand <= MIN(n_sm, G_N_ELEMENTS(tc.sms)); cand++) {
    double sat = 0;
    if (cand > 0) {
      sat = sms[cand - 1];
      if (sat >= fmax_t || sat < 0.5 * (fmin_t + fmax_t) || n_sm < 4)
        continue;
    }
    double G[3][3] = {{0}}, gv[3] = {0}, yy = 0;
    for (guint j = 0; j < op->n_points; j++) {
      double wj = w != NULL ? w[j] : 1;
      if (!(wj > 0))
        continue;
      const FitPoint *p = &op->points[j];
      double f = sat > 0 ? MIN((double)p->sm_mhz, sat) : p->sm_mhz;
      double x[3];
      x[0] = f0 / f;
      if (mem_varies) {
        x[1] = m0 / fit_eff_mem(g, p->mem_mhz);
        x[2] = 1;
      } else {
        x[1] = 1;
      }
      double rw = wj / (op->points[j].time_s * op->points[j].time_s);
      for (guint a = 0; a < nv; a++) {
        for (guint b = 0; b < nv; b++)
          G[a][b] += rw * x[a] * x[b];
        gv[a] += rw * x[a] * tgt[j];
      }
      yy += rw * tgt[j] * tgt[j];
    }
    double cc[3] = {0, 0, 0};
    double sse = num_nnls_small(G, gv, yy, nv, cc);
    if (sse < 0)
      continue;
    double n_eff = n_pts;
    double bic = n_eff * log(MAX(sse, 1e-30 * yy) / n_eff) +
                 (nv + (sat > 0)) * log(n_eff);
    if (!any || bic < best_bic - 1e-9) {
      any = TRUE;
      best_bic = bic;
      best_sat = sat;
      memcpy(c, cc, sizeof cc);
    }
  }
  if (!any) {
    g_set_error(error, FIT_ERROR, FIT_ERROR_TOO_FEW,
                "op '%s': the training clocks do not determine the time "
                "model (%u points)",
                op->name, n_pts);
    return FALSE;
  }
  om->sat_mhz = best_sat;
  double ac_t0 = c[0], am_t0, ao_t0;
  if (mem_varies) {
    am_t0 = c[1];
    ao_t0 = c[2];
  } else {
    /* c[1] = t0 (a_m m0/mf + a_o); split in the class ratio r = a_m /
     * (a_m + a_o). */
    double fa_c, fa_m, fa_o;
    gpu_class_time_fractions(op->klass, &fa_c, &fa_m, &fa_o);
    double r = fa_m + fa_o > 0 ? fa_m / (fa_m + fa_o) : 0;
    double s_t0 = c[1] / (r * m0 / fixed_mem + 1 - r);
    am_t0 = r * s_t0;
    ao_t0 = (1 - r) * s_t0;
  }
  double t0 = ac_t0 + am_t0 + ao_t0;
  if (!(t0 > 0)) {
    g_set_error(error, FIT_ERROR, FIT_ERROR_TOO_FEW,
                "op '%s': degenerate time fit", op->name);
    return FALSE;
  }
  om->t0_s = t0;
  om->a_c = ac_t0 / t0;
  om->a_m = am_t0 / t0;
  om->a_o = ao_t0 / t0;
  return TRUE;
}

/* ---------------------------------------------------------------------- */
/* Power fit                                                               */

/* Per-op Gram matrix over the weighted columns [t, t v^3, v^2, E - C]. */
typedef struct {
  double g[4][4];
  gboolean any;
} Gram;

typedef struct {
  const FitModel *m;
  const FitOp *ops;
  const double *const *weights;
  double **times;     /* model time at each point */
  Gram *gram;         /* n_ops, rebuilt per curve */
  double p_block;
  double rho;         /* catalogue P_const / (P_const + P_leak) */
  /* result of the last solve */
  double pc, pl;
  double *dyn;        /* n_ops */
} PowerFit;

static void build_gram(PowerFit *pf, double ratio, double knee)
{
  const FitModel *m = pf->m;
  double fmax = m->gpu->sm_max_mhz.v;
  for (guint i = 0; i < m->n_ops; i++) {
    Gram *gr = &pf->gram[i];
    memset(gr, 0, sizeof *gr);
    const FitOp *op = &pf->ops[i];
    for (guint j = 0; j < op->n_points; j++) {
      double w = pf->weights != NULL ? pf->weights[i][j] : 1;
      if (!(w > 0))
        continue;
      const FitPoint *p = &op->points[j];
      double sat = m->ops[i].sat_mhz;
      double f = sat > 0 ? MIN((double)p->sm_mhz, sat) : p->sm_mhz;
      double v = gpu_voltage_ratio(ratio, knee, fmax, m->gpu->v_curve_exp.v, f);
      double t = pf->times[i][j];
      double rw = w / (p->energy_j * p->energy_j);
      /* The catalogue's static memory power is known, not fitted. */
      double mem_static = t * m->gpu->p_mem_static_w.v *
                          fit_eff_mem(m->gpu, p->mem_mhz) /
                          fit_top_mem(m->gpu);
      double x[4] = {t, t * pow(v, LEAK_EXP), v * v,
                     p->energy_j - m->ops[i].mem_j - mem_static -
                         stall_j(m, &m->ops[i], f, v, t)};
      for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
          gr->g[a][b] += rw * x[a] * x[b];
      gr->any = TRUE;
    }
  }
}

/* Solves the linear part for the current Gram matrices; returns the
 * objective (weighted SSE + prior). */
static double solve_linear(PowerFit *pf)
{
  guint n = pf->m->n_ops;
  g_autofree gboolean *freed = g_new(gboolean, n);  /* D_i in the passive set */
  for (guint i = 0; i < n; i++)
    freed[i] = pf->gram[i].any && pf->gram[i].g[2][2] > 0;
  double pc = 0, pl = 0, obj = 0;
  double wp = pf->p_block > 0 ? PRIOR_WEIGHT : 0;
  for (int iter = 0; iter < 4 * (int)n + 8; iter++) {
    /* Reduced normal equations for (P_const, P_leak). */
    double G[3][3] = {{0}}, gv[3] = {0}, yy = 0;
    for (guint i = 0; i < n; i++) {
      const double(*g)[4] = pf->gram[i].g;
      if (!pf->gram[i].any)
        continue;
      for (int a = 0; a < 2; a++) {
        for (int b = 0; b < 2; b++)
          G[a][b] += g[a][b] - (freed[i] ? g[a][2] * g[2][b] / g[2][2] : 0);
        gv[a] += g[a][3] - (freed[i] ? g[a][2] * g[2][3] / g[2][2] : 0);
      }
      yy += g[3][3] - (freed[i] ? g[2][3] * g[2][3] / g[2][2] : 0);
    }
    if (wp > 0) {
      /* (P_const + P_leak) / P_block = 1, weight PRIOR_WEIGHT, and
       * ((1 - rho) P_const - rho P_leak) / P_block = 0, weight
       * SPLIT_WEIGHT (the catalogue's split). */
      double k = wp * wp / (pf->p_block * pf->p_block);
      double q = SPLIT_WEIGHT * SPLIT_WEIGHT / (pf->p_block * pf->p_block);
      double u[2] = {1 - pf->rho, -pf->rho};
      for (int a = 0; a < 2; a++) {
        for (int b = 0; b < 2; b++)
          G[a][b] += k + q * u[a] * u[b];
        gv[a] += k * pf->p_block;
      }
      yy += wp * wp;
    }
    double c[3] = {0, 0, 0};
    obj = num_nnls_small(G, gv, yy, 2, c);
    pc = c[0];
    pl = c[1];
    /* D_i from the projection; fix the active set. */
    gboolean changed = FALSE;
    for (guint i = 0; i < n; i++) {
      const double(*g)[4] = pf->gram[i].g;
      if (!pf->gram[i].any || !(g[2][2] > 0)) {
        pf->dyn[i] = 0;
        continue;
      }
      double d = (g[2][3] - pc * g[0][2] - pl * g[1][2]) / g[2][2];
      if (freed[i] && d < 0) {
        freed[i] = FALSE;
        changed = TRUE;
      } else if (!freed[i] && d > 0) {
        freed[i] = TRUE;
        changed = TRUE;
      }
      pf->dyn[i] = MAX(d, 0);
    }
    if (!changed)
      break;
  }
  pf->pc = pc;
  pf->pl = pl;
  return obj;
}

static double power_objective(PowerFit *pf, double ratio, double knee)
{
  build_gram(pf, ratio, knee);
  return solve_linear(pf);
}

/* power_objective as a NumObjective of x = (ratio, knee). */
static double power_objective_nm(const double *x, void *data)
{
  return power_objective(data, x[0], x[1]);
}

static gboolean fit_power(FitModel *m, const FitOp *ops,
                          const double *const *weights, GError **error)
{
  const GpuSpec *g = m->gpu;
  guint n = m->n_ops;
  /* Distinct training SM clocks overall, and the lowest. */
  g_autoptr(GHashTable) clocks = g_hash_table_new(g_direct_hash, g_direct_equal);
  double lowest = g->sm_max_mhz.v;
  for (guint i = 0; i < n; i++)
    for (guint j = 0; j < ops[i].n_points; j++)
      if (weights == NULL || weights[i][j] > 0) {
        g_hash_table_add(clocks, GUINT_TO_POINTER(ops[i].points[j].sm_mhz));
        lowest = MIN(lowest, ops[i].points[j].sm_mhz);
      }
  if (g_hash_table_size(clocks) < 3) {
    g_set_error(error, FIT_ERROR, FIT_ERROR_TOO_FEW,
                "%u distinct training SM clock%s; fitting the power model "
                "needs at least 3",
                g_hash_table_size(clocks),
                g_hash_table_size(clocks) == 1 ? "" : "s");
    return FALSE;
  }
  PowerFit pf = {
    .m = m,
    .ops = ops,
    .weights = weights,
    .times = g_new0(double *, n),
    .gram = g_new0(Gram, n),
    .p_block = g->blocked_power_w.v,
    .rho = g->p_const_w.v + g->p_leak_w.v > 0
               ? g->p_const_w.v / (g->p_const_w.v + g->p_leak_w.v)
               : 0.5,
    .dyn = g_new0(double, n),
  };
  for (guint i = 0; i < n; i++) {
    pf.times[i] = g_new(double, ops[i].n_points);
    for (guint j = 0; j < ops[i].n_points; j++)
      pf.times[i][j] = model_time(m, i, ops[i].points[j].sm_mhz,
                                  ops[i].points[j].mem_mhz);
  }
  double lo[2] = {RATIO_LO, MAX(lowest, g->sm_min_mhz.v)};
  double hi[2] = {RATIO_HI, g->sm_max_mhz.v};
  double best[2] = {0.5 * (lo[0] + hi[0]), 0.5 * (lo[1] + hi[1])};
  double fbest = INFINITY;
  double span[2] = {hi[0] - lo[0], hi[1] - lo[1]};
  double center[2] = {best[0], best[1]};
  for (int level = 0; level < GRID_LEVELS; level++) {
    double a0 = MAX(lo[0], center[0] - 0.5 * span[0]);
    double a1 = MIN(hi[0], center[0] + 0.5 * span[0]);
    double b0 = MAX(lo[1], center[1] - 0.5 * span[1]);
    double b1 = MIN(hi[1], center[1] + 0.5 * span[1]);
    for (int i = 0; i < GRID_N; i++)
      for (int j = 0; j < GRID_N; j++) {
        double r = a0 + (a1 - a0) * i / (GRID_N - 1);
        double k = b0 + (b1 - b0) * j / (GRID_N - 1);
        double f = power_objective(&pf, r, k);
        if (f < fbest) {
          fbest = f;
          best[0] = r;
          best[1] = k;
        }
      }
    center[0] = best[0];
    center[1] = best[1];
    span[0] /= 3;
    span[1] /= 3;
  }
  double step[2] = {span[0], span[1]};
  double x[2] = {best[0], best[1]};
  static const double tol[2] = {1e-7, 1e-4};
  double fx = num_nelder_mead(power_objective_nm, &pf, 2, x, step, lo, hi,
                              120, tol);
  if (fx > fbest) {
    x[0] = best[0];
    x[1] = best[1];
  }
  power_objective(&pf, x[0], x[1]);
  m->v_ratio = x[0];
  m->f_knee_mhz = x[1];
  m->p_const_w = pf.pc;
  m->p_leak_w = pf.pl;
  double num = 0, den = 0;
  for (guint i = 0; i < n; i++) {
    m->ops[i].dyn_j = pf.dyn[i];
    num += ops[i].count * pf.dyn[i];
    den += ops[i].count * m->ops[i].oob_dyn_j;
  }
  m->dyn_scale = den > 0 ? num / den : 1;
  for (guint i = 0; i < n; i++)
    g_free(pf.times[i]);
  g_free(pf.times);
  g_free(pf.gram);
  g_free(pf.dyn);
  return TRUE;
}

FitModel *fit_model_fit(const GpuSpec *gpu, const FitOp *ops, guint n_ops,
                        const double *const *weights, FitMode mode,
                        double power_limit_w, GError **error)
{
  g_return_val_if_fail(gpu != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  if (!fit_check_input(gpu, ops, n_ops, error))
    return NULL;
  if (mode == FIT_NONE)
    return fit_model_oob(gpu, ops, n_ops, power_limit_w, error);
  g_autoptr(FitModel) m = model_base(gpu, ops, n_ops, power_limit_w);
  m->mode = FIT_NONE;  /* model_time() below uses the catalogue's time */
  for (guint i = 0; i < n_ops; i++) {
    const FitOp *op = &ops[i];
    g_autofree double *tgt = g_new(double, op->n_points);
    const double *w = weights != NULL ? weights[i] : NULL;
    if (mode == FIT_TIME || mode == FIT_ALL) {
      for (guint j = 0; j < op->n_points; j++)
        tgt[j] = op->points[j].time_s;
    } else {
      /* The catalogue's curve at every point (no measurement but the
       * anchor), for the DRAM term's a_m and t0. */
      for (guint j = 0; j < op->n_points; j++)
        tgt[j] = model_time(m, i, op->points[j].sm_mhz,
                            op->points[j].mem_mhz);
      w = NULL;
    }
    if (!fit_time_op(m->gpu, op, tgt, w, &m->ops[i], error))
      return NULL;
    FitOpModel *om = &m->ops[i];
    om->mem_j = m->p_mem_w * om->a_m * om->t0_s;
    om->dyn_j = om->oob_dyn_j;
  }
  m->mode = mode;
  if ((mode == FIT_POWER || mode == FIT_ALL) &&
      !fit_power(m, ops, weights, error))
    return NULL;
  /* Training residuals. */
  double st = 0, se = 0, nw = 0;
  for (guint i = 0; i < n_ops; i++)
    for (guint j = 0; j < ops[i].n_points; j++) {
      double w = weights != NULL ? weights[i][j] : 1;
      if (!(w > 0))
        continue;
      const FitPoint *p = &ops[i].points[j];
      double t, e;
      fit_model_predict(m, i, p->sm_mhz, p->mem_mhz, &t, &e, NULL);
      st += w * pow(t / p->time_s - 1, 2);
      se += w * pow(e / p->energy_j - 1, 2);
      nw += w;
    }
  m->rms_rel_time = nw > 0 ? sqrt(st / nw) : 0;
  m->rms_rel_energy = nw > 0 ? sqrt(se / nw) : 0;
  return g_steal_pointer(&m);
}

GpuSpec *fit_model_to_gpu(const FitModel *m, const char *name,
                          const char *source)
{
  g_return_val_if_fail(m != NULL && name != NULL, NULL);
  GpuSpec *g = gpu_spec_copy(m->gpu);
  g_free(g->name);
  g->name = g_strdup(name);
  const char *src = g_intern_string(source != NULL ? source : "fit");
  if (m->mode == FIT_POWER || m->mode == FIT_ALL) {
    g->p_const_w = (GpuParam){m->p_const_w, src};
    g->p_leak_w = (GpuParam){m->p_leak_w, src};
    g->v_min = (GpuParam){m->v_ratio * g->v_max.v, src};
    g->f_knee_mhz = (GpuParam){m->f_knee_mhz, src};
    g->p_dyn_w = (GpuParam){g->p_dyn_w.v * m->dyn_scale, src};
    g_autofree char *d = g_strdup_printf(
        "%s (power model fitted: %s)",
        m->gpu->description != NULL ? m->gpu->description : m->gpu->name,
        src);
    g_free(g->description);
    g->description = g_steal_pointer(&d);
  }
  return g;
}

/* models/fit.c -- fitting the DVFS time/power model to a measured profile
 * and validating it on held-out clocks.
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
 * highest measured clock pair.  A kernel op (FIT_MIX_NONE) is one kernel of
 * its class without counters (class-default time fractions, gpu.c's
 * gpu_class_time_fractions).  A pipeline-stage op (Perseus forward or
 * backward) is a representative kernel mix: one transformer layer of GPT-3
 * 175B at TP 8, microbatch 1, sequence 2048, BF16 (the GEMMs, the two
 * attention batched GEMMs, softmax, dropout, layer norms, bias-GeLU,
 * bias-dropout-add; backward: dgrad and wgrad GEMMs with FP32 main_grad
 * accumulation, twice the attention work, the vector kernels' backward
 * traffic), each priced by gpu_kernel_cost with its FLOPs and bytes and
 * capped per kernel.  Time and energy are both scaled by the anchor ratio
 * (measured / model time at the top clock), so power is the model's own.
 * For other models than GPT-3 (Bloom) the mix is only representative: the
 * GEMM share of a layer is similar (same hidden size range), the
 * attention share differs with the head count.
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
 * Validation (fit_validate)
 * -------------------------
 * The distinct SM clocks of the profile are shuffled by the PCG stream
 * (seed, SIM_PCG_HOLDOUT, 0); a fraction is held out (at least 1, leaving
 * at least 2), or the shuffled clocks are dealt into k folds.  Every point
 * of a held-out clock is predicted by the model fitted on the others.
 * Errors are relative, pred/meas - 1.
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
#include "sim/pcg.h"

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
/* Small helpers                                                           */

static double top_mem(const GpuSpec *g)
{
  return g->mem_mhz[g->n_mem_clocks - 1].v;
}

static double eff_mem(const GpuSpec *g, guint m)
{
  return m > 0 ? (double)m : top_mem(g);
}

/* v = V(f)/V_max for a curve (ratio at and below knee, 1 at fmax). */
/* Solves the n x n system a x = b (n <= 3) by Gaussian elimination with
 * partial pivoting.  FALSE when (nearly) singular relative to the
 * diagonal. */
static gboolean solve_small(double a[3][3], double b[3], guint n, double x[3])
{
  double m[3][4];
  double scale = 0;
  for (guint i = 0; i < n; i++) {
    for (guint j = 0; j < n; j++)
      m[i][j] = a[i][j];
    m[i][n] = b[i];
    scale = MAX(scale, fabs(a[i][i]));
  }
  if (!(scale > 0))
    return FALSE;
  for (guint c = 0; c < n; c++) {
    guint piv = c;
    for (guint r = c + 1; r < n; r++)
      if (fabs(m[r][c]) > fabs(m[piv][c]))
        piv = r;
    if (fabs(m[piv][c]) < 1e-12 * scale)
      return FALSE;
    if (piv != c)
      for (guint j = 0; j <= n; j++) {
        double tmp = m[c][j];
        m[c][j] = m[piv][j];
        m[piv][j] = tmp;
      }
    for (guint r = c + 1; r < n; r++) {
      double f = m[r][c] / m[c][c];
      for (guint j = c; j <= n; j++)
        m[r][j] -= f * m[c][j];
    }
  }
  for (guint i = n; i-- > 0;) {
    double s = m[i][n];
    for (guint j = i + 1; j < n; j++)
      s -= m[i][j] * x[j];
    x[i] = s / m[i][i];
  }
  return TRUE;
}

/* NNLS with n <= 3 variables given the normal equations (G = X'X, g = X'y,
 * yy = y'y): the optimum is the unconstrained solution on its passive set,
 * so every subset is tried.  Returns the minimal objective ||y - X c||^2;
 * c receives the solution (zeros outside the passive set).  Returns -1 when
 * no subset is solvable. */
static double nnls_small(double G[3][3], const double g[3], double yy,
                         guint n, double c[3])
{
  double best = 0;
  gboolean found = FALSE;
  for (guint mask = 0; mask < (1u << n); mask++) {
    guint idx[3], k = 0;
    for (guint i = 0; i < n; i++)
      if (mask & (1u << i))
        idx[k++] = i;
    double a[3][3], b[3], x[3] = {0, 0, 0};
    for (guint i = 0; i < k; i++) {
      for (guint j = 0; j < k; j++)
        a[i][j] = G[idx[i]][idx[j]];
      b[i] = g[idx[i]];
    }
    if (k > 0 && !solve_small(a, b, k, x))
      continue;
    gboolean feasible = TRUE;
    for (guint i = 0; i < k; i++)
      if (x[i] < 0)
        feasible = FALSE;
    if (!feasible)
      continue;
    double full[3] = {0, 0, 0};
    for (guint i = 0; i < k; i++)
      full[idx[i]] = x[i];
    /* ||y - Xc||^2 = yy - 2 c'g + c'Gc */
    double obj = yy;
    for (guint i = 0; i < n; i++) {
      obj -= 2 * full[i] * g[i];
      for (guint j = 0; j < n; j++)
        obj += full[i] * G[i][j] * full[j];
    }
    obj = MAX(obj, 0); /* rounding */
    if (!found || obj < best - 1e-15 * fabs(yy)) {
      found = TRUE;
      best = obj;
      memcpy(c, full, sizeof full);
    }
  }
  return found ? best : -1;
}

/* ---------------------------------------------------------------------- */
/* The representative transformer-layer mix (out of the box)               */

typedef struct {
  GpuKernel k;
  double n;   /* launches per op run */
} MixKernel;

/* One GPT-3 175B layer at TP 8, b = 1, s = 2048, BF16 (see the header
 * comment).  Returns the number of kernels written to out (<= 32). */
static guint build_mix(FitMix mix, MixKernel *out)
{
  const double T = 2048, H = 12288, tp = 8, heads = 96, d = 128, B = 2;
  const double hp = H / tp, nh = heads / tp;
  guint n = 0;
  gboolean bwd = mix == FIT_MIX_BACKWARD;
#define ADD(cls, fl, by, tens, cnt)                                        \
  do {                                                                     \
    out[n].k.klass = (cls);                                                \
    out[n].k.flops = (fl);                                                 \
    out[n].k.bytes = (by);                                                 \
    out[n].k.tensor = (tens);                                              \
    out[n].n = (cnt);                                                      \
    n++;                                                                   \
  } while (0)
  /* GEMMs (M x K) x (K x N): 2MKN FLOPs, inputs and output once. */
  const double gemm[4][2] = {{H, 3 * hp}, {hp, H}, {H, 4 * hp}, {4 * hp, H}};
  for (int i = 0; i < 4; i++) {
    double K = gemm[i][0], N = gemm[i][1];
    double fl = 2 * T * K * N;
    double by = B * (T * K + K * N + T * N);
    ADD(SIM_CLASS_GEMM, fl, by, TRUE, 1);
    if (bwd) /* wgrad: FP32 main_grad read and written (8 B / weight) */
      ADD(SIM_CLASS_GEMM, fl, by + 8 * K * N, TRUE, 1);
  }
  /* Attention: QK^T and AV batched over nh heads. */
  double att_fl = 2 * nh * T * T * d;
  double att_by = B * (nh * T * T + 2 * T * hp);
  ADD(SIM_CLASS_ATTENTION, att_fl, att_by, TRUE, bwd ? 4 : 2);
  /* Vector kernels: DRAM traffic (read + write) per launch. */
  double rw = bwd ? 3 : 2;  /* backward reads the saved input too */
  double probs = nh * T * T;
  ADD(SIM_CLASS_SOFTMAX, 5 * probs, rw * B * probs, FALSE, 1);
  ADD(SIM_CLASS_ELEMENTWISE, probs, rw * B * probs + probs, FALSE, 1);
  ADD(SIM_CLASS_NORM, 8 * T * H, (rw * B + (bwd ? 4 : 0)) * T * H, FALSE, 2);
  ADD(SIM_CLASS_ELEMENTWISE, 3 * T * H, (rw + 1) * B * T * H + T * H, FALSE,
      2);
  ADD(SIM_CLASS_ELEMENTWISE, 10 * T * 4 * hp, rw * B * T * 4 * hp, FALSE, 1);
#undef ADD
  return n;
}

/* Out-of-box time and energy of one run before anchoring. */
static void oob_raw(const GpuSpec *g, SimOpClass klass, FitMix mix, guint sm,
                    guint mem, double limit, double *t, double *e)
{
  MixKernel ks[32];
  guint n;
  if (mix == FIT_MIX_NONE) {
    ks[0].k = (GpuKernel){klass, 0, 0, FALSE};
    ks[0].n = 1;
    n = 1;
  } else {
    n = build_mix(mix, ks);
  }
  double tt = 0, ee = 0;
  for (guint i = 0; i < n; i++) {
    GpuCost c;
    gpu_kernel_cost(g, &ks[i].k, sm, mem, limit, &c);
    tt += ks[i].n * c.time_s;
    ee += ks[i].n * c.time_s * c.power_w;
  }
  *t = tt;
  *e = ee;
}

/* The catalogue's D (dynamic energy at sm_max, top memory clock, uncapped,
 * where v = 1) before anchoring. */
static double oob_raw_dyn(const GpuSpec *g, SimOpClass klass, FitMix mix)
{
  MixKernel ks[32];
  guint n;
  if (mix == FIT_MIX_NONE) {
    ks[0].k = (GpuKernel){klass, 0, 0, FALSE};
    ks[0].n = 1;
    n = 1;
  } else {
    n = build_mix(mix, ks);
  }
  double d = 0;
  for (guint i = 0; i < n; i++) {
    GpuCost c;
    gpu_kernel_cost(g, &ks[i].k, (guint)lround(g->sm_max_mhz.v), 0,
                    GPU_POWER_UNCAPPED, &c);
    d += ks[i].n * g->p_dyn_w.v * g->activity[ks[i].k.klass].v *
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
  g_free(m->ops);
  g_free(m);
}

/* Index of the op's highest clock pair (memory first, then SM). */
static guint top_point(const GpuSpec *g, const FitOp *op)
{
  guint best = 0;
  for (guint j = 1; j < op->n_points; j++) {
    double mb = eff_mem(g, op->points[best].mem_mhz);
    double mj = eff_mem(g, op->points[j].mem_mhz);
    if (mj > mb || (mj == mb && op->points[j].sm_mhz > op->points[best].sm_mhz))
      best = j;
  }
  return best;
}

static gboolean check_input(const GpuSpec *g, const FitOp *ops, guint n_ops,
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
    om->mix = op->mix;
    const FitPoint *top = &op->points[top_point(g, op)];
    double t, e;
    oob_raw(g, op->klass, op->mix, top->sm_mhz, top->mem_mhz,
            m->power_limit_w, &t, &e);
    om->oob_scale = top->time_s / t;
    om->oob_dyn_j = om->oob_scale * oob_raw_dyn(g, op->klass, op->mix);
  }
  return m;
}

/* Out-of-box time/energy (anchored) at requested clocks; limit as given. */
static void oob_at(const FitModel *m, guint op, guint sm, guint mem,
                   double limit, double *t, double *e)
{
  const FitOpModel *om = &m->ops[op];
  oob_raw(m->gpu, om->klass, om->mix, sm, mem, limit, t, e);
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
                     om->a_m * top_mem(m->gpu) / mem + om->a_o);
}

/* Time function of the model's mode, uncapped. */
static double model_time(const FitModel *m, guint op, guint sm, guint mem)
{
  if (m->mode == FIT_TIME || m->mode == FIT_ALL)
    return form_time(m, &m->ops[op], sm, eff_mem(m->gpu, mem));
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
 * catalogue's, not fitted: it is 0 on every part with one memory clock. */
static double model_energy(const FitModel *m, guint op, double sm, guint mem,
                           double t)
{
  const FitOpModel *om = &m->ops[op];
  if (om->sat_mhz > 0 && sm > om->sat_mhz)
    sm = om->sat_mhz;
  double v = gpu_voltage_ratio(m->v_ratio, m->f_knee_mhz, m->gpu->sm_max_mhz.v,
                               m->gpu->v_curve_exp.v, sm);
  double mem_static = m->gpu->p_mem_static_w.v * eff_mem(m->gpu, mem) /
                      top_mem(m->gpu);
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
  if (!check_input(gpu, ops, n_ops, error))
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

/* Fits the single-op time form of op i to the targets tgt[j] (measured or
 * catalogue times at the op's points) with weights w[j] (NULL = 1).
 * Errors: too few distinct clocks. */
static gboolean fit_time_op(const GpuSpec *g, const FitOp *op,
                            const double *tgt, const double *w,
                            FitOpModel *om, GError **error)
{
  double f0 = g->sm_max_mhz.v, m0 = top_mem(g);
  /* Distinct training clocks. */
  guint n_sm = 0, n_mem = 0, n_pts = 0;
  guint sms[512], mems[8];
  guint fixed_mem = 0;
  for (guint j = 0; j < op->n_points; j++) {
    if (w != NULL && !(w[j] > 0))
      continue;
    n_pts++;
    guint s = op->points[j].sm_mhz, mm = (guint)eff_mem(g, op->points[j].mem_mhz);
    gboolean seen = FALSE;
    for (guint k = 0; k < MIN(n_sm, G_N_ELEMENTS(sms)); k++)
      seen = seen || sms[k] == s;
    if (!seen) {
      if (n_sm < G_N_ELEMENTS(sms))
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
  for (guint k = 0; k < MIN(n_sm, G_N_ELEMENTS(sms)); k++) {
    fmin_t = MIN(fmin_t, sms[k]);
    fmax_t = MAX(fmax_t, sms[k]);
  }
  double c[3] = {0, 0, 0};
  double best_bic = INFINITY, best_sat = 0;
  gboolean any = FALSE;
  for (guint cand = 0; cand <= MIN(n_sm, G_N_ELEMENTS(sms)); cand++) {
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
        x[1] = m0 / eff_mem(g, p->mem_mhz);
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
    double sse = nnls_small(G, gv, yy, nv, cc);
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
                          eff_mem(m->gpu, p->mem_mhz) / top_mem(m->gpu);
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
    obj = nnls_small(G, gv, yy, 2, c);
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

/* Nelder-Mead over (ratio, knee) within bounds, from x0 with steps s. */
static void nelder_mead(PowerFit *pf, double x[2], const double step[2],
                        const double lo[2], const double hi[2], double *fx)
{
  double p[3][2], f[3];
  for (int i = 0; i < 3; i++) {
    p[i][0] = x[0] + (i == 1 ? step[0] : 0);
    p[i][1] = x[1] + (i == 2 ? step[1] : 0);
    for (int k = 0; k < 2; k++)
      p[i][k] = CLAMP(p[i][k], lo[k], hi[k]);
    f[i] = power_objective(pf, p[i][0], p[i][1]);
  }
  for (int it = 0; it < 120; it++) {
    /* Order: 0 best, 2 worst. */
    for (int a = 0; a < 3; a++)
      for (int b = a + 1; b < 3; b++)
        if (f[b] < f[a]) {
          double tf = f[a];
          f[a] = f[b];
          f[b] = tf;
          for (int k = 0; k < 2; k++) {
            double tp = p[a][k];
            p[a][k] = p[b][k];
            p[b][k] = tp;
          }
        }
    double c[2], r[2];
    for (int k = 0; k < 2; k++) {
      c[k] = 0.5 * (p[0][k] + p[1][k]);
      r[k] = CLAMP(c[k] + (c[k] - p[2][k]), lo[k], hi[k]);
    }
    double fr = power_objective(pf, r[0], r[1]);
    if (fr < f[0]) {
      double e[2];
      for (int k = 0; k < 2; k++)
        e[k] = CLAMP(c[k] + 2 * (c[k] - p[2][k]), lo[k], hi[k]);
      double fe = power_objective(pf, e[0], e[1]);
      if (fe < fr) {
        memcpy(p[2], e, sizeof e);
        f[2] = fe;
      } else {
        memcpy(p[2], r, sizeof r);
        f[2] = fr;
      }
    } else if (fr < f[1]) {
      memcpy(p[2], r, sizeof r);
      f[2] = fr;
    } else {
      double q[2];
      for (int k = 0; k < 2; k++)
        q[k] = c[k] + 0.5 * (p[2][k] - c[k]);
      double fq = power_objective(pf, q[0], q[1]);
      if (fq < f[2]) {
        memcpy(p[2], q, sizeof q);
        f[2] = fq;
      } else {
        for (int i = 1; i < 3; i++) {
          for (int k = 0; k < 2; k++)
            p[i][k] = p[0][k] + 0.5 * (p[i][k] - p[0][k]);
          f[i] = power_objective(pf, p[i][0], p[i][1]);
        }
      }
    }
    if (fabs(p[2][0] - p[0][0]) < 1e-7 && fabs(p[2][1] - p[0][1]) < 1e-4)
      break;
  }
  int best = 0;
  for (int i = 1; i < 3; i++)
    if (f[i] < f[best])
      best = i;
  x[0] = p[best][0];
  x[1] = p[best][1];
  *fx = f[best];
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
  double fx;
  nelder_mead(&pf, x, step, lo, hi, &fx);
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
  if (!check_input(gpu, ops, n_ops, error))
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

/* ---------------------------------------------------------------------- */
/* Validation                                                              */

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

FitReport *fit_validate(const GpuSpec *gpu, const FitOp *ops, guint n_ops,
                        const FitOptions *opt, GError **error)
{
  g_return_val_if_fail(gpu != NULL && opt != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  if (!check_input(gpu, ops, n_ops, error))
    return NULL;
  if ((guint)opt->mode > FIT_ALL) {
    g_set_error(error, FIT_ERROR, FIT_ERROR_INVALID, "unknown fit mode %d",
                (int)opt->mode);
    return NULL;
  }
  /* The distinct SM clocks, sorted, then shuffled. */
  g_autoptr(GArray) clocks = g_array_new(FALSE, FALSE, sizeof(guint));
  {
    g_autoptr(GHashTable) seen = g_hash_table_new(g_direct_hash, g_direct_equal);
    for (guint i = 0; i < n_ops; i++)
      for (guint j = 0; j < ops[i].n_points; j++) {
        guint s = ops[i].points[j].sm_mhz;
        if (g_hash_table_add(seen, GUINT_TO_POINTER(s)))
          g_array_append_val(clocks, s);
      }
  }
  g_array_sort(clocks, cmp_uint);
  guint nc = clocks->len;
  g_autoptr(FitReport) r = g_new0(FitReport, 1);
  r->mode = opt->mode;
  r->n_clocks = nc;
  r->rows = g_array_new(FALSE, TRUE, sizeof(FitRow));
  r->summary = g_array_new(FALSE, TRUE, sizeof(FitSummary));
  r->oob = fit_model_oob(gpu, ops, n_ops, opt->power_limit_w, error);
  if (r->oob == NULL)
    return NULL;

  /* Fold of each clock: holdout = fold 0 held out, others training. */
  guint folds = 0;
  g_autoptr(GHashTable) fold_of = g_hash_table_new(g_direct_hash, g_direct_equal);
  if (opt->mode != FIT_NONE) {
    if (nc < 3) {
      g_set_error(error, FIT_ERROR, FIT_ERROR_TOO_FEW,
                  "the profile has %u distinct SM clock%s (%u MHz%s): "
                  "fitting and holding out clocks needs at least 3",
                  nc, nc == 1 ? "" : "s", g_array_index(clocks, guint, 0),
                  nc > 1 ? ", ..." : "");
      return NULL;
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
      folds = opt->folds;
      if (folds > nc || nc - (nc + folds - 1) / folds < 2) {
        g_set_error(error, FIT_ERROR, FIT_ERROR_INVALID,
                    "--folds %u: the profile has %u SM clocks; each fold "
                    "must leave at least 2 to train on",
                    folds, nc);
        return NULL;
      }
      for (guint i = 0; i < nc; i++)
        g_hash_table_insert(fold_of, GUINT_TO_POINTER(shuf[i]),
                            GUINT_TO_POINTER(i % folds));
      r->n_heldout_clocks = nc;
    } else {
      if (!(opt->holdout > 0 && opt->holdout < 1)) {
        g_set_error(error, FIT_ERROR, FIT_ERROR_INVALID,
                    "holdout fraction %g must be in (0, 1)", opt->holdout);
        return NULL;
      }
      long k = lround(opt->holdout * nc);
      k = CLAMP(k, 1, (long)nc - 2);
      for (guint i = 0; i < nc; i++)
        g_hash_table_insert(fold_of, GUINT_TO_POINTER(shuf[i]),
                            GUINT_TO_POINTER(i < (guint)k ? 0 : 1));
      r->n_heldout_clocks = (guint)k;
    }
  }
  r->folds = folds;

  /* Rows with out-of-box predictions. */
  for (guint i = 0; i < n_ops; i++)
    for (guint j = 0; j < ops[i].n_points; j++) {
      const FitPoint *p = &ops[i].points[j];
      FitRow row = {0};
      row.op = i;
      row.sm_mhz = p->sm_mhz;
      row.mem_mhz = (guint)eff_mem(gpu, p->mem_mhz);
      row.time_s = p->time_s;
      row.energy_j = p->energy_j;
      fit_model_predict(r->oob, i, p->sm_mhz, p->mem_mhz, &row.oob_time_s,
                        &row.oob_energy_j, NULL);
      if (opt->mode == FIT_NONE) {
        row.heldout = TRUE;
        row.fit_time_s = row.oob_time_s;
        row.fit_energy_j = row.oob_energy_j;
      } else {
        row.fold = GPOINTER_TO_UINT(
            g_hash_table_lookup(fold_of, GUINT_TO_POINTER(p->sm_mhz)));
        row.heldout = folds > 0 || row.fold == 0;
        if (folds == 0)
          row.fold = 0;
      }
      g_array_append_val(r->rows, row);
    }

  /* Fit per fold and predict. */
  if (opt->mode != FIT_NONE) {
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
      return NULL;
    r->fitted_all = fit_model_fit(gpu, ops, n_ops, NULL, opt->mode,
                                  opt->power_limit_w, error);
    if (r->fitted_all == NULL)
      return NULL;
  }

  /* Summaries: per op, then overall. */
  ErrAcc all_o = {0}, all_f = {0}, all_oa = {0};
  guint k = 0;
  /* Overall curve: sums over ops at clock pairs every op has. */
  g_autoptr(GHashTable) sums = g_hash_table_new_full(g_int64_hash, g_int64_equal,
                                                     g_free, g_free);
  for (guint i = 0; i < n_ops; i++) {
    ErrAcc ao = {0}, af = {0}, aoa = {0};
    g_autofree Curve *c = g_new(Curve, ops[i].n_points);
    for (guint j = 0; j < ops[i].n_points; j++, k++) {
      const FitRow *row = &g_array_index(r->rows, FitRow, k);
      err_add(&aoa, row->oob_time_s, row->time_s, row->oob_energy_j,
              row->energy_j);
      err_add(&all_oa, row->oob_time_s, row->time_s, row->oob_energy_j,
              row->energy_j);
      if (row->heldout) {
        err_add(&ao, row->oob_time_s, row->time_s, row->oob_energy_j,
                row->energy_j);
        err_add(&af, row->fit_time_s, row->time_s, row->fit_energy_j,
                row->energy_j);
        err_add(&all_o, row->oob_time_s, row->time_s, row->oob_energy_j,
                row->energy_j);
        err_add(&all_f, row->fit_time_s, row->time_s, row->fit_energy_j,
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
      s->e += ops[i].count * row->energy_j;
      s->eo += ops[i].count * row->oob_energy_j;
      s->ef += ops[i].count * row->fit_energy_j;
    }
    FitSummary sm = {0};
    sm.name = g_strdup(ops[i].name);
    sm.oob = err_get(&ao);
    sm.fit = err_get(&af);
    sm.oob_all = err_get(&aoa);
    curve_summary(c, ops[i].n_points, &sm);
    g_array_append_val(r->summary, sm);
  }
  /* Clock pairs present in every op. */
  g_autoptr(GArray) common = g_array_new(FALSE, FALSE, sizeof(Curve));
  {
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
                (guint)eff_mem(gpu, ops[i].points[j].mem_mhz) == s->mem;
        everywhere = has;
      }
      if (everywhere)
        g_array_append_val(common, *s);
    }
  }
  /* Deterministic order (hash iteration order is not). */
  g_array_sort(common, cmp_curve);
  FitSummary ov = {0};
  ov.name = g_strdup("overall");
  ov.oob = err_get(&all_o);
  ov.fit = err_get(&all_f);
  ov.oob_all = err_get(&all_oa);
  curve_summary((const Curve *)common->data, common->len, &ov);
  g_array_append_val(r->summary, ov);
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

gboolean fit_bootstrap_multi(const GpuSpec *gpu, const FitOp *ops,
                             guint n_ops, FitMode mode, double power_limit_w,
                             guint samples, double level, guint64 seed,
                             guint n_values, FitWhatIfMulti fn, gpointer data,
                             FitInterval *out, GError **error)
{
  g_return_val_if_fail(gpu != NULL && fn != NULL && out != NULL, FALSE);
  g_return_val_if_fail(n_values >= 1, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
  if (samples < 2 || !(level > 0 && level < 1)) {
    g_set_error(error, FIT_ERROR, FIT_ERROR_INVALID,
                "bootstrap: samples (%u) must be >= 2 and level (%g) in "
                "(0, 1)",
                samples, level);
    return FALSE;
  }
  memset(out, 0, n_values * sizeof *out);
  g_autoptr(FitModel) full =
      fit_model_fit(gpu, ops, n_ops, NULL, mode, power_limit_w, error);
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
    sim_pcg_for_entity(&rng, seed, SIM_PCG_HOLDOUT, 1 + (guint64)b);
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
        fit_model_fit(gpu, ops, n_ops, (const double *const *)w, mode,
                      power_limit_w, error);
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

/* Adapts a one-value what-if to the multi-value form. */
typedef struct {
  FitWhatIf fn;
  gpointer data;
} Single;

static gboolean single_eval(const FitModel *m, gpointer data, double *values,
                            GError **error)
{
  Single *s = data;
  return s->fn(m, s->data, values, error);
}

gboolean fit_bootstrap(const GpuSpec *gpu, const FitOp *ops, guint n_ops,
                       FitMode mode, double power_limit_w, guint samples,
                       double level, guint64 seed, FitWhatIf fn,
                       gpointer data, FitInterval *out, GError **error)
{
  g_return_val_if_fail(fn != NULL, FALSE);
  Single s = {fn, data};
  return fit_bootstrap_multi(gpu, ops, n_ops, mode, power_limit_w, samples,
                             level, seed, 1, single_eval, &s, out, error);
}

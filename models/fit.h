/* models/fit.h -- fitting the time/power model to measured profiles, and
 * validating it on held-out clocks.
 *
 * The equations, the fitting algorithm and its limits are in models/fit.c.
 * This module knows nothing of file formats (models/ may not include
 * traces/): callers convert a loaded profile into FitOp records (lua/
 * validate.c does it for traces/profile.h profiles).
 */
#ifndef MODELS_FIT_H
#define MODELS_FIT_H

#include <glib.h>
#include "models/gpu.h"

G_BEGIN_DECLS

/* One kernel of an op's representative mix and its launches per run of
 * the op (the out-of-box model of a pipeline-stage op prices each with
 * gpu_kernel_cost).  The caller fills the mix: models/ knows no workload;
 * traces/profile.c's profile_op_kernels gives a Perseus stage op the
 * generator's layer mix (gpt_layer_kernels). */
typedef struct {
  GpuKernel kernel;
  double count;
} FitKernel;

/* One measured point: time and energy of one run of the op. */
typedef struct {
  guint sm_mhz;
  guint mem_mhz;      /* 0 = the GPU's highest memory clock */
  double time_s;      /* > 0 */
  double energy_j;    /* > 0 */
} FitPoint;

/* One measured op (a pipeline computation or a kernel). */
typedef struct {
  const char *name;        /* borrowed */
  SimOpClass klass;        /* out-of-box model when n_kernels == 0 */
  double count;            /* weight in the overall figures, > 0 */
  const FitPoint *points;  /* borrowed, n_points, distinct clock pairs */
  guint n_points;
  const FitKernel *kernels; /* borrowed, n_kernels: the op's kernel mix
                               for the out-of-box model; NULL (0) = one
                               kernel of klass without counters, with the
                               class-default time fractions */
  guint n_kernels;
} FitOp;

typedef enum {
  FIT_NONE = 0,  /* out-of-box only */
  FIT_TIME,      /* time coefficients fitted; power from the catalogue */
  FIT_POWER,     /* power parameters fitted; time from the catalogue */
  FIT_ALL        /* both */
} FitMode;

/* Names "none", "time", "power", "all"; -1 for an unknown name. */
const char *fit_mode_name(FitMode m);
int fit_mode_from_name(const char *s);

/* The fitted model of one op.  Time: t(f, m) = t0 (a_c f0/f + a_m m0/m +
 * a_o) with f0 = sm_max, m0 = the GPU's highest memory clock, evaluated at
 * f = min(requested, sat_mhz).  Energy of one run (uncapped): E = t
 * (P_const + P_leak v^3) + dyn_j v^2 + mem_j with v = V(f)/V_max
 * (models/fit.c). */
typedef struct {
  double t0_s, a_c, a_m, a_o;
  double sat_mhz;    /* saturation clock: the op runs at min(f, sat_mhz)
                        (the power cap's effect inside the op, fitted);
                        0 = none */
  double dyn_j;      /* P_dyn x activity x a_c x t0 */
  double mem_j;      /* P_mem x a_m x t0 */
  /* Out-of-box model of the op (catalogue only): */
  SimOpClass klass;
  FitKernel *kernels;  /* owned copy of the op's mix, n_kernels (may be 0) */
  guint n_kernels;
  double oob_scale;  /* measured time at the top clock / model time there */
  double oob_dyn_j;  /* the catalogue's dyn_j for this op */
} FitOpModel;

/* A fitted (or out-of-box) model of a set of ops on one GPU. */
typedef struct {
  GpuSpec *gpu;          /* owned copy of the base catalogue entry */
  FitMode mode;          /* what was fitted (FIT_NONE: out-of-box) */
  double power_limit_w;  /* cap applied in predictions */
  /* GPU power parameters in force (fitted or the catalogue's): */
  double p_const_w, p_leak_w, p_mem_w;
  double v_ratio;        /* v_min / v_max */
  double f_knee_mhz;
  double dyn_scale;      /* sum dyn_j / sum oob_dyn_j (count-weighted) */
  double rms_rel_time;   /* RMS relative residual on the training points */
  double rms_rel_energy;
  guint n_ops;
  FitOpModel *ops;       /* owned, n_ops */
} FitModel;

/* The out-of-box model: the catalogue entry alone, each op anchored at its
 * measured time at its highest (memory, SM) clock pair.  power_limit_w <= 0
 * means the GPU's default.  Errors: no ops, an op without points, a clock
 * outside the GPU's range (FIT_ERROR_INVALID). */
FitModel *fit_model_oob(const GpuSpec *gpu, const FitOp *ops, guint n_ops,
                        double power_limit_w, GError **error);

/* Fits `mode` on the points whose weight is > 0 (weights[i][j] for point j
 * of op i: 0 = held out, k = used k times; NULL = every point once).
 * FIT_ERROR_TOO_FEW when an op has fewer than 2 distinct training SM clocks
 * (3 clock pairs when its memory clock varies) or the power fit has fewer
 * than 3 distinct training SM clocks in all.  Caller owns the model. */
FitModel *fit_model_fit(const GpuSpec *gpu, const FitOp *ops, guint n_ops,
                        const double *const *weights, FitMode mode,
                        double power_limit_w, GError **error);

void fit_model_free(FitModel *m);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FitModel, fit_model_free)

/* Time and energy of one run of op `op` at requested clocks (sm, mem; mem 0
 * = highest), after the power cap.  *sm_run (may be NULL) receives the SM
 * clock actually run. */
void fit_model_predict(const FitModel *m, guint op, guint sm_mhz,
                       guint mem_mhz, double *time_s, double *energy_j,
                       guint *sm_run);

/* A catalogue entry with the model's power parameters: the base GPU with
 * p_const_w, p_leak_w, v_min (= v_ratio x v_max), f_knee_mhz fitted and
 * p_dyn_w scaled by dyn_scale; `source` (copied) is recorded on each.
 * Caller owns it.  Time coefficients are per op and not part of it. */
GpuSpec *fit_model_to_gpu(const FitModel *m, const char *name,
                          const char *source);

/* ---- Validation --------------------------------------------------------- */

typedef struct {
  FitMode mode;
  double holdout;        /* fraction of the SM clocks held out (0, 1) */
  guint folds;           /* >= 2: k-fold over SM clocks instead */
  guint64 seed;          /* PCG stream SIM_PCG_HOLDOUT of this seed */
  double power_limit_w;  /* <= 0: the GPU's default */
} FitOptions;

/* One measured point with both predictions. */
typedef struct {
  guint op;
  guint sm_mhz, mem_mhz;
  gboolean heldout;      /* not used to fit the model that predicted it */
  guint fold;            /* k-fold: its fold; holdout: 0 */
  double time_s, energy_j;          /* measured */
  double oob_time_s, oob_energy_j;  /* out of the box */
  double fit_time_s, fit_energy_j;  /* fitted */
} FitRow;

/* Relative errors (pred / meas - 1) over a set of points. */
typedef struct {
  guint n;
  double time_mape, time_max, time_bias;      /* fractions, not % */
  double energy_mape, energy_max, energy_bias;
} FitErr;

typedef struct {
  char *name;            /* owned; "overall" for the last entry */
  FitErr oob;            /* out of the box, on the held-out points */
  FitErr fit;            /* fitted, on the held-out points */
  FitErr oob_all;        /* out of the box, on every point */
  /* Minimum-energy clock (SM, memory) measured and predicted, over the
   * op's measured points (overall: of the count-weighted sum over ops at
   * the clock pairs every op has). */
  guint min_sm_meas, min_mem_meas, min_sm_oob, min_sm_fit;
  /* Energy saving 1 - E(min)/E(top) at the measured minimum-energy clock
   * pair against the highest clock pair: measured, out of the box, fitted. */
  double saving_meas, saving_oob, saving_fit;
  /* Measured energy at the predicted minimum-energy clock pair over the
   * measured minimum, minus 1: what following the prediction costs. */
  double regret_oob, regret_fit;
} FitSummary;

typedef struct {
  FitMode mode;
  guint folds;           /* 0 for a single holdout split */
  guint n_heldout_clocks, n_clocks;
  GArray *rows;          /* FitRow, op by op, points in op order */
  GArray *summary;       /* FitSummary, n_ops entries then "overall" */
  FitModel *oob;         /* owned */
  FitModel *fitted_all;  /* fitted on every point (for --save-gpu); NULL
                            for FIT_NONE */
} FitReport;

/* Out-of-box and fitted predictions of every point, the fitted ones on held
 * out clocks.  Errors: as fit_model_fit, plus FIT_ERROR_INVALID for
 * options out of range or too few clocks to hold any out. */
FitReport *fit_validate(const GpuSpec *gpu, const FitOp *ops, guint n_ops,
                        const FitOptions *opt, GError **error);
void fit_report_free(FitReport *r);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FitReport, fit_report_free)

/* ---- Uncertainty -------------------------------------------------------- */

typedef struct {
  double estimate;   /* on the model fitted to every point */
  double lo, hi;     /* percentile interval at `level` over the resamples */
  double mean, sd;   /* of the resampled values */
  guint samples;
} FitInterval;

/* What to refit and how often. */
typedef struct {
  FitMode mode;
  double power_limit_w;  /* <= 0: the GPU's default */
  guint samples;         /* resamples, >= 2 */
  double level;          /* of the interval, in (0, 1): 0.9 for 5-95% */
  guint64 seed;          /* resample b draws from PCG stream
                            SIM_PCG_HOLDOUT/1+b of this seed */
} FitBootstrapOptions;

/* A what-if evaluated on a model: fills values[0..n_values) and returns
 * TRUE, or FALSE with error (the bootstrap stops and passes it on). */
typedef gboolean (*FitWhatIf)(const FitModel *m, gpointer data,
                              double *values, GError **error);

/* Bootstrap: refits opt->mode on opt->samples resamples of the profile
 * (each op's points drawn with replacement; a draw with too few distinct
 * clocks is redrawn) and evaluates fn on the model fitted to every point
 * (the estimate) and on each resample's.  A what-if with several outputs
 * (energy and time of one simulation) gets them all from the same
 * resamples: out, n_values long and the caller's, receives one interval
 * per output.  FALSE with an error for options out of range
 * (FIT_ERROR_INVALID), a failed fit or fn's error.  Deterministic for a
 * seed. */
gboolean fit_bootstrap(const GpuSpec *gpu, const FitOp *ops, guint n_ops,
                       const FitBootstrapOptions *opt, guint n_values,
                       FitWhatIf fn, gpointer data, FitInterval *out,
                       GError **error);

#define FIT_ERROR (fit_error_quark())
GQuark fit_error_quark(void);
typedef enum {
  FIT_ERROR_INVALID,   /* bad input or options */
  FIT_ERROR_TOO_FEW    /* not enough distinct clocks to fit */
} FitError;

G_END_DECLS

#endif

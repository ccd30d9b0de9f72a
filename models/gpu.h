/* models/gpu.h -- GPU catalogue and the time/power model under DVFS.
 *
 * See models/gpu.c for the equations, parameters, calibration sources and
 * known limits.  Every numeric parameter of a catalogue entry carries the
 * source of its value (a published figure or a fit to shared data).
 */
#ifndef MODELS_GPU_H
#define MODELS_GPU_H

#include <glib.h>
#include "sim/workload.h"

G_BEGIN_DECLS

#define GPU_MAX_MEM_CLOCKS 8
#define GPU_VCURVE_POINTS 8

/* A number and where it came from. */
typedef struct {
  double v;
  const char *source;  /* static string: "A100 datasheet", "fit: perseus ..." */
} GpuParam;

typedef struct {
  char *name;                 /* "A100-SXM4-80GB" (owned) */
  char *description;          /* owned */
  /* Clocks */
  GpuParam sm_min_mhz, sm_max_mhz, sm_step_mhz;
  GpuParam sm_default_mhz;    /* what "auto" asks for (max boost) */
  guint n_mem_clocks;
  GpuParam mem_mhz[GPU_MAX_MEM_CLOCKS]; /* ascending; last = default */
  /* Throughput */
  GpuParam n_sm;
  GpuParam tensor_flop_per_clk_sm;   /* dense BF16 FLOP/clock/SM */
  GpuParam vector_flop_per_clk_sm;   /* FP32 (CUDA core) FLOP/clock/SM */
  GpuParam mem_bw_gbps;              /* DRAM bandwidth (GB/s) at max mem clk */
  /* Achievable fractions of peak, per op class (roofline efficiencies). */
  GpuParam eff_compute[SIM_CLASS_COUNT];
  GpuParam eff_memory[SIM_CLASS_COUNT];
  /* Power */
  GpuParam power_limit_w, power_min_w, power_max_w;
  GpuParam idle_power_w, blocked_power_w, comm_power_w;
  GpuParam p_const_w;        /* always-on board power while active */
  GpuParam p_mem_w;          /* DRAM power at full memory activity, max clk */
  GpuParam p_dyn_w;          /* SM dynamic power at full activity, f_max, V_max */
  GpuParam p_leak_w;         /* leakage at V_max */
  GpuParam v_min, v_max;     /* volts */
  GpuParam f_knee_mhz;       /* V flat (v_min) below, linear to v_max above */
  GpuParam switch_latency_ms;
  /* Per-class activity factors (how hard a class drives the SMs). */
  GpuParam activity[SIM_CLASS_COUNT];
  /* Refinements of the time and power model, each optional (0 = feature
   * off, so a zero-filled spec from a caller that does not know these
   * fields still validates): */
  GpuParam mem_issue_bytes_per_clk_sm; /* DRAM traffic the SMs (and the L2,
                                          in the SM clock domain) sustain per
                                          SM clock; sets the SM clock below
                                          which memory-bound kernels slow */
  GpuParam kernel_overhead_us;         /* launch + tail per kernel */
  GpuParam tf32_flop_per_clk_sm;       /* dense TF32 tensor FLOP/clock/SM;
                                          0: half the BF16 rate (as on
                                          every part since Ampere) */
  GpuParam fp8_flop_per_clk_sm;        /* dense FP8 tensor FLOP/clock/SM;
                                          0: no FP8 tensor cores (before
                                          Ada and Hopper) */
  GpuParam fp8_gemm_eff_ratio;         /* an FP8 GEMM's compute efficiency
                                          over eff_compute.gemm (a BF16
                                          one's); 0: 1, the same fraction
                                          of the FP8 peak */
  GpuParam p_mem_static_w;             /* memory interface power at the
                                          top memory clock whatever the
                                          traffic (PHY, DLL, termination),
                                          drawn by kernels that touch DRAM
                                          (a kernel with none leaves it in
                                          power-down); scales with m/m_max */
  GpuParam v_curve_exp;                /* shape of V(f) above the knee:
                                          V = v_min + (v_max - v_min) x^exp,
                                          x = (f - knee) / (f_max - knee);
                                          0 (or 1): linear */
  GpuParam stall_activity;             /* SM switching power of a clocked
                                          but stalled SM (resident warps
                                          waiting on memory: clock tree,
                                          schedulers), as a fraction of the
                                          issuing power; 0: none */
  GpuParam activity_tf32;              /* switching power per clock of a
                                          TF32 tensor kernel relative to the
                                          same class at the 16-bit rate
                                          (half the FLOPs per clock, 4-byte
                                          operands): scales activity[c] of
                                          SIM_MATH_TF32 kernels; 0: 1 */
  /* The driver's boost controller (the cluster's boost = "controller";
   * sim/engine.c): it averages board power with this time constant,
   * decides once per period and moves the SM clock by one step.
   * 0: the defaults below. */
  GpuParam boost_window_ms, boost_period_ms, boost_step_mhz;
  /* The datasheet's dense BF16 tensor peak (FP16 on parts without BF16),
   * TFLOP/s: the peak papers divide by for MFU (model FLOPs
   * utilisation).  It is quoted at the boost clock, which on the H100 is
   * 1830 MHz, not the 1980 MHz the SM clock reaches (989, not 1071
   * TFLOP/s).  0: not known; gpu_mfu_peak_flops then derives it. */
  GpuParam dense_bf16_tflops;
  /* GPU memory (GB = 1e9 bytes) a job's tensors must fit in
   * (traces/gpt_memory.h); 0: unknown, nothing is checked. */
  GpuParam memory_gb;
} GpuSpec;

/* Controller defaults for a spec that leaves them 0. */
#define GPU_BOOST_WINDOW_MS 25.0
#define GPU_BOOST_PERIOD_MS 5.0

/* Passed as power_limit_w to gpu_kernel_cost: no power cap at all (e.g. for
 * reference durations "at max clocks, uncapped"). */
#define GPU_POWER_UNCAPPED G_MAXDOUBLE

/* What the model needs to know about a kernel. */
typedef struct {
  SimOpClass klass;
  double flops;        /* 0 = unknown */
  double bytes;        /* 0 = unknown */
  guint tensor;        /* SimMath: 0 CUDA cores (FP32), 1 tensor cores at
                          the 16-bit rate, 2 tensor cores at the TF32 rate */
} GpuKernel;

/* The price of a kernel at given clocks. */
typedef struct {
  double time_s;       /* duration */
  double power_w;      /* board power while it runs */
  double util_compute; /* 0..1 */
  double util_memory;  /* 0..1 */
  guint sm_mhz;        /* SM clock actually run (after the power cap) */
  guint mem_mhz;
  gboolean capped;     /* TRUE when the power limit lowered the SM clock */
} GpuCost;

/* Catalogue (embedded; extensible at run time through a GpuCatalogue). */
typedef struct GpuCatalogue GpuCatalogue;
/* A catalogue of the built-in entries only; pure (no environment, no
 * files).  $JOULESIM_GPU_PATH's entries are added by the callers that want
 * them with gpu_catalogue_load_path (models/gpufile.h): the CLI does. */
GpuCatalogue *gpu_catalogue_new(void);
void gpu_catalogue_free(GpuCatalogue *c);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(GpuCatalogue, gpu_catalogue_free)
/* Borrowed pointer, or NULL with an error listing the known names. */
const GpuSpec *gpu_catalogue_lookup(const GpuCatalogue *c, const char *name,
                                    GError **error);
/* "Did you mean" for an unknown name among names[0..n) (a GPU's, a
 * model's): "'A', 'B'" (owned by the caller), or NULL when none is near. */
char *gpu_suggest_name(const char *name, const char *const *names, guint n);
/* Names in catalogue order (borrowed strings; free the array only). */
GPtrArray *gpu_catalogue_names(const GpuCatalogue *c);
/* Adds (copying) or replaces an entry. */
gboolean gpu_catalogue_define(GpuCatalogue *c, const GpuSpec *spec,
                              GError **error);
/* The embedded entries (models/catalogue.c): a borrowed static array of *n
 * specs whose strings are literals.  gpu_catalogue_new() copies them. */
const GpuSpec *gpu_builtin_specs(guint *n);

/* What a parameter's value rests on, read from its source text by the
 * catalogue's convention (models/catalogue.c): a source that begins with
 * "fit" is a fit to the data it names, one that begins with "estimate" an
 * estimate; anything else is given (a published or derived figure, a
 * definition, a term not modelled). */
typedef enum {
  GPU_BASIS_GIVEN,
  GPU_BASIS_FITTED,
  GPU_BASIS_ESTIMATED
} GpuBasis;
GpuBasis gpu_param_basis(const GpuParam *p);
const char *gpu_basis_name(GpuBasis b); /* "given", "fitted", "estimated" */

/* The power terms a fit determines (docs/gpu-model.md, "The fit"), by
 * gpu_spec_param name, i = 0, 1, ... until NULL: what a GPU's power
 * model rests on. */
const char *gpu_power_term_name(guint i);

/* A held-out check of a built-in entry's power model: measured data it
 * was not fitted to, in the record of docs/fidelity-record.csv. */
typedef struct {
  const char *gpu;         /* the entry's name */
  const char *data;        /* the data held out and what it showed */
  double min_limit_w;      /* the lowest power limit down to which the
                              check holds (W); 0: no cap was checked */
} GpuCheck;

/* The held-out check of g's power model, or NULL: g must be the built-in
 * entry of its name with the same default limit and power terms (values
 * and sources), for the check was made on those.  Borrowed, static. */
const GpuCheck *gpu_heldout_check(const GpuSpec *g);

/* The power limit, as a fraction of a GPU's default limit, down to which
 * capping was checked on every GPU whose check covers caps: the largest
 * min_limit_w / power_limit_w over the built-in checks (0.75). */
double gpu_checked_limit_fraction(void);

/* Deep copy (caller owns it).  Source strings are interned
 * (g_intern_string), so a copy never borrows them from the original. */
GpuSpec *gpu_spec_copy(const GpuSpec *s);
void gpu_spec_free(GpuSpec *s);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(GpuSpec, gpu_spec_free)
/* Checks ranges (clocks ascending, powers positive, ...). */
gboolean gpu_spec_validate(const GpuSpec *s, GError **error);

/* Named access to a parameter, for bindings and tools: "sm_max_mhz",
 * "mem_mhz.0", "eff_compute.gemm", "activity.softmax", ... (the names
 * gpu_spec_describe prints).  Borrowed pointer into s, or NULL. */
GpuParam *gpu_spec_param(GpuSpec *s, const char *field);
/* The names of the scalar parameters (i = 0, 1, ... until NULL) and of the
 * per-class arrays ("eff_compute", ...; a = 0, 1, ... until NULL), in the
 * order gpu_spec_describe prints them: the one list every reader and
 * writer of specs iterates. */
const char *gpu_spec_scalar_name(guint i);
const char *gpu_spec_array_name(guint a);
/* Lower-case class name used in parameter names ("gemm", "norm", ...): the
 * workload's own (sim_class_name). */
const char *gpu_class_name(SimOpClass c);

/* The SM clock grid: sm_min + i * step, i = 0 .. gpu_sm_n_steps() - 1. */
guint gpu_sm_n_steps(const GpuSpec *g);
guint gpu_sm_clock_at(const GpuSpec *g, guint i);

/* Default time fractions of a kernel of class c without FLOP/byte counters
 * (a_c + a_m + a_o = 1): see gpu_kernel_cost. */
void gpu_class_time_fractions(SimOpClass c, double *a_c, double *a_m,
                              double *a_o);

/* Memory knee: the SM clock (MHz, not snapped) at which the SM-side issue
 * rate equals the DRAM bandwidth at memory clock mem_mhz (0 = default).
 * Above it a streaming kernel is within ~9% of its max-clock speed, below it
 * its time grows ~1/f.  0 when the spec has no SM-side limit. */
double gpu_memory_knee_mhz(const GpuSpec *g, guint mem_mhz);

/* Peak dense tensor throughput at SM clock f (FLOP/s). */
double gpu_peak_tensor_flops(const GpuSpec *g, double sm_mhz);
/* The denominator of MFU, FLOP/s: the datasheet's dense BF16 peak
 * (dense_bf16_tflops), or when unknown gpu_peak_tensor_flops at
 * sm_max_mhz.  *datasheet (optional): which one it is. */
double gpu_mfu_peak_flops(const GpuSpec *g, gboolean *datasheet);
/* FLOP per clock per SM on math unit `math` (SimMath): the vector, BF16
 * tensor, TF32 tensor rate (tf32_flop_per_clk_sm, else half the BF16
 * rate) or FP8 tensor rate (fp8_flop_per_clk_sm; on a part without FP8,
 * where only a replay of a foreign trace asks for it, the 16-bit rate:
 * what the GEMM would run at there). */
double gpu_flop_per_clk_sm(const GpuSpec *g, guint math);
/* The SM activity that prices kernel k's dynamic power: its class's
 * activity[], times activity_tf32 when it runs on the TF32 tensor rate. */
double gpu_kernel_activity(const GpuSpec *g, const GpuKernel *k);
/* Voltage at SM clock f: v_min up to the knee, then rising as x^exp to
 * v_max at f_max (linear when v_curve_exp is 0 or 1). */
double gpu_voltage(const GpuSpec *g, double sm_mhz);
/* The same curve as a ratio V / v_max, from its parameters (for fitting
 * code that varies them): v_min / v_max, knee, f_max, exponent (0 = 1). */
double gpu_voltage_ratio(double v_ratio, double knee_mhz, double fmax_mhz,
                         double exponent, double sm_mhz);
/* Snaps a requested clock to the nearest supported one; 0 -> default. */
guint gpu_snap_sm(const GpuSpec *g, guint sm_mhz);
guint gpu_snap_mem(const GpuSpec *g, guint mem_mhz);

/* Time and power of kernel k at clocks sm/mem (0 = auto) under a power
 * limit (<= 0: the spec's default).  Applies the power cap: when the power at
 * the given SM clock exceeds the limit, runs at the highest SM clock step
 * that fits (never below sm_min).  Monotone: lowering a clock never
 * shortens time unless the cap is involved.
 *
 * Precondition: each clock is 0 or a supported one, as gpu_snap_sm and
 * gpu_snap_mem return it.  A requested clock is snapped once, where it
 * enters (a policy's plan, js.gpu.price, a fit's measured points); the
 * model prices the pair it is given (builds without NDEBUG assert it).
 * The limit is used as given (not clamped to power_min/max: the caller
 * validates it); GPU_POWER_UNCAPPED disables the cap.  out->capped is TRUE when the cap
 * lowered the SM clock; a kernel already at sm_min that still draws more
 * than the limit runs there, uncapped, above the limit.
 *
 * Units: with FLOPs and/or bytes (k->flops > 0 or k->bytes > 0) time_s is
 * in seconds (roofline, see models/gpu.c).  With neither (an imported kernel
 * without counters) time_s is RELATIVE: 1.0 at (sm_max, highest memory
 * clock), and
 *     t = a_c * sm_max / f + a_m * mem_max / m + a_o
 * with the class's default fractions (gpu_class_time_fractions); the caller
 * scales its measured duration by t(clocks) / t(reference clocks).  Power is
 * absolute (W) in both cases. */
void gpu_kernel_cost(const GpuSpec *g, const GpuKernel *k, guint sm_mhz,
                     guint mem_mhz, double power_limit_w, GpuCost *out);

/* Prints a human-readable description with sources (for `joulesim gpus`). */
void gpu_spec_describe(const GpuSpec *g, GString *out);

#define GPU_ERROR (gpu_error_quark())
GQuark gpu_error_quark(void);
typedef enum {
  GPU_ERROR_UNKNOWN,   /* unknown GPU name */
  GPU_ERROR_INVALID    /* out-of-range parameter */
} GpuError;

G_END_DECLS

#endif

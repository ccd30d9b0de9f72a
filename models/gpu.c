/* models/gpu.c -- GPU catalogue and the time/power model under DVFS.
 *
 * Time of a kernel
 * ----------------
 * A kernel with F FLOPs and B DRAM bytes, of op class c, at SM clock f and
 * memory clock m (MHz):
 *
 *   tc = F / (eff_compute[c] * n_sm * flop_per_clk_sm * f)     compute
 *        (flop_per_clk_sm = tensor_ or vector_flop_per_clk_sm per k->tensor)
 *   td = B / (eff_memory[c] * BW(m)),  BW(m) = mem_bw * min(1, m / m_max)
 *   ti = B / (eff_memory[c] * n_sm * mem_issue_bytes_per_clk_sm * f)
 *   tm = (td^8 + ti^8)^(1/8)                                   memory side
 *   t  = (tc^4 + tm^4)^(1/4) + t_o                             total
 *
 * td is the DRAM time; ti is the SM-side limit on DRAM traffic (load/store
 * issue and the L2/crossbar, which run in the SM clock domain).  The two
 * p-norms are smooth maxima: exponent 4 between compute and memory (a kernel
 * exactly at the roofline ridge runs 2^(1/4) = 1.19x its bound, as measured
 * kernels near the ridge do), exponent 8 on the memory side so a streaming
 * kernel stays flat down to the memory knee (f where ti = td,
 * gpu_memory_knee_mhz: at most 2^(1/8) - 1 = 9% slower there) and slows ~1/f
 * below it.  t_o = kernel_overhead_us (launch + tail).  Every term is
 * non-increasing in f and in m, and tc or ti is strictly decreasing in f
 * whenever F > 0 or B > 0, so lowering a clock never shortens a kernel.
 *
 * Kernels without counters (F = B = 0): the time is relative, 1.0 at
 * (sm_max, m_max):  t = a_c * f_max / f + a_m * m_max / m + a_o, with per
 * class fractions (class_fractions[] below; estimates, see the table).
 *
 * Power of a kernel
 * -----------------
 *   P = P_const
 *     + P_mem  * u_m * (m / m_max)
 *     + P_mem_static * (m / m_max)
 *     + P_dyn  * activity[c] * a_u * (u_s + s (1 - u_s)) * (f / f_max)
 *              * (V(f) / V_max)^2
 *     + P_leak * (V(f) / V_max)^3
 *
 * a_u = activity_tf32 for a kernel on the TF32 tensor rate, else 1: a
 * TF32 tensor op does half the FLOPs per clock of a 16-bit one and
 * switches less per clock (fitted on the H100 cap curve, where the
 * class activity alone would have to move the BF16 GEMM's 798 TFLOP/s
 * at 700 W; docs/gpu-model.md "The H100 fit").
 *
 * u_s = max(tc, ti) / t (SMs busy computing or issuing memory traffic),
 * u_m = td / t (DRAM busy); for relative kernels u_s = a_c f_max/f / t and
 * u_m = a_m m_max/m / t.  s = stall_activity: a stalled SM with resident
 * warps is still clocked (clock tree, schedulers), so memory-bound kernels
 * draw power that goes with f V^2 (forced by the kernel-DVFS study's
 * 330-350 W memory-bound kernels on the RTX 3080 Ti; fitted on the A40 and
 * A100 stage profiles).  P_mem_static is the memory interface's
 * clock-proportional power (GDDR6X I/O; 0 where the memory clock is
 * fixed).  V(f) is v_min up to f_knee, then v_min + (v_max - v_min) x^e
 * with x = (f - f_knee) / (f_max - f_knee) and e = v_curve_exp (0 or 1:
 * linear; 1.74 on the A100 PCIe, fitted to the KernelTuner sweep).
 * Leakage goes as V * I_leak(V) with I_leak roughly quadratic in V over
 * the DVFS range, hence the exponent 3 (a choice, not a measurement; only
 * V(f)/V_max enters the model, so v_max itself is a nominal 1 V).  Since
 * u_s * f ~ 1/t and u_m * m ~ 1/t, (1 - u_s) f is non-decreasing in f and
 * u_s + s (1 - u_s) non-decreasing in m (s <= 1), P never rises when a
 * clock is lowered, which makes the cap search a bisection.
 *
 * Power cap
 * ---------
 * When P at the requested SM clock exceeds the limit, the kernel runs at the
 * highest SM clock of the grid sm_min + i * step whose power fits (binary
 * search on i; time recomputed there), never below sm_min.  This is the
 * steady state of the card's power controller over one kernel; real
 * controllers average over ~25-100 ms windows (docs/sources.md), so short
 * kernels mixed with GEMMs are capped per kernel here, not per window.
 *
 * Calibration (numbers and the commands reproducing them: docs/gpu-model.md)
 * ---------------------------------------------------------------------------
 * Clocks, SM counts, FLOP/clk/SM, bandwidths, power limits, idle and blocked
 * power: published figures (docs/sources.md, NVIDIA datasheets).  DRAM power
 * p_mem_w: access energy per bit x bit rate (estimate).  A100 P_const,
 * P_dyn, P_leak, v_min, f_knee and the vector-class activity: fitted jointly
 * (tests/test-gpu.c, /gpu/calibration/fit) to
 *   (1) the measured stage profile perseus-emulation/gpt3-175b+a100_sxm_bf16
 *       (energy and power per microbatch vs SM clock, 855-1410 MHz, 500 W
 *       card) with a GPT-3 175B TP8 12-layer stage kernel mix,
 *   (2) the 8192^3 BF16 GEMM at 400 W: 258 TFLOP/s throttled,
 *   (3) the A100 blocking power 83.64 W = P_const + P_leak (a blocked GPU
 *       spins at full clock with idle SMs), which separates P_const from
 *       P_leak.
 * A40 is fitted the same way to its own profile (no GEMM figure).  H100,
 * A100-PCIe, H100-PCIe and RTX 3080 Ti power parameters are scaled from
 * those fits ("estimate" in their sources).
 *
 * Known limits (measured errors: docs/gpu-model.md)
 * -------------------------------------------------
 * - A100 stage (normalised at 1410 MHz): energy-curve MAPE 1.5% forward,
 *   1.9% backward (worst point 4.8% at 1260 MHz); time MAPE 2.2% / 0.5%;
 *   minimum-energy clock 1080 MHz as measured; absolute stage time within
 *   1.5% (not fitted).  The 8192^3 GEMM at 400 W: 256.9 TFLOP/s at 1230 MHz
 *   (published 258).
 * - A40: forward energy MAPE 2.6%; backward 7.1% (the measured backward
 *   time drops 6% between 975 and 960 MHz, which no monotone model
 *   follows); absolute forward time 34% too long.
 * - H100 and the PCIe/consumer parts are not validated against measurements.
 * - One efficiency per class: real GEMM efficiency depends on shape (tile
 *   quantisation, small N); attention and vector classes are estimates.
 * - Power does not depend on data (the 258 vs 295 TFLOP/s GEMM gap comes from
 *   random vs zero operands); the fit uses random-data figures.
 * - No temperature: leakage and clocks do not drift with heat.
 * - The cap is per kernel (see above) and lowers only the SM clock, never
 *   the memory clock, as on A100/H100.
 */
#include "models/gpu.h"

#include <math.h>
#include <string.h>

G_DEFINE_QUARK(gpu-error-quark, gpu_error)

/* Smooth-max exponents (see the equations above). */
#define ROOFLINE_P 4.0
#define ISSUE_Q 8.0
#define LEAK_EXP 3.0

/* ---------------------------------------------------------------------- */
/* Op classes                                                              */

const char *gpu_class_name(SimOpClass c)
{
  g_return_val_if_fail((guint)c < SIM_CLASS_COUNT, NULL);
  return sim_class_name(c);
}

/* Default time fractions (compute, memory, fixed) of a kernel without
 * counters, at max clocks.  Estimates from the roofline position of typical
 * kernels of each class: GEMMs and attention mostly compute-bound, vector
 * classes mostly memory-bound, communication mostly link-bound (fixed in
 * SM and memory clock). */
static const double class_fractions[SIM_CLASS_COUNT][3] = {
  [SIM_CLASS_GEMM] = {0.85, 0.10, 0.05},
  [SIM_CLASS_ATTENTION] = {0.75, 0.20, 0.05},
  [SIM_CLASS_ELEMENTWISE] = {0.10, 0.80, 0.10},
  [SIM_CLASS_NORM] = {0.15, 0.75, 0.10},
  [SIM_CLASS_SOFTMAX] = {0.15, 0.75, 0.10},
  [SIM_CLASS_REDUCTION] = {0.20, 0.70, 0.10},
  [SIM_CLASS_EMBEDDING] = {0.10, 0.80, 0.10},
  [SIM_CLASS_OPTIMIZER] = {0.10, 0.85, 0.05},
  [SIM_CLASS_MEMCPY] = {0.05, 0.85, 0.10},
  [SIM_CLASS_COMM] = {0.10, 0.30, 0.60},
  [SIM_CLASS_OTHER] = {0.40, 0.40, 0.20},
};

void gpu_class_time_fractions(SimOpClass c, double *a_c, double *a_m,
                              double *a_o)
{
  g_return_if_fail((guint)c < SIM_CLASS_COUNT);
  if (a_c != NULL)
    *a_c = class_fractions[c][0];
  if (a_m != NULL)
    *a_m = class_fractions[c][1];
  if (a_o != NULL)
    *a_o = class_fractions[c][2];
}

/* ---------------------------------------------------------------------- */
/* Parameter table                                                         */

/* One scalar GpuParam field of GpuSpec: its name, unit and offset.  Drives
 * gpu_spec_describe, gpu_spec_param and the copy's source interning, so a
 * new field needs one line here. */
typedef struct {
  const char *name;
  const char *unit;
  gsize offset;
} ParamField;

#define FIELD(f, unit) {#f, unit, G_STRUCT_OFFSET(GpuSpec, f)}
static const ParamField scalar_fields[] = {
  FIELD(sm_min_mhz, "MHz"),
  FIELD(sm_max_mhz, "MHz"),
  FIELD(sm_step_mhz, "MHz"),
  FIELD(sm_default_mhz, "MHz"),
  FIELD(n_sm, "SMs"),
  FIELD(tensor_flop_per_clk_sm, "FLOP/clk/SM"),
  FIELD(vector_flop_per_clk_sm, "FLOP/clk/SM"),
  FIELD(tf32_flop_per_clk_sm, "FLOP/clk/SM"),
  FIELD(fp8_flop_per_clk_sm, "FLOP/clk/SM"),
  FIELD(fp8_gemm_eff_ratio, "x"),
  FIELD(mem_bw_gbps, "GB/s"),
  FIELD(mem_issue_bytes_per_clk_sm, "B/clk/SM"),
  FIELD(kernel_overhead_us, "us"),
  FIELD(power_limit_w, "W"),
  FIELD(power_min_w, "W"),
  FIELD(power_max_w, "W"),
  FIELD(idle_power_w, "W"),
  FIELD(blocked_power_w, "W"),
  FIELD(comm_power_w, "W"),
  FIELD(p_const_w, "W"),
  FIELD(p_mem_w, "W"),
  FIELD(p_dyn_w, "W"),
  FIELD(p_leak_w, "W"),
  FIELD(p_mem_static_w, "W"),
  FIELD(v_min, "V"),
  FIELD(v_max, "V"),
  FIELD(f_knee_mhz, "MHz"),
  FIELD(v_curve_exp, "x"),
  FIELD(stall_activity, "x"),
  FIELD(activity_tf32, "x"),
  FIELD(boost_window_ms, "ms"),
  FIELD(boost_period_ms, "ms"),
  FIELD(boost_step_mhz, "MHz"),
  FIELD(dense_bf16_tflops, "TFLOP/s"),
  FIELD(switch_latency_ms, "ms"),
  FIELD(memory_gb, "GB"),
};
#undef FIELD

static inline GpuParam *field_ptr(GpuSpec *s, const ParamField *f)
{
  return G_STRUCT_MEMBER_P(s, f->offset);
}

static inline const GpuParam *field_cptr(const GpuSpec *s,
                                         const ParamField *f)
{
  return (const GpuParam *)((const guint8 *)s + f->offset);
}

/* The per-class arrays, named "<array>.<class>". */
typedef enum { ARR_EFF_COMPUTE, ARR_EFF_MEMORY, ARR_ACTIVITY, ARR_COUNT } ArrayId;
static const char *const array_names[ARR_COUNT] = {"eff_compute",
                                                   "eff_memory", "activity"};

static GpuParam *class_array(GpuSpec *s, ArrayId a)
{
  switch (a) {
  case ARR_EFF_COMPUTE:
    return s->eff_compute;
  case ARR_EFF_MEMORY:
    return s->eff_memory;
  case ARR_ACTIVITY:
  default:
    return s->activity;
  }
}

const char *gpu_spec_scalar_name(guint i)
{
  return i < G_N_ELEMENTS(scalar_fields) ? scalar_fields[i].name : NULL;
}

const char *gpu_spec_array_name(guint a)
{
  return a < ARR_COUNT ? array_names[a] : NULL;
}

GpuParam *gpu_spec_param(GpuSpec *s, const char *field)
{
  g_return_val_if_fail(s != NULL, NULL);
  g_return_val_if_fail(field != NULL, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS(scalar_fields); i++)
    if (strcmp(field, scalar_fields[i].name) == 0)
      return field_ptr(s, &scalar_fields[i]);

  const char *dot = strchr(field, '.');
  if (dot == NULL)
    return NULL;
  gsize prefix = (gsize)(dot - field);
  const char *rest = dot + 1;
  /* "mem_mhz.<i>": only the listed clocks. */
  if (prefix == strlen("mem_mhz") && strncmp(field, "mem_mhz", prefix) == 0) {
    char *end = NULL;
    guint64 i = g_ascii_strtoull(rest, &end, 10);
    if (end == rest || *end != '\0' || i >= s->n_mem_clocks)
      return NULL;
    return &s->mem_mhz[i];
  }
  for (int a = 0; a < ARR_COUNT; a++) {
    if (prefix != strlen(array_names[a]) ||
        strncmp(field, array_names[a], prefix) != 0)
      continue;
    for (int c = 0; c < SIM_CLASS_COUNT; c++)
      if (strcmp(rest, sim_class_name((SimOpClass)c)) == 0)
        return &class_array(s, (ArrayId)a)[c];
    return NULL;
  }
  return NULL;
}

/* ---------------------------------------------------------------------- */
/* Specs: copy, free, validate                                             */

/* Interns a source string; NULL stays NULL.  Interned strings live as long
 * as the process, so copies never dangle whatever made the original. */
static void intern_source(GpuParam *p)
{
  if (p->source != NULL)
    p->source = g_intern_string(p->source);
}

GpuSpec *gpu_spec_copy(const GpuSpec *s)
{
  g_return_val_if_fail(s != NULL, NULL);
  GpuSpec *c = g_new(GpuSpec, 1);
  *c = *s;
  c->name = g_strdup(s->name);
  c->description = g_strdup(s->description);
  for (gsize i = 0; i < G_N_ELEMENTS(scalar_fields); i++)
    intern_source(field_ptr(c, &scalar_fields[i]));
  for (guint i = 0; i < GPU_MAX_MEM_CLOCKS; i++)
    intern_source(&c->mem_mhz[i]);
  for (int a = 0; a < ARR_COUNT; a++)
    for (int k = 0; k < SIM_CLASS_COUNT; k++)
      intern_source(&class_array(c, (ArrayId)a)[k]);
  return c;
}

void gpu_spec_free(GpuSpec *s)
{
  if (s == NULL)
    return;
  g_free(s->name);
  g_free(s->description);
  g_free(s);
}

/* Sets a GPU_ERROR_INVALID error naming the GPU and the field. */
G_GNUC_PRINTF(4, 5)
static gboolean invalid(GError **error, const GpuSpec *s, const char *field,
                        const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(error, GPU_ERROR, GPU_ERROR_INVALID, "GPU '%s': %s %s",
              s->name != NULL ? s->name : "(unnamed)", field, msg);
  return FALSE;
}

/* Checks lo <= v <= hi (either bound may be -inf/inf) and finiteness. */
static gboolean check_range(const GpuSpec *s, const char *field, double v,
                            double lo, double hi, gboolean lo_open,
                            GError **error)
{
  if (!isfinite(v))
    return invalid(error, s, field, "= %g is not finite", v);
  if (lo_open ? !(v > lo) : !(v >= lo))
    return invalid(error, s, field, "= %g must be %s %g", v,
                   lo_open ? ">" : ">=", lo);
  if (v > hi)
    return invalid(error, s, field, "= %g must be <= %g", v, hi);
  return TRUE;
}

/* TRUE when x is (within rounding) a whole number. */
static gboolean is_whole(double x)
{
  return fabs(x - round(x)) < 1e-9;
}

gboolean gpu_spec_validate(const GpuSpec *s, GError **error)
{
  g_return_val_if_fail(s != NULL, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);

  if (s->name == NULL || s->name[0] == '\0')
    return invalid(error, s, "name", "must be a non-empty string");
  for (const char *p = s->name; *p != '\0'; p++)
    if (g_ascii_isspace(*p) || !g_ascii_isprint(*p))
      return invalid(error, s, "name",
                     "'%s' must be printable ASCII without spaces", s->name);

  /* Every scalar: finite.  Ranges below. */
  for (gsize i = 0; i < G_N_ELEMENTS(scalar_fields); i++) {
    const GpuParam *p = field_cptr(s, &scalar_fields[i]);
    if (!isfinite(p->v))
      return invalid(error, s, scalar_fields[i].name, "= %g is not finite",
                     p->v);
  }

  /* Clocks: a grid of whole MHz, sm_min + i * step up to sm_max. */
  double fmin = s->sm_min_mhz.v, fmax = s->sm_max_mhz.v;
  double step = s->sm_step_mhz.v;
  if (!check_range(s, "sm_min_mhz", fmin, 0, 1e5, TRUE, error) ||
      !check_range(s, "sm_max_mhz", fmax, fmin, 1e5, FALSE, error) ||
      !check_range(s, "sm_step_mhz", step, 0, 1e5, TRUE, error))
    return FALSE;
  if (!is_whole(fmin) || !is_whole(fmax) || !is_whole(step))
    return invalid(error, s, "sm_min_mhz/sm_max_mhz/sm_step_mhz",
                   "= %g/%g/%g must be whole MHz", fmin, fmax, step);
  if (!is_whole((fmax - fmin) / step))
    return invalid(error, s, "sm_max_mhz",
                   "= %g is not on the grid sm_min_mhz + k * sm_step_mhz "
                   "(%g + k * %g)",
                   fmax, fmin, step);
  double fdef = s->sm_default_mhz.v;
  if (!check_range(s, "sm_default_mhz", fdef, fmin, fmax, FALSE, error))
    return FALSE;
  if (!is_whole((fdef - fmin) / step))
    return invalid(error, s, "sm_default_mhz",
                   "= %g is not on the SM clock grid", fdef);

  if (s->n_mem_clocks < 1 || s->n_mem_clocks > GPU_MAX_MEM_CLOCKS)
    return invalid(error, s, "n_mem_clocks", "= %u must be in 1..%d",
                   s->n_mem_clocks, GPU_MAX_MEM_CLOCKS);
  for (guint i = 0; i < s->n_mem_clocks; i++) {
    char field[32];
    g_snprintf(field, sizeof field, "mem_mhz.%u", i);
    double lo = i == 0 ? 0 : s->mem_mhz[i - 1].v;
    if (!check_range(s, field, s->mem_mhz[i].v, lo, 1e6, TRUE, error))
      return FALSE;
    if (!is_whole(s->mem_mhz[i].v))
      return invalid(error, s, field, "= %g must be whole MHz",
                     s->mem_mhz[i].v);
  }

  /* Throughput. */
  if (!check_range(s, "n_sm", s->n_sm.v, 0, 1e5, TRUE, error) ||
      !check_range(s, "tensor_flop_per_clk_sm", s->tensor_flop_per_clk_sm.v,
                   0, 1e7, TRUE, error) ||
      !check_range(s, "vector_flop_per_clk_sm", s->vector_flop_per_clk_sm.v,
                   0, 1e7, TRUE, error) ||
      !check_range(s, "tf32_flop_per_clk_sm", s->tf32_flop_per_clk_sm.v, 0,
                   1e7, FALSE, error) ||
      !check_range(s, "fp8_flop_per_clk_sm", s->fp8_flop_per_clk_sm.v, 0,
                   1e7, FALSE, error) ||
      !check_range(s, "fp8_gemm_eff_ratio", s->fp8_gemm_eff_ratio.v, 0, 1,
                   FALSE, error) ||
      !check_range(s, "mem_bw_gbps", s->mem_bw_gbps.v, 0, 1e6, TRUE, error) ||
      !check_range(s, "mem_issue_bytes_per_clk_sm",
                   s->mem_issue_bytes_per_clk_sm.v, 0, 1e6, FALSE, error) ||
      !check_range(s, "kernel_overhead_us", s->kernel_overhead_us.v, 0, 1e6,
                   FALSE, error))
    return FALSE;
  for (int c = 0; c < SIM_CLASS_COUNT; c++) {
    char field[48];
    const char *cn = sim_class_name((SimOpClass)c);
    g_snprintf(field, sizeof field, "eff_compute.%s", cn);
    if (!check_range(s, field, s->eff_compute[c].v, 0, 1, TRUE, error))
      return FALSE;
    g_snprintf(field, sizeof field, "eff_memory.%s", cn);
    if (!check_range(s, field, s->eff_memory[c].v, 0, 1, TRUE, error))
      return FALSE;
    g_snprintf(field, sizeof field, "activity.%s", cn);
    if (!check_range(s, field, s->activity[c].v, 0, 2, FALSE, error))
      return FALSE;
  }

  /* Power. */
  if (!check_range(s, "power_min_w", s->power_min_w.v, 0, 1e5, TRUE, error) ||
      !check_range(s, "power_max_w", s->power_max_w.v, s->power_min_w.v, 1e5,
                   FALSE, error) ||
      !check_range(s, "power_limit_w", s->power_limit_w.v, s->power_min_w.v,
                   s->power_max_w.v, FALSE, error) ||
      !check_range(s, "idle_power_w", s->idle_power_w.v, 0, 1e5, TRUE,
                   error) ||
      !check_range(s, "blocked_power_w", s->blocked_power_w.v, 0, 1e5, FALSE,
                   error) ||
      !check_range(s, "comm_power_w", s->comm_power_w.v, 0, 1e5, FALSE,
                   error) ||
      !check_range(s, "p_const_w", s->p_const_w.v, 0, 1e5, FALSE, error) ||
      !check_range(s, "p_mem_w", s->p_mem_w.v, 0, 1e5, FALSE, error) ||
      !check_range(s, "p_dyn_w", s->p_dyn_w.v, 0, 1e5, TRUE, error) ||
      !check_range(s, "p_leak_w", s->p_leak_w.v, 0, 1e5, FALSE, error) ||
      !check_range(s, "p_mem_static_w", s->p_mem_static_w.v, 0, 1e5, FALSE,
                   error) ||
      !check_range(s, "v_min", s->v_min.v, 0, 10, TRUE, error) ||
      !check_range(s, "v_max", s->v_max.v, s->v_min.v, 10, FALSE, error) ||
      !check_range(s, "f_knee_mhz", s->f_knee_mhz.v, fmin, fmax, FALSE,
                   error) ||
      !check_range(s, "v_curve_exp", s->v_curve_exp.v, 0, 8, FALSE, error) ||
      !check_range(s, "stall_activity", s->stall_activity.v, 0, 1, FALSE,
                   error) ||
      !check_range(s, "activity_tf32", s->activity_tf32.v, 0, 2, FALSE,
                   error) ||
      !check_range(s, "boost_window_ms", s->boost_window_ms.v, 0, 1e5, FALSE,
                   error) ||
      !check_range(s, "boost_period_ms", s->boost_period_ms.v, 0, 1e5, FALSE,
                   error) ||
      !check_range(s, "boost_step_mhz", s->boost_step_mhz.v, 0,
                   fmax - fmin, FALSE, error) ||
      !check_range(s, "switch_latency_ms", s->switch_latency_ms.v, 0, 1e6,
                   FALSE, error) ||
      !check_range(s, "memory_gb", s->memory_gb.v, 0, 1e6, FALSE, error))
    return FALSE;
  return TRUE;
}

/* ---------------------------------------------------------------------- */
/* Catalogue                                                               */

/* Invariant: `specs` holds owned, validated GpuSpec copies with distinct
 * names, built-ins first in catalogue.c order, then definitions in the order
 * first defined (a redefinition replaces in place). */
struct GpuCatalogue {
  GPtrArray *specs;
};

GpuCatalogue *gpu_catalogue_new(void)
{
  GpuCatalogue *c = g_new0(GpuCatalogue, 1);
  c->specs = g_ptr_array_new_with_free_func((GDestroyNotify)gpu_spec_free);
  guint n = 0;
  const GpuSpec *builtins = gpu_builtin_specs(&n);
  for (guint i = 0; i < n; i++) {
    /* The built-ins are checked by tests/test-gpu.c; a bad one is a bug. */
    g_assert(gpu_spec_validate(&builtins[i], NULL));
    g_ptr_array_add(c->specs, gpu_spec_copy(&builtins[i]));
  }
  return c;
}

void gpu_catalogue_free(GpuCatalogue *c)
{
  if (c == NULL)
    return;
  g_ptr_array_unref(c->specs);
  g_free(c);
}

GPtrArray *gpu_catalogue_names(const GpuCatalogue *c)
{
  g_return_val_if_fail(c != NULL, NULL);
  GPtrArray *names = g_ptr_array_sized_new(c->specs->len);
  for (guint i = 0; i < c->specs->len; i++)
    g_ptr_array_add(names, ((GpuSpec *)g_ptr_array_index(c->specs, i))->name);
  return names;
}

static gint find_index(const GpuCatalogue *c, const char *name)
{
  for (guint i = 0; i < c->specs->len; i++)
    if (strcmp(((GpuSpec *)g_ptr_array_index(c->specs, i))->name, name) == 0)
      return (gint)i;
  return -1;
}

/* Case-insensitive Levenshtein distance, stopping early above `cap`
 * (returns cap + 1 then).  Names are short: one row of ints on the stack. */
static guint edit_distance(const char *a, const char *b, guint cap)
{
  gsize la = strlen(a), lb = strlen(b);
  if (la > 63 || lb > 63)
    return g_ascii_strcasecmp(a, b) == 0 ? 0 : cap + 1;
  guint row[64];
  for (gsize j = 0; j <= lb; j++)
    row[j] = (guint)j;
  for (gsize i = 1; i <= la; i++) {
    guint diag = row[0], best = (guint)i;
    row[0] = (guint)i;
    for (gsize j = 1; j <= lb; j++) {
      guint up = row[j];
      guint cost = g_ascii_tolower(a[i - 1]) == g_ascii_tolower(b[j - 1]) ? 0 : 1;
      guint v = MIN(MIN(up + 1, row[j - 1] + 1), diag + cost);
      row[j] = v;
      diag = up;
      best = MIN(best, v);
    }
    if (best > cap)
      return cap + 1;
  }
  return row[lb];
}

/* TRUE when `needle` occurs in `hay`, ignoring ASCII case. */
static gboolean contains_ci(const char *hay, const char *needle)
{
  g_autofree char *h = g_ascii_strdown(hay, -1);
  g_autofree char *n = g_ascii_strdown(needle, -1);
  return strstr(h, n) != NULL;
}

/* Suggestions for an unknown name among names[0..n): a case-insensitive
 * match; else the names containing it (3+ characters, case-insensitive:
 * "a100" lists every A100); else the names closest by case-insensitive
 * edit distance, if within 3.  Returns "'A', 'B'" or NULL. */
char *gpu_suggest_name(const char *name, const char *const *names, guint n)
{
  g_return_val_if_fail(name != NULL, NULL);
  g_autoptr(GString) out = g_string_new(NULL);
  /* 0: distance 0, 1: substring, 2: nearest within 3 edits. */
  for (int pass = 0; pass < 3 && out->len == 0; pass++) {
    guint best = 4;
    if (pass == 2)
      for (guint i = 0; i < n; i++)
        best = MIN(best, edit_distance(name, names[i], 3));
    for (guint i = 0; i < n; i++) {
      gboolean hit = pass == 0   ? g_ascii_strcasecmp(name, names[i]) == 0
                     : pass == 1 ? strlen(name) >= 3 && contains_ci(names[i], name)
                                 : best <= 3 && edit_distance(name, names[i], 3) == best;
      if (hit)
        g_string_append_printf(out, "%s'%s'", out->len > 0 ? ", " : "",
                               names[i]);
    }
  }
  return out->len > 0 ? g_string_free(g_steal_pointer(&out), FALSE) : NULL;
}

/* gpu_suggest_name over the catalogue's names. */
static char *suggest(const GpuCatalogue *c, const char *name)
{
  g_autofree const char **names = g_new(const char *, MAX(c->specs->len, 1));
  for (guint i = 0; i < c->specs->len; i++)
    names[i] = ((const GpuSpec *)g_ptr_array_index(c->specs, i))->name;
  return gpu_suggest_name(name, names, c->specs->len);
}

const GpuSpec *gpu_catalogue_lookup(const GpuCatalogue *c, const char *name,
                                    GError **error)
{
  g_return_val_if_fail(c != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  if (name != NULL) {
    gint i = find_index(c, name);
    if (i >= 0)
      return g_ptr_array_index(c->specs, (guint)i);
  }
  g_autoptr(GString) known = g_string_new(NULL);
  for (guint i = 0; i < c->specs->len; i++)
    g_string_append_printf(known, "%s%s", i > 0 ? ", " : "",
                           ((GpuSpec *)g_ptr_array_index(c->specs, i))->name);
  g_autofree char *hint = name != NULL ? suggest(c, name) : NULL;
  g_set_error(error, GPU_ERROR, GPU_ERROR_UNKNOWN,
              "unknown GPU '%s'%s%s%s; known GPUs: %s",
              name != NULL ? name : "(null)",
              hint != NULL ? " (did you mean " : "", hint != NULL ? hint : "",
              hint != NULL ? "?)" : "", known->str);
  return NULL;
}

gboolean gpu_catalogue_define(GpuCatalogue *c, const GpuSpec *spec,
                              GError **error)
{
  g_return_val_if_fail(c != NULL, FALSE);
  g_return_val_if_fail(spec != NULL, FALSE);
  if (!gpu_spec_validate(spec, error))
    return FALSE;
  GpuSpec *copy = gpu_spec_copy(spec);
  gint i = find_index(c, spec->name);
  if (i >= 0) {
    gpu_spec_free(g_ptr_array_index(c->specs, (guint)i));
    g_ptr_array_index(c->specs, (guint)i) = copy;
  } else {
    g_ptr_array_add(c->specs, copy);
  }
  return TRUE;
}

/* ---------------------------------------------------------------------- */
/* Clocks                                                                  */

guint gpu_sm_n_steps(const GpuSpec *g)
{
  g_return_val_if_fail(g != NULL, 0);
  return (guint)lround((g->sm_max_mhz.v - g->sm_min_mhz.v) / g->sm_step_mhz.v) +
         1;
}

guint gpu_sm_clock_at(const GpuSpec *g, guint i)
{
  g_return_val_if_fail(g != NULL, 0);
  guint n = gpu_sm_n_steps(g);
  if (i >= n)
    i = n - 1;
  return (guint)lround(g->sm_min_mhz.v + i * g->sm_step_mhz.v);
}

guint gpu_snap_sm(const GpuSpec *g, guint sm_mhz)
{
  g_return_val_if_fail(g != NULL, 0);
  if (sm_mhz == 0)
    return (guint)lround(g->sm_default_mhz.v);
  double f = CLAMP((double)sm_mhz, g->sm_min_mhz.v, g->sm_max_mhz.v);
  /* Nearest grid point; halves round up. */
  double i = floor((f - g->sm_min_mhz.v) / g->sm_step_mhz.v + 0.5);
  return gpu_sm_clock_at(g, (guint)i);
}

guint gpu_snap_mem(const GpuSpec *g, guint mem_mhz)
{
  g_return_val_if_fail(g != NULL && g->n_mem_clocks > 0, 0);
  guint top = g->n_mem_clocks - 1;
  if (mem_mhz == 0)
    return (guint)lround(g->mem_mhz[top].v);
  /* Nearest listed clock; a tie goes to the higher one. */
  guint best = top;
  double best_d = fabs(g->mem_mhz[top].v - mem_mhz);
  for (guint i = top; i-- > 0;) {
    double d = fabs(g->mem_mhz[i].v - mem_mhz);
    if (d < best_d) {
      best = i;
      best_d = d;
    }
  }
  return (guint)lround(g->mem_mhz[best].v);
}

double gpu_voltage_ratio(double v_ratio, double knee_mhz, double fmax_mhz,
                         double exponent, double sm_mhz)
{
  if (sm_mhz >= fmax_mhz)
    return 1.0;
  if (sm_mhz <= knee_mhz)
    return v_ratio;
  double x = (sm_mhz - knee_mhz) / (fmax_mhz - knee_mhz);
  if (exponent > 0 && exponent != 1)
    x = pow(x, exponent);
  return v_ratio + (1.0 - v_ratio) * x;
}

double gpu_voltage(const GpuSpec *g, double sm_mhz)
{
  g_return_val_if_fail(g != NULL, 0);
  return g->v_max.v * gpu_voltage_ratio(g->v_min.v / g->v_max.v,
                                        g->f_knee_mhz.v, g->sm_max_mhz.v,
                                        g->v_curve_exp.v, sm_mhz);
}

double gpu_flop_per_clk_sm(const GpuSpec *g, guint math)
{
  switch (math) {
  case SIM_MATH_VECTOR:
    return g->vector_flop_per_clk_sm.v;
  case SIM_MATH_TF32:
    return g->tf32_flop_per_clk_sm.v > 0 ? g->tf32_flop_per_clk_sm.v
                                         : 0.5 * g->tensor_flop_per_clk_sm.v;
  case SIM_MATH_FP8:
    return g->fp8_flop_per_clk_sm.v > 0 ? g->fp8_flop_per_clk_sm.v
                                        : g->tensor_flop_per_clk_sm.v;
  case SIM_MATH_TENSOR:
  default:
    return g->tensor_flop_per_clk_sm.v;
  }
}

double gpu_kernel_activity(const GpuSpec *g, const GpuKernel *k)
{
  g_return_val_if_fail(g != NULL && k != NULL, 0);
  double a = g->activity[k->klass].v;
  if (k->tensor == SIM_MATH_TF32 && g->activity_tf32.v > 0)
    a *= g->activity_tf32.v;
  return a;
}

double gpu_peak_tensor_flops(const GpuSpec *g, double sm_mhz)
{
  g_return_val_if_fail(g != NULL, 0);
  return g->n_sm.v * g->tensor_flop_per_clk_sm.v * sm_mhz * 1e6;
}

double gpu_mfu_peak_flops(const GpuSpec *g, gboolean *datasheet)
{
  g_return_val_if_fail(g != NULL, 0);
  gboolean known = g->dense_bf16_tflops.v > 0;
  if (datasheet != NULL)
    *datasheet = known;
  return known ? g->dense_bf16_tflops.v * 1e12
               : gpu_peak_tensor_flops(g, g->sm_max_mhz.v);
}

double gpu_memory_knee_mhz(const GpuSpec *g, guint mem_mhz)
{
  g_return_val_if_fail(g != NULL, 0);
  if (g->mem_issue_bytes_per_clk_sm.v <= 0)
    return 0;
  double m = gpu_snap_mem(g, mem_mhz);
  double bw = g->mem_bw_gbps.v * 1e9 * MIN(1.0, m / g->mem_mhz[g->n_mem_clocks - 1].v);
  return bw / (g->n_sm.v * g->mem_issue_bytes_per_clk_sm.v) / 1e6;
}

/* ---------------------------------------------------------------------- */
/* The model                                                               */

/* Time components of one kernel at one clock pair. */
typedef struct {
  double t;     /* total (s, or relative) */
  double u_sm;  /* SM busy fraction */
  double u_mem; /* DRAM busy fraction */
} Timing;

/* (a^p + b^p)^(1/p), scaled to avoid overflow; exact when one is 0. */
static double pnorm(double a, double b, double p)
{
  double mx = MAX(a, b);
  if (mx <= 0)
    return 0;
  double mn = MIN(a, b);
  if (mn <= 0)
    return mx;
  return mx * pow(1.0 + pow(mn / mx, p), 1.0 / p);
}

static void model_time(const GpuSpec *g, const GpuKernel *k, double f,
                       double m, Timing *o)
{
  double fmax = g->sm_max_mhz.v;
  double mtop = g->mem_mhz[g->n_mem_clocks - 1].v;
  guint c = k->klass;

  if (!(k->flops > 0) && !(k->bytes > 0)) {
    /* Relative time, 1.0 at (fmax, mtop). */
    double tc = class_fractions[c][0] * fmax / f;
    double tm = class_fractions[c][1] * mtop / m;
    o->t = tc + tm + class_fractions[c][2];
    o->u_sm = tc / o->t;
    o->u_mem = tm / o->t;
    return;
  }

  double hz = f * 1e6;
  double fpc = gpu_flop_per_clk_sm(g, k->tensor);
  double eff = g->eff_compute[c].v;
  /* FP8 GEMMs reach less of their doubled peak than BF16 ones of the
   * same shape (docs/gpu-model.md, "FP8 GEMMs"). */
  if (k->tensor == SIM_MATH_FP8 && c == SIM_CLASS_GEMM &&
      g->fp8_gemm_eff_ratio.v > 0)
    eff *= g->fp8_gemm_eff_ratio.v;
  double tc = k->flops > 0 ? k->flops / (eff * g->n_sm.v * fpc * hz) : 0;
  double td = 0, ti = 0;
  if (k->bytes > 0) {
    double bw = g->mem_bw_gbps.v * 1e9 * MIN(1.0, m / mtop);
    td = k->bytes / (g->eff_memory[c].v * bw);
    if (g->mem_issue_bytes_per_clk_sm.v > 0)
      ti = k->bytes / (g->eff_memory[c].v * g->n_sm.v *
                       g->mem_issue_bytes_per_clk_sm.v * hz);
  }
  double tm = pnorm(td, ti, ISSUE_Q);
  o->t = pnorm(tc, tm, ROOFLINE_P) + g->kernel_overhead_us.v * 1e-6;
  o->u_sm = MAX(tc, ti) / o->t;
  o->u_mem = td / o->t;
}

static double model_power(const GpuSpec *g, const GpuKernel *k, double f,
                          double m, const Timing *tm)
{
  double vr = gpu_voltage(g, f) / g->v_max.v;
  double mtop = g->mem_mhz[g->n_mem_clocks - 1].v;
  double s = g->stall_activity.v;
  double busy = tm->u_sm + s * (1.0 - tm->u_sm);
  /* The memory interface's static power is drawn while the DRAM is in use
   * (rows open, PHY trained, refresh).  A kernel that moves no DRAM data
   * leaves it in power-down: the A100 PCIe board runs a register-only
   * kernel at 210 MHz on 42 W in all (KernelTuner), less than the H100's
   * HBM2e rail alone with traffic stopped (47.9 W). */
  double mem_static = tm->u_mem > 0 ? g->p_mem_static_w.v * (m / mtop) : 0;
  return g->p_const_w.v + mem_static +
         g->p_mem_w.v * tm->u_mem * (m / mtop) +
         g->p_dyn_w.v * gpu_kernel_activity(g, k) * busy *
             (f / g->sm_max_mhz.v) * vr * vr +
         g->p_leak_w.v * pow(vr, LEAK_EXP);
}

/* Evaluates the kernel at grid index i of the SM clock and memory clock m;
 * returns the power. */
static double eval_at(const GpuSpec *g, const GpuKernel *k, guint i, double m,
                      Timing *tm)
{
  double f = gpu_sm_clock_at(g, i);
  model_time(g, k, f, m, tm);
  return model_power(g, k, f, m, tm);
}

void gpu_kernel_cost(const GpuSpec *g, const GpuKernel *k, guint sm_mhz,
                     guint mem_mhz, double power_limit_w, GpuCost *out)
{
  g_return_if_fail(g != NULL && k != NULL && out != NULL);
  g_return_if_fail((guint)k->klass < SIM_CLASS_COUNT);
  g_return_if_fail(isfinite(k->flops) && isfinite(k->bytes));
  g_return_if_fail(k->flops >= 0 && k->bytes >= 0);

  /* The caller has snapped the clocks (gpu.h); 0 asks for the default. */
  guint f = sm_mhz != 0 ? sm_mhz : gpu_snap_sm(g, 0);
  guint m = mem_mhz != 0 ? mem_mhz : gpu_snap_mem(g, 0);
#ifndef NDEBUG
  g_assert(gpu_snap_sm(g, f) == f && gpu_snap_mem(g, m) == m);
#endif
  double limit = power_limit_w > 0 ? power_limit_w : g->power_limit_w.v;
  guint hi = (guint)lround((f - g->sm_min_mhz.v) / g->sm_step_mhz.v);

  Timing tm;
  double p = eval_at(g, k, hi, m, &tm);
  gboolean capped = FALSE;
  if (p > limit && hi > 0) {
    /* Power is non-decreasing in the SM clock: find the highest grid index
     * that fits.  Invariant: index hi does not fit; lo fits (or is 0). */
    Timing t_lo;
    guint lo = 0;
    double p_lo = eval_at(g, k, lo, m, &t_lo);
    if (p_lo <= limit) {
      while (hi - lo > 1) {
        guint mid = lo + (hi - lo) / 2;
        Timing t_mid;
        double p_mid = eval_at(g, k, mid, m, &t_mid);
        if (p_mid <= limit) {
          lo = mid;
          p_lo = p_mid;
          t_lo = t_mid;
        } else {
          hi = mid;
        }
      }
    }
    f = gpu_sm_clock_at(g, lo);
    p = p_lo;
    tm = t_lo;
    capped = TRUE;
  }
  out->time_s = tm.t;
  out->power_w = p;
  out->util_compute = tm.u_sm;
  out->util_memory = tm.u_mem;
  out->sm_mhz = f;
  out->mem_mhz = m;
  out->capped = capped;
}

/* ---------------------------------------------------------------------- */
/* Description                                                             */

static void describe_param(GString *out, const char *name, const GpuParam *p,
                           const char *unit)
{
  g_string_append_printf(out, "  %-30s %12.6g %-12s %s\n", name, p->v, unit,
                         p->source != NULL ? p->source : "(no source)");
}

void gpu_spec_describe(const GpuSpec *g, GString *out)
{
  g_return_if_fail(g != NULL && out != NULL);
  g_string_append_printf(out, "%s: %s\n", g->name,
                         g->description != NULL ? g->description : "");
  g_string_append_printf(out, "  %-30s %12s %-12s %s\n", "parameter", "value",
                         "unit", "source");
  for (gsize i = 0; i < G_N_ELEMENTS(scalar_fields); i++)
    describe_param(out, scalar_fields[i].name, field_cptr(g, &scalar_fields[i]),
                   scalar_fields[i].unit);
  g_string_append_printf(out, "  %-30s %12u\n", "n_mem_clocks",
                         g->n_mem_clocks);
  for (guint i = 0; i < g->n_mem_clocks && i < GPU_MAX_MEM_CLOCKS; i++) {
    char name[32];
    g_snprintf(name, sizeof name, "mem_mhz.%u", i);
    describe_param(out, name, &g->mem_mhz[i], "MHz");
  }
  static const char *const units[ARR_COUNT] = {"of peak", "of peak", "x"};
  for (int a = 0; a < ARR_COUNT; a++)
    for (int c = 0; c < SIM_CLASS_COUNT; c++) {
      char name[48];
      g_snprintf(name, sizeof name, "%s.%s", array_names[a],
                 sim_class_name((SimOpClass)c));
      describe_param(out, name, &class_array((GpuSpec *)g, (ArrayId)a)[c],
                     units[a]);
    }
  /* Derived figures, for orientation. */
  double fmax = g->sm_max_mhz.v;
  gboolean datasheet = FALSE;
  double mfu_peak = gpu_mfu_peak_flops(g, &datasheet) / 1e12;
  g_string_append_printf(
      out, "  derived: peak tensor %.1f TFLOP/s at %.0f MHz; MFU against %s, "
           "%.4g TFLOP/s; memory knee %.0f MHz; V(f) %.3f V up to %.0f MHz, "
           "%.3f V at %.0f MHz\n",
      gpu_peak_tensor_flops(g, fmax) / 1e12, fmax,
      datasheet ? "the datasheet dense BF16 peak"
                : "the derived tensor peak (no datasheet figure)",
      mfu_peak, gpu_memory_knee_mhz(g, 0), g->v_min.v, g->f_knee_mhz.v,
      g->v_max.v, fmax);
}

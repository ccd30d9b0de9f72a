/* tests/test-gpu.c -- the GPU model and catalogue (models/gpu.c,
 * models/catalogue.c).
 *
 * Behaviour tests: monotone time, the power cap, the memory knee, the U-shaped
 * stage energy, catalogue lookup/define/validate, snapping, copies.
 * Calibration: the /gpu/calibration/ tests compare the model with published figures
 * and the measured Perseus stage profile (docs/gpu-model.md quotes what they
 * print); /gpu/calibration/fit (only with -m thorough) re-runs the fit of
 * the A100 power parameters.
 */
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "models/gpu.h"
#include "models/gpufile.h"
#include "models/numeric.h"
#include "traces/profile.h"
#include "tests/testutil.h"

/* ---------------------------------------------------------------------- */
/* Helpers                                                                 */

static const GpuSpec *lookup(const GpuCatalogue *c, const char *name)
{
  GError *error = NULL;
  const GpuSpec *g = gpu_catalogue_lookup(c, name, &error);
  g_assert_no_error(error);
  g_assert_nonnull(g);
  return g;
}

static GpuKernel kernel(SimOpClass klass, double flops, double bytes,
                        gboolean tensor)
{
  GpuKernel k = {.klass = klass, .flops = flops, .bytes = bytes,
                 .tensor = tensor};
  return k;
}

/* A GEMM C[m x n] = A[m x k] B[k x n] in BF16. */
static GpuKernel gemm(double m, double n, double k)
{
  return kernel(SIM_CLASS_GEMM, 2 * m * n * k, 2 * (m * k + k * n + m * n),
                TRUE);
}

/* ---------------------------------------------------------------------- */
/* The GPT-3 175B pipeline stage of the Perseus profile                    */

/* One kernel family of the stage and how many times it runs. */
typedef struct {
  GpuKernel k;
  double count;
} MixItem;

typedef struct {
  MixItem items[32];
  guint n;
} Mix;

static void mix_add(Mix *m, GpuKernel k, double count)
{
  g_assert_cmpuint(m->n, <, G_N_ELEMENTS(m->items));
  m->items[m->n].k = k;
  m->items[m->n].count = count;
  m->n++;
}

/* Transformer layers in one pipeline stage of the profiles: GPT-3 175B's
 * 96 layers over 8 stages. */
#define STAGE_LAYERS 12

struct StageProfile;
static const ProfileOp *stage_op(const struct StageProfile *pr,
                                 gboolean backward);

/* One TP rank's forward (backward = FALSE) or backward pass of one
 * microbatch through a 12-layer GPT-3 175B stage: the layer mix the model
 * fit prices a Perseus stage with (traces/profile.c profile_op_kernels,
 * traces/gpt.c gpt_layer_kernels: b = 1, s = 2048, h = 12288, 96 heads,
 * TP = 8, BF16, Megatron kernel set, no recomputation) times the stage's
 * layers.  TP all-reduces are left out (the profile's clock-insensitive
 * share is small, see docs/gpu-model.md). */
static void stage_mix(Mix *m, const struct StageProfile *pr,
                      gboolean backward)
{
  FitKernel ks[PROFILE_OP_KERNELS_MAX];
  guint n = profile_op_kernels(stage_op(pr, backward), ks);
  g_assert_cmpuint(n, >, 0);
  memset(m, 0, sizeof *m);
  for (guint i = 0; i < n; i++)
    mix_add(m, ks[i].kernel, ks[i].count * STAGE_LAYERS);
}

/* Time (s) and energy (J) of a mix at a requested SM clock. */
static void mix_cost(const GpuSpec *g, const Mix *m, guint sm_mhz,
                     double limit_w, double *time_s, double *energy_j)
{
  double t = 0, e = 0;
  for (guint i = 0; i < m->n; i++) {
    GpuCost c;
    gpu_kernel_cost(g, &m->items[i].k, sm_mhz, 0, limit_w, &c);
    t += m->items[i].count * c.time_s;
    e += m->items[i].count * c.time_s * c.power_w;
  }
  *time_s = t;
  *energy_j = e;
}

/* A measured stage profile: per SM clock (descending from the top clock),
 * forward time (s) and energy (J), backward time and energy of one
 * microbatch.  Stage 0 of tests/data/profiles/gpt3-175b+*.csv (stages 0-6
 * are identical there), loaded with profile_load on first use. */
typedef struct {
  guint mhz;
  double fwd_t, fwd_e, bwd_t, bwd_e;
} StagePoint;

typedef struct StageProfile {
  const char *gpu;           /* catalogue entry */
  const char *file;          /* under tests/data/profiles/ */
  double limit_w;            /* the measured card's power limit */
  Profile *profile;          /* loaded by stage_load */
  StagePoint *pts;
  gsize n;
} StageProfile;

static StageProfile profiles[] = {
  {"A100-SXM4-80GB", "gpt3-175b+a100_sxm_bf16.csv", 500, NULL, NULL, 0},
  {"A40", "gpt3-175b+a40_bf16.csv", 300, NULL, NULL, 0},
};

static const ProfileOp *stage_op(const StageProfile *pr, gboolean backward)
{
  const ProfileOp *op = profile_find_stage(pr->profile, 0,
                                           backward ? "backward" : "forward");
  g_assert_nonnull(op);
  return op;
}

/* Loads pr's file (once). */
static StageProfile *stage_load(StageProfile *pr)
{
  if (pr->pts != NULL)
    return pr;
  g_autofree char *path = g_build_filename("tests", "data", "profiles",
                                           pr->file, NULL);
  GError *error = NULL;
  pr->profile = profile_load(path, &error);
  g_assert_no_error(error);
  const ProfileOp *f = stage_op(pr, FALSE), *b = stage_op(pr, TRUE);
  g_assert_cmpuint(f->points->len, ==, b->points->len);
  pr->n = f->points->len;
  pr->pts = g_new(StagePoint, pr->n);
  for (gsize i = 0; i < pr->n; i++) {
    /* Points are sorted ascending; the tests walk down from the top. */
    guint j = (guint)(pr->n - 1 - i);
    const ProfilePoint *fp = &g_array_index(f->points, ProfilePoint, j);
    const ProfilePoint *bp = &g_array_index(b->points, ProfilePoint, j);
    g_assert_cmpuint(fp->sm_mhz, ==, bp->sm_mhz);
    pr->pts[i] = (StagePoint){fp->sm_mhz, fp->time_s, fp->energy_j,
                              bp->time_s, bp->energy_j};
  }
  return pr;
}

static void stage_free_all(void)
{
  for (gsize i = 0; i < G_N_ELEMENTS(profiles); i++) {
    profile_free(profiles[i].profile);
    g_free(profiles[i].pts);
  }
}

/* How well the model reproduces a profile with spec g at the profile's
 * power limit: mean absolute percentage errors of energy and time (each
 * normalised at the top clock) and of absolute average power; the clock of
 * minimum energy (model and measured) and the energy and time ratios there.
 * [0] forward, [1] backward. */
typedef struct {
  double mape_e[2], mape_t[2], mape_p[2];
  guint min_mhz[2], meas_min_mhz[2];
  double min_e_ratio[2], min_t_ratio[2];
  double meas_min_e_ratio[2], meas_min_t_ratio[2];
  double p_top[2], p_bottom[2];           /* model average power (W) */
  double meas_p_top[2], meas_p_bottom[2]; /* measured */
} StageFit;

static void stage_fit(const GpuSpec *g, const StageProfile *pr, StageFit *r)
{
  const StagePoint *pts = pr->pts;
  gsize n = pr->n;
  for (int b = 0; b < 2; b++) {
    Mix m;
    stage_mix(&m, pr, b == 1);
    double t0, e0;
    mix_cost(g, &m, pts[0].mhz, pr->limit_w, &t0, &e0);
    double mt0 = b ? pts[0].bwd_t : pts[0].fwd_t;
    double me0 = b ? pts[0].bwd_e : pts[0].fwd_e;
    double se = 0, st = 0, sp = 0, best = G_MAXDOUBLE, meas_best = G_MAXDOUBLE;
    for (gsize i = 0; i < n; i++) {
      double mt = b ? pts[i].bwd_t : pts[i].fwd_t;
      double me = b ? pts[i].bwd_e : pts[i].fwd_e;
      double t, e;
      mix_cost(g, &m, pts[i].mhz, pr->limit_w, &t, &e);
      se += fabs((e / e0) / (me / me0) - 1);
      st += fabs((t / t0) / (mt / mt0) - 1);
      sp += fabs((e / t) / (me / mt) - 1);
      if (e < best) {
        best = e;
        r->min_mhz[b] = pts[i].mhz;
        r->min_e_ratio[b] = e / e0;
        r->min_t_ratio[b] = t / t0;
      }
      if (me < meas_best) {
        meas_best = me;
        r->meas_min_mhz[b] = pts[i].mhz;
        r->meas_min_e_ratio[b] = me / me0;
        r->meas_min_t_ratio[b] = mt / mt0;
      }
      if (i == n - 1) {
        r->p_bottom[b] = e / t;
        r->meas_p_bottom[b] = me / mt;
      }
    }
    r->p_top[b] = e0 / t0;
    r->meas_p_top[b] = me0 / mt0;
    r->mape_e[b] = 100 * se / (double)n;
    r->mape_t[b] = 100 * st / (double)n;
    r->mape_p[b] = 100 * sp / (double)n;
  }
}

/* The 8192^3 BF16 GEMM of docs/sources.md. */
static GpuKernel gemm8192(void)
{
  return kernel(SIM_CLASS_GEMM, 2.0 * 8192 * 8192 * 8192,
                3.0 * 8192 * 8192 * 2, TRUE);
}

/* ---------------------------------------------------------------------- */
/* Catalogue                                                               */

static void test_catalogue_validates(void)
{
  g_autoptr(GpuCatalogue) c = gpu_catalogue_new();
  g_autoptr(GPtrArray) names = gpu_catalogue_names(c);
  static const char *const required[] = {"A100-SXM4-40GB", "A100-SXM4-80GB",
                                         "H100-SXM5-80GB"};
  for (gsize i = 0; i < G_N_ELEMENTS(required); i++) {
    gboolean found = FALSE;
    for (guint j = 0; j < names->len; j++)
      found |= strcmp(g_ptr_array_index(names, j), required[i]) == 0;
    g_assert_true(found);
  }
  for (guint j = 0; j < names->len; j++) {
    const GpuSpec *g = lookup(c, g_ptr_array_index(names, j));
    GError *error = NULL;
    g_assert_true(gpu_spec_validate(g, &error));
    g_assert_no_error(error);
    /* Every parameter printed by describe has a non-empty source. */
    g_autoptr(GString) s = g_string_new(NULL);
    gpu_spec_describe(g, s);
    g_assert_null(strstr(s->str, "(no source)"));
    g_assert_nonnull(strstr(s->str, g->name));
    /* Auto clocks: max boost and the highest memory clock. */
    g_assert_cmpuint(gpu_snap_sm(g, 0), ==, (guint)g->sm_default_mhz.v);
    g_assert_cmpuint(gpu_snap_mem(g, 0), ==,
                     (guint)g->mem_mhz[g->n_mem_clocks - 1].v);
  }
}

static void test_catalogue_facts(void)
{
  g_autoptr(GpuCatalogue) c = gpu_catalogue_new();
  const GpuSpec *a40 = lookup(c, "A100-SXM4-40GB");
  const GpuSpec *a80 = lookup(c, "A100-SXM4-80GB");
  const GpuSpec *h = lookup(c, "H100-SXM5-80GB");
  /* docs/sources.md peaks: 312 TFLOP/s at 1410, 989 at 1830. */
  g_assert_true(test_close(gpu_peak_tensor_flops(a40, 1410), 312e12, 0.005));
  g_assert_true(test_close(gpu_peak_tensor_flops(h, 1830), 989e12, 0.005));
  g_assert_cmpfloat(a40->mem_mhz[0].v, ==, 1215);
  g_assert_cmpfloat(a80->mem_mhz[0].v, ==, 1593);
  g_assert_cmpfloat(a80->mem_bw_gbps.v, ==, 2039);
  g_assert_cmpfloat(a40->blocked_power_w.v, ==, 83.64);
  g_assert_cmpuint(gpu_sm_n_steps(a40), ==, 81);
  g_assert_cmpuint(gpu_sm_clock_at(h, 0), ==, 345);
  g_assert_cmpuint(gpu_sm_clock_at(h, gpu_sm_n_steps(h) - 1), ==, 1980);
}

static void test_lookup_unknown(void)
{
  g_autoptr(GpuCatalogue) c = gpu_catalogue_new();
  GError *error = NULL;
  g_assert_null(gpu_catalogue_lookup(c, "TPU-v5e", &error));
  g_assert_error(error, GPU_ERROR, GPU_ERROR_UNKNOWN);
  g_assert_nonnull(strstr(error->message, "'TPU-v5e'"));
  g_assert_nonnull(strstr(error->message, "A100-SXM4-40GB"));
  g_assert_nonnull(strstr(error->message, "H100-SXM5-80GB"));
  g_assert_null(strstr(error->message, "did you mean"));
  g_clear_error(&error);

  /* Case only: a suggestion. */
  g_assert_null(gpu_catalogue_lookup(c, "a100-sxm4-80gb", &error));
  g_assert_error(error, GPU_ERROR, GPU_ERROR_UNKNOWN);
  g_assert_nonnull(strstr(error->message, "did you mean 'A100-SXM4-80GB'?"));
  g_clear_error(&error);

  /* Two edits. */
  g_assert_null(gpu_catalogue_lookup(c, "H100-SXM-80G", &error));
  g_assert_error(error, GPU_ERROR, GPU_ERROR_UNKNOWN);
  g_assert_nonnull(strstr(error->message, "did you mean 'H100-SXM5-80GB'?"));
  g_clear_error(&error);

  /* A fragment: every name containing it. */
  g_assert_null(gpu_catalogue_lookup(c, "a100", &error));
  g_assert_error(error, GPU_ERROR, GPU_ERROR_UNKNOWN);
  g_assert_nonnull(strstr(error->message, "'A100-SXM4-40GB', "
                                          "'A100-SXM4-80GB'"));
  g_clear_error(&error);

  g_assert_null(gpu_catalogue_lookup(c, "", &error));
  g_assert_error(error, GPU_ERROR, GPU_ERROR_UNKNOWN);
  g_clear_error(&error);
}

/* define(): validation, copy, replace, append. */
static void test_define(void)
{
  g_autoptr(GpuCatalogue) c = gpu_catalogue_new();
  g_autoptr(GPtrArray) before = gpu_catalogue_names(c);
  guint n0 = before->len;

  g_autoptr(GpuSpec) s = gpu_spec_copy(lookup(c, "A100-SXM4-40GB"));
  g_free(s->name);
  s->name = g_strdup("A100-capped-300");
  s->power_limit_w.v = 300;
  s->power_limit_w.source = "test";
  GError *error = NULL;
  g_assert_true(gpu_catalogue_define(c, s, &error));
  g_assert_no_error(error);
  /* The catalogue holds a copy. */
  s->power_limit_w.v = 123;
  const GpuSpec *d = lookup(c, "A100-capped-300");
  g_assert_true(d != s);
  g_assert_cmpfloat(d->power_limit_w.v, ==, 300);
  g_assert_cmpstr(d->power_limit_w.source, ==, "test");
  g_autoptr(GPtrArray) after = gpu_catalogue_names(c);
  g_assert_cmpuint(after->len, ==, n0 + 1);
  g_assert_cmpstr(g_ptr_array_index(after, n0), ==, "A100-capped-300");

  /* Redefinition replaces in place. */
  s->power_limit_w.v = 250;
  g_assert_true(gpu_catalogue_define(c, s, &error));
  g_autoptr(GPtrArray) again = gpu_catalogue_names(c);
  g_assert_cmpuint(again->len, ==, n0 + 1);
  g_assert_cmpfloat(lookup(c, "A100-capped-300")->power_limit_w.v, ==, 250);
}

/* Invalid specs: each case breaks one field. */
typedef struct {
  const char *what;
  void (*breaks)(GpuSpec *s);
  const char *field; /* must appear in the message */
} InvalidCase;

static void br_name(GpuSpec *s) { g_free(s->name); s->name = g_strdup(""); }
static void br_name_space(GpuSpec *s)
{
  g_free(s->name);
  s->name = g_strdup("my gpu");
}
static void br_step(GpuSpec *s) { s->sm_step_mhz.v = 0; }
static void br_grid(GpuSpec *s) { s->sm_max_mhz.v = 1400; }
static void br_minmax(GpuSpec *s) { s->sm_min_mhz.v = 2000; }
static void br_default(GpuSpec *s) { s->sm_default_mhz.v = 1411; }
static void br_nmem(GpuSpec *s) { s->n_mem_clocks = 0; }
static void br_mem_order(GpuSpec *s)
{
  s->n_mem_clocks = 2;
  s->mem_mhz[1] = s->mem_mhz[0];
}
static void br_eff(GpuSpec *s) { s->eff_compute[SIM_CLASS_NORM].v = 1.5; }
static void br_eff0(GpuSpec *s) { s->eff_memory[SIM_CLASS_GEMM].v = 0; }
static void br_act(GpuSpec *s) { s->activity[SIM_CLASS_OTHER].v = -1; }
static void br_tf32(GpuSpec *s) { s->activity_tf32.v = 2.5; }
static void br_limit(GpuSpec *s) { s->power_limit_w.v = 50; }
static void br_nan(GpuSpec *s) { s->p_leak_w.v = NAN; }
static void br_volt(GpuSpec *s) { s->v_min.v = 1.2; }
static void br_knee(GpuSpec *s) { s->f_knee_mhz.v = 5000; }
static void br_bw(GpuSpec *s) { s->mem_bw_gbps.v = -1; }
static void br_issue(GpuSpec *s) { s->mem_issue_bytes_per_clk_sm.v = -1; }

static const InvalidCase invalid_cases[] = {
  {"empty-name", br_name, "name"},
  {"name-space", br_name_space, "name"},
  {"step", br_step, "sm_step_mhz"},
  {"grid", br_grid, "sm_max_mhz"},
  {"min-above-max", br_minmax, "sm_max_mhz"},
  {"default", br_default, "sm_default_mhz"},
  {"n-mem", br_nmem, "n_mem_clocks"},
  {"mem-order", br_mem_order, "mem_mhz.1"},
  {"eff-compute", br_eff, "eff_compute.norm"},
  {"eff-memory", br_eff0, "eff_memory.gemm"},
  {"activity", br_act, "activity.other"},
  {"activity-tf32", br_tf32, "activity_tf32"},
  {"limit", br_limit, "power_limit_w"},
  {"nan", br_nan, "p_leak_w"},
  {"voltage", br_volt, "v_max"},
  {"knee", br_knee, "f_knee_mhz"},
  {"bandwidth", br_bw, "mem_bw_gbps"},
  {"issue", br_issue, "mem_issue_bytes_per_clk_sm"},
};

static void test_define_invalid(gconstpointer data)
{
  const InvalidCase *ic = data;
  g_autoptr(GpuCatalogue) c = gpu_catalogue_new();
  g_autoptr(GpuSpec) s = gpu_spec_copy(lookup(c, "A100-SXM4-80GB"));
  g_free(s->name);
  s->name = g_strdup("broken");
  ic->breaks(s);
  GError *error = NULL;
  g_assert_false(gpu_spec_validate(s, &error));
  g_assert_error(error, GPU_ERROR, GPU_ERROR_INVALID);
  g_clear_error(&error);
  g_assert_false(gpu_catalogue_define(c, s, &error));
  g_assert_error(error, GPU_ERROR, GPU_ERROR_INVALID);
  if (strstr(error->message, ic->field) == NULL)
    g_error("%s: '%s' does not name %s", ic->what, error->message, ic->field);
  g_clear_error(&error);
  /* Nothing was added. */
  g_assert_null(gpu_catalogue_lookup(c, "broken", &error));
  g_assert_error(error, GPU_ERROR, GPU_ERROR_UNKNOWN);
  g_clear_error(&error);
}

static void test_copy_roundtrip(void)
{
  g_autoptr(GpuCatalogue) c = gpu_catalogue_new();
  const GpuSpec *g = lookup(c, "H100-SXM5-80GB");
  g_autoptr(GpuSpec) a = gpu_spec_copy(g);
  g_autoptr(GpuSpec) b = gpu_spec_copy(a);
  g_assert_true(a->name != g->name && b->name != a->name);
  g_assert_cmpstr(b->name, ==, g->name);
  g_assert_cmpstr(b->description, ==, g->description);
  g_autoptr(GString) dg = g_string_new(NULL);
  g_autoptr(GString) db = g_string_new(NULL);
  gpu_spec_describe(g, dg);
  gpu_spec_describe(b, db);
  g_assert_cmpstr(dg->str, ==, db->str);

  /* A source made on the heap survives its owner (copies intern it). */
  g_autofree char *src = g_strdup("heap source");
  a->p_dyn_w.source = src;
  g_autoptr(GpuSpec) c2 = gpu_spec_copy(a);
  g_assert_true(c2->p_dyn_w.source != src);
  g_clear_pointer(&src, g_free);
  g_assert_cmpstr(c2->p_dyn_w.source, ==, "heap source");
  gpu_spec_free(NULL);
}

static void test_spec_param(void)
{
  g_autoptr(GpuCatalogue) c = gpu_catalogue_new();
  g_autoptr(GpuSpec) s = gpu_spec_copy(lookup(c, "A100-SXM4-80GB"));
  g_assert_true(gpu_spec_param(s, "sm_max_mhz") == &s->sm_max_mhz);
  g_assert_true(gpu_spec_param(s, "mem_mhz.0") == &s->mem_mhz[0]);
  g_assert_null(gpu_spec_param(s, "mem_mhz.1"));
  g_assert_null(gpu_spec_param(s, "mem_mhz.x"));
  g_assert_true(gpu_spec_param(s, "eff_compute.gemm") ==
                &s->eff_compute[SIM_CLASS_GEMM]);
  g_assert_true(gpu_spec_param(s, "activity.other") ==
                &s->activity[SIM_CLASS_OTHER]);
  g_assert_null(gpu_spec_param(s, "activity.nope"));
  g_assert_null(gpu_spec_param(s, "nope"));
  /* Every name describe prints resolves. */
  g_autoptr(GString) d = g_string_new(NULL);
  gpu_spec_describe(s, d);
  g_auto(GStrv) lines = g_strsplit(d->str, "\n", -1);
  guint n = 0;
  for (guint i = 2; lines[i] != NULL; i++) {
    g_auto(GStrv) w = g_strsplit_set(g_strstrip(lines[i]), " ", 2);
    if (w[0] == NULL || strcmp(w[0], "derived:") == 0 ||
        strcmp(w[0], "n_mem_clocks") == 0 || w[0][0] == '\0')
      continue;
    g_assert_nonnull(gpu_spec_param(s, w[0]));
    n++;
  }
  g_assert_cmpuint(n, >=, 24 + 3 * SIM_CLASS_COUNT + 1);
}

/* ---------------------------------------------------------------------- */
/* Clocks                                                                  */

static void test_snap(void)
{
  g_autoptr(GpuCatalogue) c = gpu_catalogue_new();
  const GpuSpec *a = lookup(c, "A100-SXM4-40GB");
  g_assert_cmpuint(gpu_snap_sm(a, 0), ==, 1410);
  g_assert_cmpuint(gpu_snap_sm(a, 1), ==, 210);     /* clamped */
  g_assert_cmpuint(gpu_snap_sm(a, 5000), ==, 1410); /* clamped */
  g_assert_cmpuint(gpu_snap_sm(a, 1005), ==, 1005);
  g_assert_cmpuint(gpu_snap_sm(a, 1011), ==, 1005);
  g_assert_cmpuint(gpu_snap_sm(a, 1013), ==, 1020);
  g_assert_cmpuint(gpu_snap_sm(a, 1012), ==, 1005);
  g_assert_cmpuint(gpu_snap_sm(a, 1409), ==, 1410);
  /* Every snapped clock is on the grid and idempotent. */
  for (guint f = 1; f < 2000; f += 7) {
    guint s = gpu_snap_sm(a, f);
    g_assert_cmpuint((s - 210) % 15, ==, 0);
    g_assert_cmpuint(gpu_snap_sm(a, s), ==, s);
  }
  g_assert_cmpuint(gpu_snap_mem(a, 0), ==, 1215);
  g_assert_cmpuint(gpu_snap_mem(a, 1), ==, 1215);
  g_assert_cmpuint(gpu_snap_mem(a, 99999), ==, 1215);

  /* Several memory clocks: nearest, ties upwards. */
  g_autoptr(GpuSpec) s = gpu_spec_copy(a);
  s->n_mem_clocks = 3;
  s->mem_mhz[0].v = 400;
  s->mem_mhz[1].v = 800;
  s->mem_mhz[2].v = 5000;
  g_assert_true(gpu_spec_validate(s, NULL));
  g_assert_cmpuint(gpu_snap_mem(s, 0), ==, 5000);
  g_assert_cmpuint(gpu_snap_mem(s, 1), ==, 400);
  g_assert_cmpuint(gpu_snap_mem(s, 599), ==, 400);
  g_assert_cmpuint(gpu_snap_mem(s, 600), ==, 800);  /* tie: higher */
  g_assert_cmpuint(gpu_snap_mem(s, 2899), ==, 800);
  g_assert_cmpuint(gpu_snap_mem(s, 2900), ==, 5000); /* tie: higher */
  g_assert_cmpuint(gpu_snap_mem(s, 9000), ==, 5000);
}

static void test_voltage(void)
{
  g_autoptr(GpuCatalogue) c = gpu_catalogue_new();
  const GpuSpec *a = lookup(c, "A100-SXM4-80GB");
  double knee = a->f_knee_mhz.v;
  g_assert_cmpfloat(gpu_voltage(a, 210), ==, a->v_min.v);
  g_assert_cmpfloat(gpu_voltage(a, knee), ==, a->v_min.v);
  g_assert_cmpfloat(gpu_voltage(a, 1410), ==, a->v_max.v);
  /* Above the knee V rises as x^exp, x the position between knee and f_max:
   * at the midpoint 2^-exp of the way (half way when linear). */
  double e = a->v_curve_exp.v > 0 ? a->v_curve_exp.v : 1;
  g_assert_true(test_close(gpu_voltage(a, (knee + 1410) / 2),
                           a->v_min.v + (a->v_max.v - a->v_min.v) *
                                            pow(0.5, e),
                           1e-12));
  g_autoptr(GpuSpec) lin = gpu_spec_copy(a);
  lin->v_curve_exp.v = 0;
  g_assert_true(test_close(gpu_voltage(lin, (knee + 1410) / 2),
                           (a->v_min.v + a->v_max.v) / 2, 1e-12));
  /* Convex (exp > 1): never above the linear curve. */
  for (guint i = 0; i < gpu_sm_n_steps(a); i++) {
    double f = gpu_sm_clock_at(a, i);
    g_assert_cmpfloat(gpu_voltage(a, f), <=,
                      gpu_voltage(lin, f) + (e >= 1 ? 1e-12 : 1.0));
  }
  double prev = 0;
  for (guint i = 0; i < gpu_sm_n_steps(a); i++) {
    double v = gpu_voltage(a, gpu_sm_clock_at(a, i));
    g_assert_cmpfloat(v, >=, prev);
    prev = v;
  }
}

/* ---------------------------------------------------------------------- */
/* Time                                                                    */

/* Kernel shapes for the monotonicity sweep. */
typedef struct {
  const char *name;
  SimOpClass klass;
  double flops, bytes;
  gboolean tensor;
} Shape;

static const Shape shapes[] = {
  {"gemm-8192", SIM_CLASS_GEMM, 2.0 * 8192 * 8192 * 8192, 4.0e8, TRUE},
  {"gemm-skinny", SIM_CLASS_GEMM, 2.0 * 2048 * 64 * 12288, 5.3e7, TRUE},
  {"gemm-ridge", SIM_CLASS_GEMM, 2.0e9, 1.0e7, TRUE},
  {"attention", SIM_CLASS_ATTENTION, 1.3e10, 1.1e8, TRUE},
  {"elementwise", SIM_CLASS_ELEMENTWISE, 2.5e7, 3.0e8, FALSE},
  {"norm", SIM_CLASS_NORM, 2.0e8, 1.0e8, FALSE},
  {"softmax-tiny", SIM_CLASS_SOFTMAX, 1.0e4, 4.0e4, FALSE},
  {"optimizer", SIM_CLASS_OPTIMIZER, 1.0e9, 4.0e9, FALSE},
  {"memcpy", SIM_CLASS_MEMCPY, 0, 1.0e9, FALSE},
  {"flops-only", SIM_CLASS_OTHER, 1.0e9, 0, FALSE},
  {"relative-gemm", SIM_CLASS_GEMM, 0, 0, TRUE},
  {"relative-comm", SIM_CLASS_COMM, 0, 0, FALSE},
};

/* Over every catalogue GPU, all SM steps and memory clocks, no cap: time
 * never decreases when a clock is lowered (and strictly increases with the
 * SM clock lowered when the kernel has FLOPs), and power never rises. */
static void test_time_monotone(gconstpointer data)
{
  const Shape *sh = data;
  g_autoptr(GpuCatalogue) c = gpu_catalogue_new();
  g_autoptr(GPtrArray) names = gpu_catalogue_names(c);
  GpuKernel k = kernel(sh->klass, sh->flops, sh->bytes, sh->tensor);
  gboolean sm_work = sh->flops > 0 || sh->bytes == 0;
  for (guint j = 0; j < names->len; j++) {
    const GpuSpec *g = lookup(c, g_ptr_array_index(names, j));
    for (guint mi = 0; mi < g->n_mem_clocks; mi++) {
      guint m = (guint)g->mem_mhz[mi].v;
      GpuCost prev = {0};
      for (guint i = 0; i < gpu_sm_n_steps(g); i++) {
        GpuCost cost;
        gpu_kernel_cost(g, &k, gpu_sm_clock_at(g, i), m, GPU_POWER_UNCAPPED,
                        &cost);
        g_assert_false(cost.capped);
        g_assert_cmpuint(cost.sm_mhz, ==, gpu_sm_clock_at(g, i));
        g_assert_cmpuint(cost.mem_mhz, ==, m);
        g_assert_cmpfloat(cost.time_s, >, 0);
        g_assert_cmpfloat(cost.util_compute, >=, 0);
        g_assert_cmpfloat(cost.util_compute, <=, 1);
        g_assert_cmpfloat(cost.util_memory, >=, 0);
        g_assert_cmpfloat(cost.util_memory, <=, 1);
        if (i > 0) {
          /* i-1 is the lower clock: never faster, never more power. */
          g_assert_cmpfloat(prev.time_s, >=, cost.time_s);
          /* Strictly, where the SM-side share is not lost in rounding (at
           * a 405 MHz memory clock a streaming kernel's SM share is
           * ~1e-20 of its time). */
          if (sm_work && mi == g->n_mem_clocks - 1)
            g_assert_cmpfloat(prev.time_s, >, cost.time_s);
          g_assert_cmpfloat(prev.power_w, <=, cost.power_w * (1 + 1e-12));
        }
        /* Lower memory clock at the same SM clock: never faster. */
        if (mi > 0) {
          GpuCost lower;
          gpu_kernel_cost(g, &k, cost.sm_mhz, (guint)g->mem_mhz[mi - 1].v,
                          GPU_POWER_UNCAPPED, &lower);
          g_assert_cmpfloat(lower.time_s, >=, cost.time_s);
          g_assert_cmpfloat(lower.power_w, <=, cost.power_w * (1 + 1e-12));
        }
        prev = cost;
      }
    }
  }
}

/* Without counters the time is relative: 1 at max clocks, the documented
 * formula elsewhere. */
static void test_relative_time(void)
{
  g_autoptr(GpuCatalogue) c = gpu_catalogue_new();
  const GpuSpec *g = lookup(c, "A100-SXM4-80GB");
  for (int cl = 0; cl < SIM_CLASS_COUNT; cl++) {
    double ac, am, ao;
    gpu_class_time_fractions((SimOpClass)cl, &ac, &am, &ao);
    g_assert_true(test_close(ac + am + ao, 1, 1e-12));
    GpuKernel k = kernel((SimOpClass)cl, 0, 0, FALSE);
    GpuCost cost;
    gpu_kernel_cost(g, &k, 1410, 0, GPU_POWER_UNCAPPED, &cost);
    g_assert_true(test_close(cost.time_s, 1, 1e-12));
    gpu_kernel_cost(g, &k, 705, 0, GPU_POWER_UNCAPPED, &cost);
    g_assert_true(test_close(cost.time_s, 2 * ac + am + ao, 1e-12));
  }
}

/* Compute-bound kernels scale ~1/f. */
static void test_compute_bound_scaling(void)
{
  g_autoptr(GpuCatalogue) c = gpu_catalogue_new();
  const GpuSpec *g = lookup(c, "A100-SXM4-80GB");
  GpuKernel k = gemm8192();
  GpuCost hi, lo;
  gpu_kernel_cost(g, &k, 1410, 0, GPU_POWER_UNCAPPED, &hi);
  gpu_kernel_cost(g, &k, 705, 0, GPU_POWER_UNCAPPED, &lo);
  g_assert_true(test_close(lo.time_s / hi.time_s, 2.0, 0.01));
  /* Unthrottled: the published 295 TFLOP/s with zeros (+-1%). */
  g_assert_true(test_close(k.flops / hi.time_s, 295e12, 0.01));
  g_assert_cmpfloat(hi.util_compute, >, 0.98);
}

/* A memory-bound kernel is nearly flat down to the memory knee and slows
 * below it. */
static void test_memory_knee(void)
{
  g_autoptr(GpuCatalogue) c = gpu_catalogue_new();
  g_autoptr(GPtrArray) names = gpu_catalogue_names(c);
  for (guint j = 0; j < names->len; j++) {
    const GpuSpec *g = lookup(c, g_ptr_array_index(names, j));
    double knee = gpu_memory_knee_mhz(g, 0);
    g_assert_cmpfloat(knee, >, 0);
    g_assert_cmpfloat(knee, <, g->sm_max_mhz.v);
    /* 1 GB streamed, 1 FLOP per 8 bytes. */
    GpuKernel k = kernel(SIM_CLASS_ELEMENTWISE, 1.25e8, 1e9, FALSE);
    GpuCost top, at_knee, low;
    gpu_kernel_cost(g, &k, 0, 0, GPU_POWER_UNCAPPED, &top);
    if (knee <= g->sm_min_mhz.v) {
      /* Many SMs on slow memory (L40S: 142 SMs, 864 GB/s): the knee lies
       * below the lowest clock, so streaming is flat over the whole
       * range, within the smooth maximum's 9%. */
      gpu_kernel_cost(g, &k, (guint)g->sm_min_mhz.v, 0, GPU_POWER_UNCAPPED,
                      &low);
      g_assert_cmpfloat(1 - top.time_s / low.time_s, <, 0.10);
      continue;
    }
    guint fk = gpu_snap_sm(g, (guint)ceil(knee));
    if (fk < knee)
      fk += (guint)g->sm_step_mhz.v;
    gpu_kernel_cost(g, &k, fk, 0, GPU_POWER_UNCAPPED, &at_knee);
    double speed_loss = 1 - top.time_s / at_knee.time_s;
    g_assert_cmpfloat(speed_loss, >=, 0);
    g_assert_cmpfloat(speed_loss, <, 0.10);
    /* Near DRAM bandwidth at the top. */
    double bw = k.bytes / top.time_s / 1e9;
    g_assert_cmpfloat(bw, >, 0.75 * g->mem_bw_gbps.v);
    g_assert_cmpfloat(top.util_memory, >, 0.9);
    /* Below the knee it rises: at half the knee clock >= 1.5x. */
    gpu_kernel_cost(g, &k, gpu_snap_sm(g, (guint)(knee / 2)), 0,
                    GPU_POWER_UNCAPPED, &low);
    if (knee / 2 >= g->sm_min_mhz.v)
      g_assert_cmpfloat(low.time_s, >, 1.5 * top.time_s);
  }
}

/* ---------------------------------------------------------------------- */
/* Power and the cap                                                       */

/* docs/sources.md: the 8192^3 BF16 GEMM on a 400 W A100 is power-limited and
 * runs at 258 TFLOP/s (random data). */
static void test_gemm_power_limited(void)
{
  g_autoptr(GpuCatalogue) c = gpu_catalogue_new();
  static const char *const a100s[] = {"A100-SXM4-40GB", "A100-SXM4-80GB"};
  for (gsize j = 0; j < G_N_ELEMENTS(a100s); j++) {
    const GpuSpec *g = lookup(c, a100s[j]);
    GpuKernel k = gemm8192();
    GpuCost cost;
    gpu_kernel_cost(g, &k, 1410, 0, 400, &cost);
    g_assert_true(cost.capped);
    g_assert_cmpuint(cost.sm_mhz, <, 1410);
    g_assert_cmpfloat(cost.power_w, <=, 400);
    double tflops = k.flops / cost.time_s / 1e12;
    g_test_message("%s: 8192^3 GEMM at 400 W: %u MHz, %.1f W, %.1f TFLOP/s",
                   g->name, cost.sm_mhz, cost.power_w, tflops);
    /* Published: 258 (throttled) ... 295 (unthrottled); within 5% of 258. */
    g_assert_cmpfloat(fabs(tflops / 258 - 1), <, 0.05);
    /* The next grid step would exceed the limit. */
    GpuCost up;
    gpu_kernel_cost(g, &k, cost.sm_mhz + 15, 0, GPU_POWER_UNCAPPED, &up);
    g_assert_cmpfloat(up.power_w, >, 400);
    /* Limit <= 0 means the spec's default (400 W). */
    GpuCost dflt;
    gpu_kernel_cost(g, &k, 0, 0, 0, &dflt);
    g_assert_cmpuint(dflt.sm_mhz, ==, cost.sm_mhz);
  }
}

/* Published large-GEMM throughputs (docs/sources.md) at the default limit. */
typedef struct {
  const char *gpu;
  double lo_tflops, hi_tflops;
} GemmFigure;

static const GemmFigure gemm_figures[] = {
  {"A100-SXM4-40GB", 258 * 0.95, 258 * 1.05}, /* throttled, random data */
  {"A100-SXM4-80GB", 258 * 0.95, 258 * 1.05},
  {"RTX-3080-Ti", 65, 75},                    /* llm.c GEMMs */
};

static void test_gemm_published(gconstpointer data)
{
  const GemmFigure *gf = data;
  g_autoptr(GpuCatalogue) c = gpu_catalogue_new();
  const GpuSpec *g = lookup(c, gf->gpu);
  GpuKernel k = gemm8192();
  GpuCost cost;
  gpu_kernel_cost(g, &k, 0, 0, 0, &cost);
  double tflops = k.flops / cost.time_s / 1e12;
  g_test_message("%s: %.1f TFLOP/s at %u MHz, %.0f W", gf->gpu, tflops,
                 cost.sm_mhz, cost.power_w);
  g_assert_true(cost.capped);
  g_assert_cmpfloat(tflops, >=, gf->lo_tflops);
  g_assert_cmpfloat(tflops, <=, gf->hi_tflops);
}

/* After the cap, power never exceeds the limit unless already at sm_min;
 * the chosen clock is the highest that fits. */
static void test_cap_respects_limit(void)
{
  g_autoptr(GpuCatalogue) c = gpu_catalogue_new();
  g_autoptr(GPtrArray) names = gpu_catalogue_names(c);
  for (guint j = 0; j < names->len; j++) {
    const GpuSpec *g = lookup(c, g_ptr_array_index(names, j));
    for (gsize s = 0; s < G_N_ELEMENTS(shapes); s++) {
      GpuKernel k = kernel(shapes[s].klass, shapes[s].flops, shapes[s].bytes,
                           shapes[s].tensor);
      for (double lim = 20; lim <= g->power_max_w.v + 100; lim += 37) {
        for (guint i = 0; i < gpu_sm_n_steps(g); i += 5) {
          guint f = gpu_sm_clock_at(g, i);
          GpuCost cost, free_run;
          gpu_kernel_cost(g, &k, f, 0, lim, &cost);
          gpu_kernel_cost(g, &k, f, 0, GPU_POWER_UNCAPPED, &free_run);
          g_assert_cmpuint(cost.sm_mhz, <=, f);
          if (cost.sm_mhz > g->sm_min_mhz.v || !cost.capped)
            g_assert_true(cost.power_w <= lim ||
                          (cost.sm_mhz == g->sm_min_mhz.v && !cost.capped &&
                           f == g->sm_min_mhz.v));
          if (free_run.power_w <= lim) {
            g_assert_false(cost.capped);
            g_assert_cmpfloat(cost.time_s, ==, free_run.time_s);
          } else if (f > g->sm_min_mhz.v) {
            g_assert_true(cost.capped);
            g_assert_cmpfloat(cost.time_s, >=, free_run.time_s);
            /* Highest fitting step: one step up does not fit. */
            if (cost.power_w <= lim && cost.sm_mhz < f) {
              GpuCost up;
              gpu_kernel_cost(g, &k, cost.sm_mhz + (guint)g->sm_step_mhz.v, 0,
                              GPU_POWER_UNCAPPED, &up);
              g_assert_cmpfloat(up.power_w, >, lim);
            }
          }
        }
      }
    }
  }
}

/* On a power-limited card lowering the memory clock can speed a
 * compute-bound kernel up (DESIGN section 4). */
static void test_mem_clock_frees_power(void)
{
  g_autoptr(GpuCatalogue) c = gpu_catalogue_new();
  g_autoptr(GpuSpec) s = gpu_spec_copy(lookup(c, "A100-SXM4-40GB"));
  s->n_mem_clocks = 2;
  s->mem_mhz[1] = s->mem_mhz[0];
  s->mem_mhz[0].v = 810;
  g_assert_true(gpu_spec_validate(s, NULL));
  GpuKernel k = gemm(8192, 8192, 1024); /* more memory traffic per FLOP */
  GpuCost hi, lo;
  gpu_kernel_cost(s, &k, 1410, 1215, 300, &hi);
  gpu_kernel_cost(s, &k, 1410, 810, 300, &lo);
  g_assert_true(hi.capped);
  g_assert_cmpuint(lo.sm_mhz, >=, hi.sm_mhz);
  g_assert_cmpfloat(lo.power_w, <=, 300);
}

/* The stage mixture: U-shaped energy with a minimum between 900 and 1200
 * MHz, time rising as the clock falls. */
/* The stall term: SMs with resident warps waiting on memory keep drawing
 * switching power that goes with f V^2.  On the RTX 3080 Ti (GA102, the
 * A40 fit's stall activity) a streaming kernel at the default clocks draws
 * what the kernel-DVFS study measured for nearly every kernel, 330-350 W
 * at the 350 W limit; lowering the SM clock to 630 MHz keeps its time
 * (above the memory knee) and cuts its energy by a quarter or more (the
 * study: 29-33%).  Without the term the same kernel draws far less. */
static void test_stall_memory_bound(void)
{
  g_autoptr(GpuCatalogue) c = gpu_catalogue_new();
  const GpuSpec *g = lookup(c, "RTX-3080-Ti");
  g_assert_cmpfloat(g->stall_activity.v, >, 0);
  /* llm.c's GeLU on GPT-3 XL: 40960 x 8192 BF16 read and written. */
  GpuKernel k = {SIM_CLASS_ELEMENTWISE, 15.0 * 40960 * 8192,
                 4.0 * 40960 * 8192, SIM_MATH_VECTOR};
  GpuCost a, lo;
  gpu_kernel_cost(g, &k, 0, 0, 350, &a);
  gpu_kernel_cost(g, &k, 630, 0, 350, &lo);
  g_test_message("RTX-3080-Ti GeLU: %.0f W at %u MHz, %.0f W at 630 MHz "
                 "(time %+.2f%%, energy %+.1f%%)", a.power_w, a.sm_mhz,
                 lo.power_w, 100 * (lo.time_s / a.time_s - 1),
                 100 * (lo.time_s * lo.power_w / (a.time_s * a.power_w) - 1));
  g_assert_cmpfloat(a.power_w, >=, 330);
  g_assert_cmpfloat(a.power_w, <=, 350 + 1e-9);
  g_assert_cmpfloat(lo.time_s, <, 1.02 * a.time_s);
  g_assert_cmpfloat(lo.time_s * lo.power_w, <, 0.75 * a.time_s * a.power_w);
  g_autoptr(GpuSpec) none = gpu_spec_copy(g);
  none->stall_activity.v = 0;
  GpuCost n;
  gpu_kernel_cost(none, &k, 0, 0, 350, &n);
  g_assert_cmpfloat(n.power_w, <, a.power_w - 50);
  /* A compute-bound GEMM (u_s near 1) hardly sees the term. */
  GpuKernel gm = gemm8192();
  GpuCost with, without;
  gpu_kernel_cost(g, &gm, 1200, 0, GPU_POWER_UNCAPPED, &with);
  gpu_kernel_cost(none, &gm, 1200, 0, GPU_POWER_UNCAPPED, &without);
  g_assert_cmpfloat(with.power_w / without.power_w - 1, <, 0.02);
}

/* GDDR6X's static power: the study's large GEMMs get faster and cheaper
 * at 5001 MHz memory (measured -2.1 to -3.0% time, -13.8 to -15.7%
 * energy): the freed power lets the SMs hold the boost clock. */
static void test_gddr6x_gemm(void)
{
  g_autoptr(GpuCatalogue) c = gpu_catalogue_new();
  const GpuSpec *g = lookup(c, "RTX-3080-Ti");
  /* fc_gemm: 40960 x 2048 x 8192, BF16. */
  double m = 40960, kk = 2048, nn = 8192;
  GpuKernel k = {SIM_CLASS_GEMM, 2 * m * kk * nn,
                 2 * (m * kk + kk * nn + m * nn), SIM_MATH_TENSOR};
  GpuCost top, low;
  gpu_kernel_cost(g, &k, 0, 9501, 350, &top);
  gpu_kernel_cost(g, &k, 0, 5001, 350, &low);
  double dt = 100 * (low.time_s / top.time_s - 1);
  double de = 100 * (low.time_s * low.power_w / (top.time_s * top.power_w) - 1);
  g_test_message("RTX-3080-Ti fc GEMM at 5001 MHz memory: time %+.2f%%, "
                 "energy %+.2f%% (%u -> %u MHz SM)", dt, de, top.sm_mhz,
                 low.sm_mhz);
  g_assert_true(top.capped);
  g_assert_cmpfloat(dt, <, -1);
  g_assert_cmpfloat(de, <, -10);
}

static void test_stage_energy_u_shape(void)
{
  g_autoptr(GpuCatalogue) c = gpu_catalogue_new();
  static const char *const a100s[] = {"A100-SXM4-40GB", "A100-SXM4-80GB"};
  for (gsize j = 0; j < G_N_ELEMENTS(a100s); j++) {
    const GpuSpec *g = lookup(c, a100s[j]);
    for (int b = 0; b < 2; b++) {
      Mix m;
      stage_mix(&m, stage_load(&profiles[0]), b == 1);
      double e_top, t_top, e_low, t_low, best = G_MAXDOUBLE, prev_t = 0;
      guint best_f = 0;
      mix_cost(g, &m, 1410, 0, &t_top, &e_top);
      mix_cost(g, &m, 210, 0, &t_low, &e_low);
      for (guint i = gpu_sm_n_steps(g); i-- > 0;) {
        guint f = gpu_sm_clock_at(g, i);
        double t, e;
        mix_cost(g, &m, f, 0, &t, &e);
        g_assert_cmpfloat(t, >=, prev_t);
        prev_t = t;
        if (e < best) {
          best = e;
          best_f = f;
        }
      }
      g_test_message("%s %s: min energy at %u MHz (%.3f of 1410)", g->name,
                     b ? "backward" : "forward", best_f, best / e_top);
      g_assert_cmpuint(best_f, >=, 900);
      g_assert_cmpuint(best_f, <=, 1200);
      g_assert_cmpfloat(best, <, 0.9 * e_top);
      g_assert_cmpfloat(e_low, >, 1.1 * best); /* rises again */
    }
  }
}

/* ---------------------------------------------------------------------- */
/* Calibration against the measured profile                                */

/* Per-profile tolerances of the calibration test. */
typedef struct {
  double mape_e, mape_t, mape_p; /* % */
  guint min_steps;               /* min-energy clock within this many steps */
  double min_e, min_t;           /* |model - measured| ratio at the minimum */
} Tolerance;

static const Tolerance tolerances[] = {
  {5, 5, 5, 2, 0.04, 0.06},  /* A100 */
  {9, 12, 7, 8, 0.12, 0.20}, /* A40: see docs/gpu-model.md */
};

/* With --verbose: the model and measured curves, clock by clock. */
static void print_curve(const GpuSpec *g, const StageProfile *pr,
                        gboolean bwd)
{
  Mix m;
  stage_mix(&m, pr, bwd);
  double t0, e0;
  mix_cost(g, &m, pr->pts[0].mhz, pr->limit_w, &t0, &e0);
  double mt0 = bwd ? pr->pts[0].bwd_t : pr->pts[0].fwd_t;
  double me0 = bwd ? pr->pts[0].bwd_e : pr->pts[0].fwd_e;
  g_test_message("  MHz  t/t0 meas model   E/E0 meas model   P meas model");
  for (gsize i = 0; i < pr->n; i++) {
    double mt = bwd ? pr->pts[i].bwd_t : pr->pts[i].fwd_t;
    double me = bwd ? pr->pts[i].bwd_e : pr->pts[i].fwd_e;
    double t, e;
    mix_cost(g, &m, pr->pts[i].mhz, pr->limit_w, &t, &e);
    g_test_message("  %4u  %.3f %.3f   %.3f %.3f   %4.0f %4.0f",
                   pr->pts[i].mhz, mt / mt0, t / t0, me / me0, e / e0,
                   me / mt, e / t);
  }
  g_test_message("  absolute time at %u MHz: measured %.4f s, model %.4f s",
                 pr->pts[0].mhz, mt0, t0);
}

static void test_calibration_perseus(gconstpointer data)
{
  const StageProfile *pr = stage_load((StageProfile *)data);
  const Tolerance *tol = &tolerances[pr - profiles];
  g_autoptr(GpuCatalogue) c = gpu_catalogue_new();
  const GpuSpec *g = lookup(c, pr->gpu);
  StageFit r;
  stage_fit(g, pr, &r);
  static const char *const pass[] = {"forward", "backward"};
  for (int b = 0; b < 2; b++) {
    g_test_message(
        "%s %s: MAPE energy %.2f%% time %.2f%% power %.2f%%; min energy at "
        "%u MHz (measured %u): E %.3f (%.3f), t %.3f (%.3f); power %.0f W "
        "(%.0f) at %u MHz, %.0f W (%.0f) at %u MHz",
        pr->file, pass[b], r.mape_e[b], r.mape_t[b], r.mape_p[b],
        r.min_mhz[b], r.meas_min_mhz[b], r.min_e_ratio[b],
        r.meas_min_e_ratio[b], r.min_t_ratio[b], r.meas_min_t_ratio[b],
        r.p_top[b], r.meas_p_top[b], pr->pts[0].mhz, r.p_bottom[b],
        r.meas_p_bottom[b], pr->pts[pr->n - 1].mhz);
    if (g_test_verbose())
      print_curve(g, pr, b == 1);
    g_assert_cmpfloat(r.mape_e[b], <, tol->mape_e);
    g_assert_cmpfloat(r.mape_t[b], <, tol->mape_t);
    g_assert_cmpfloat(r.mape_p[b], <, tol->mape_p);
    g_assert_cmpfloat(fabs((double)r.min_mhz[b] - r.meas_min_mhz[b]), <=,
                      tol->min_steps * g->sm_step_mhz.v);
    g_assert_cmpfloat(fabs(r.min_e_ratio[b] - r.meas_min_e_ratio[b]), <,
                      tol->min_e);
    g_assert_cmpfloat(fabs(r.min_t_ratio[b] - r.meas_min_t_ratio[b]), <,
                      tol->min_t);
  }
}

/* Nelder-Mead (models/numeric.c) over n parameters from x (in/out) for
 * `iters` iterations: the first simplex steps 15% of each range inwards;
 * the objective itself rejects points outside the box.  Returns the
 * objective at x. */
static double nm_minimize(NumObjective fn, void *data, int n, double *x,
                          const double *lo, const double *hi, int iters)
{
  double step[NUM_NM_MAX];
  g_assert(n > 0 && n <= NUM_NM_MAX);
  for (int k = 0; k < n; k++) {
    double d = 0.15 * (hi[k] - lo[k]);
    step[k] = x[k] + d <= hi[k] ? d : -d;
  }
  return num_nelder_mead(fn, data, (guint)n, x, step, NULL, NULL,
                         (guint)iters, NULL);
}

/* ---- The voltage-frequency curve: the KernelTuner sweep ---------------- */

/* measured/kerneltuner/a100_pcie_40gb_fp32_synthetic.csv: one FP32 kernel
 * on A100 PCIe 40GB at 10 locked SM clocks, NVML board power (W).  Its
 * time scales as 1/f (within 0.6%), so it is compute-bound at every clock
 * and its power is P_const + P_leak V^3 + B f V^2 with one unknown B (its
 * activity): the curve's shape is V(f). */
static const double kt_points[][2] = {
  {1410, 153.408}, {1275, 116.619}, {1140, 91.995}, {1005, 78.121},
  {870, 71.457},   {735, 64.991},   {600, 58.598},  {465, 52.724},
  {330, 47.026},   {210, 42.002},
};

typedef struct {
  double fmax;
  double rho;        /* P_leak / P_const of the catalogue entry (fixed) */
  double a, b;       /* last solve: floor P_const and the kernel's B */
  double max_err;    /* largest relative error (%) of the last solve */
} VcurveFit;

/* Relative SSE of the sweep for V shape x = (v_min, knee, exp), with the
 * floor A (P_leak = rho A) and the kernel's B solved by least squares. */
static double vcurve_objective(const double *x, void *data)
{
  VcurveFit *vf = data;
  if (x[0] < 0.4 || x[0] > 0.99 || x[1] < 300 || x[1] > vf->fmax - 30 ||
      x[2] < 0.5 || x[2] > 4)
    return 1e9;
  double g[2][2] = {{0}}, r[2] = {0};
  for (gsize i = 0; i < G_N_ELEMENTS(kt_points); i++) {
    double f = kt_points[i][0], p = kt_points[i][1];
    double v = gpu_voltage_ratio(x[0], x[1], vf->fmax, x[2], f);
    double u[2] = {(1 + vf->rho * v * v * v) / p, f / vf->fmax * v * v / p};
    for (int a = 0; a < 2; a++) {
      r[a] += u[a];
      for (int b = 0; b < 2; b++)
        g[a][b] += u[a] * u[b];
    }
  }
  double det = g[0][0] * g[1][1] - g[0][1] * g[1][0];
  vf->a = (r[0] * g[1][1] - r[1] * g[0][1]) / det;
  vf->b = (g[0][0] * r[1] - g[1][0] * r[0]) / det;
  double sse = 0;
  vf->max_err = 0;
  for (gsize i = 0; i < G_N_ELEMENTS(kt_points); i++) {
    double f = kt_points[i][0], p = kt_points[i][1];
    double v = gpu_voltage_ratio(x[0], x[1], vf->fmax, x[2], f);
    double e = (vf->a * (1 + vf->rho * v * v * v) +
                vf->b * f / vf->fmax * v * v) / p - 1;
    sse += e * e;
    vf->max_err = MAX(vf->max_err, 100 * fabs(e));
  }
  return sse;
}

/* vcurve_objective of a linear curve (exponent 1), x = (v_min, knee). */
static double vcurve_linear_objective(const double *x, void *data)
{
  const double x3[3] = {x[0], x[1], 1};
  return vcurve_objective(x3, data);
}

/* Refits the GA100 V(f) shape to the sweep and checks the catalogue's
 * rounded values: within 1.5% at every clock and no worse than 10% above
 * the refit's SSE.  docs/gpu-model.md quotes the printed figures. */
static void test_calibration_vcurve(void)
{
  g_autoptr(GpuCatalogue) c = gpu_catalogue_new();
  const GpuSpec *g = lookup(c, "A100-PCIE-80GB");
  VcurveFit vf = {.fmax = g->sm_max_mhz.v,
                  .rho = g->p_leak_w.v / g->p_const_w.v};
  double cat[3] = {g->v_min.v / g->v_max.v, g->f_knee_mhz.v,
                   g->v_curve_exp.v > 0 ? g->v_curve_exp.v : 1};
  double f_cat = vcurve_objective(cat, &vf);
  double cat_err = vf.max_err, cat_floor = vf.a;
  double x[3] = {0.75, 1000, 1.5};
  static const double lo[3] = {0.4, 300, 0.5}, hi[3] = {0.99, 1380, 4};
  double f = 0;
  for (int restart = 0; restart < 4; restart++)
    f = nm_minimize(vcurve_objective, &vf, 3, x, lo, hi, 800);
  vcurve_objective(x, &vf);
  g_test_message("V(f) refit to the KernelTuner sweep: v_min %.4f, knee "
                 "%.1f MHz, exponent %.3f (floor %.1f W, kernel %.1f W at "
                 "f_max V_max); max error %.2f%%, rms %.2f%%",
                 x[0], x[1], x[2], vf.a, vf.b, vf.max_err,
                 100 * sqrt(f / G_N_ELEMENTS(kt_points)));
  vcurve_objective(cat, &vf);
  g_test_message("catalogue V(f): v_min %.4f, knee %.0f MHz, exponent %.2f: "
                 "max error %.2f%%, rms %.2f%%",
                 cat[0], cat[1], cat[2], cat_err,
                 100 * sqrt(f_cat / G_N_ELEMENTS(kt_points)));
  g_assert_cmpfloat(cat_err, <, 1.5);
  /* The PCIe entry's floor P_const is the sweep's, within 5%. */
  g_assert_cmpfloat(fabs(g->p_const_w.v / cat_floor - 1), <, 0.05);
  g_assert_cmpfloat(f_cat, <=, 1.1 * f + 1e-6);
  /* The linear curve the catalogue had before misses it by more. */
  double x_lin[2] = {0.75, 1000};
  static const double lo_l[2] = {0.4, 300}, hi_l[2] = {0.99, 1380};
  double f_lin = nm_minimize(vcurve_linear_objective, &vf, 2, x_lin, lo_l,
                             hi_l, 800);
  g_test_message("best linear V(f): v_min %.4f, knee %.0f MHz: rms %.2f%%",
                 x_lin[0], x_lin[1],
                 100 * sqrt(f_lin / G_N_ELEMENTS(kt_points)));
  g_assert_cmpfloat(f_lin, >, f_cat);
}

/* ---- Stage-profile fits --------------------------------------------------- */

/* Re-runs the fit of a profile's power parameters (Nelder-Mead on the
 * objective below, from the catalogue values, with restarts) and prints the
 * fitted values; docs/gpu-model.md records them.  Only with -m thorough.
 * The V(f) shape (v_min, f_knee) is fitted too: the SXM4 and A40 boards
 * have no locked-clock sweep of their own (the PCIe A100's comes from the
 * KernelTuner sweep above). */
enum { FIT_P_CONST, FIT_P_DYN, FIT_P_LEAK, FIT_ACT_VEC, FIT_STALL, FIT_V_MIN,
       FIT_F_KNEE, FIT_N };
static const char *const fit_names[FIT_N] = {"p_const_w", "p_dyn_w",
                                             "p_leak_w", "activity(vector)",
                                             "stall_activity", "v_min",
                                             "f_knee_mhz"};

typedef struct {
  const StageProfile *pr;
  GpuSpec *spec;   /* the profile's GPU (modified) */
  GpuSpec *gemm;   /* A100 40GB for the 258 TFLOP/s constraint, or NULL */
  double lo[FIT_N], hi[FIT_N];
} FitProblem;

static void fit_apply(GpuSpec *s, const double *x, int n)
{
  s->p_const_w.v = x[FIT_P_CONST];
  s->p_dyn_w.v = x[FIT_P_DYN];
  s->p_leak_w.v = x[FIT_P_LEAK];
  s->stall_activity.v = x[FIT_STALL];
  if (n > FIT_V_MIN) {
    s->v_min.v = x[FIT_V_MIN];
    s->f_knee_mhz.v = x[FIT_F_KNEE];
  }
  static const SimOpClass vec[] = {SIM_CLASS_ELEMENTWISE, SIM_CLASS_NORM,
                                   SIM_CLASS_SOFTMAX, SIM_CLASS_REDUCTION,
                                   SIM_CLASS_EMBEDDING, SIM_CLASS_OPTIMIZER};
  for (gsize i = 0; i < G_N_ELEMENTS(vec); i++)
    s->activity[vec[i]].v = x[FIT_ACT_VEC];
}


/* Objective: energy-curve and power-curve MAPE (%) of both passes, half a
 * point per step of min-energy clock error, the blocking-power term below
 * and, for A100, 2 points per percent of GEMM throughput error against 258
 * TFLOP/s at 400 W. */
static double fit_objective(const double *x, void *data)
{
  FitProblem *fp = data;
  int n = FIT_N;
  for (int i = 0; i < n; i++)
    if (x[i] < fp->lo[i] || x[i] > fp->hi[i])
      return 1e9;
  fit_apply(fp->spec, x, n);
  StageFit r;
  stage_fit(fp->spec, fp->pr, &r);
  double f = 0;
  for (int b = 0; b < 2; b++)
    f += r.mape_e[b] + r.mape_p[b] +
         0.5 * fabs((double)r.min_mhz[b] - r.meas_min_mhz[b]) /
             fp->spec->sm_step_mhz.v;
  /* A GPU blocked in NCCL spins at full clocks with its SMs idle: it draws
   * the model's floor P_const + P_leak(V_max); 1 point per 2% off the
   * published blocking power.  This separates P_const from P_leak, which
   * the stage curves alone do not. */
  f += 50 * fabs((x[FIT_P_CONST] + x[FIT_P_LEAK]) /
                     fp->spec->blocked_power_w.v -
                 1);
  if (fp->gemm != NULL) {
    fit_apply(fp->gemm, x, n);
    GpuKernel k = gemm8192();
    GpuCost cost;
    gpu_kernel_cost(fp->gemm, &k, 1410, 0, 400, &cost);
    f += 200 * fabs(k.flops / cost.time_s / 1e12 / 258 - 1);
  }
  return f;
}

static void test_calibration_fit(gconstpointer data)
{
  const StageProfile *pr = stage_load((StageProfile *)data);
  if (!g_test_thorough()) {
    g_test_skip("the fit runs with -m thorough");
    return;
  }
  g_autoptr(GpuCatalogue) c = gpu_catalogue_new();
  const GpuSpec *g = lookup(c, pr->gpu);
  g_autoptr(GpuSpec) spec = gpu_spec_copy(g);
  g_autoptr(GpuSpec) gemm_spec = NULL;
  if (strncmp(pr->gpu, "A100", 4) == 0)
    gemm_spec = gpu_spec_copy(lookup(c, "A100-SXM4-40GB"));
  double fmin = g->sm_min_mhz.v, fmax = g->sm_max_mhz.v;
  FitProblem fp = {
    .pr = pr, .spec = spec, .gemm = gemm_spec,
    .lo = {10, 100, 0, 0.05, 0, 0.5, fmin + 0.3 * (fmax - fmin)},
    .hi = {150, 900, 250, 1.0, 1.0, 0.98, fmax - 2 * g->sm_step_mhz.v},
  };
  int n = FIT_N;
  double cat[FIT_N] = {g->p_const_w.v, g->p_dyn_w.v, g->p_leak_w.v,
                       g->activity[SIM_CLASS_ELEMENTWISE].v,
                       g->stall_activity.v, g->v_min.v, g->f_knee_mhz.v};
  double x[FIT_N];
  for (int i = 0; i < FIT_N; i++)
    x[i] = CLAMP(cat[i], fp.lo[i], fp.hi[i]);
  double f = 0;
  for (int restart = 0; restart < 6; restart++)
    f = nm_minimize(fit_objective, &fp, n, x, fp.lo, fp.hi, 1500);
  g_autoptr(GString) out = g_string_new(NULL);
  for (int i = 0; i < n; i++)
    g_string_append_printf(out, " %s %.4g", fit_names[i], x[i]);
  g_test_message("fit %s (%s): objective %.3f:%s", pr->gpu, pr->file, f,
                 out->str);
  fit_apply(spec, x, n);
  StageFit r;
  stage_fit(spec, pr, &r);
  g_test_message("fitted: energy MAPE %.2f/%.2f%%, power MAPE %.2f/%.2f%%, "
                 "min at %u/%u MHz (measured %u/%u)",
                 r.mape_e[0], r.mape_e[1], r.mape_p[0], r.mape_p[1],
                 r.min_mhz[0], r.min_mhz[1], r.meas_min_mhz[0],
                 r.meas_min_mhz[1]);
  if (gemm_spec != NULL) {
    GpuKernel k = gemm8192();
    GpuCost cost;
    gpu_kernel_cost(gemm_spec, &k, 1410, 0, 400, &cost);
    g_test_message("fitted: A100 40GB GEMM %.1f TFLOP/s at %u MHz",
                   k.flops / cost.time_s / 1e12, cost.sm_mhz);
  }
  /* The catalogue's rounded values are no worse than 10% above the fit. */
  double fc = fit_objective(cat, &fp);
  g_test_message("catalogue values: objective %.3f", fc);
  g_assert_cmpfloat(fc, <=, 1.1 * f + 0.5);
}

/* Prints the calibration figures quoted in docs/gpu-model.md for every
 * catalogue GPU: GEMM under the default cap, stage min-energy clock. */
static void test_calibration_report(void)
{
  g_autoptr(GpuCatalogue) c = gpu_catalogue_new();
  g_autoptr(GPtrArray) names = gpu_catalogue_names(c);
  for (guint j = 0; j < names->len; j++) {
    const GpuSpec *g = lookup(c, g_ptr_array_index(names, j));
    GpuKernel k = gemm8192();
    GpuCost capped, top;
    gpu_kernel_cost(g, &k, 0, 0, 0, &capped);
    gpu_kernel_cost(g, &k, 0, 0, GPU_POWER_UNCAPPED, &top);
    Mix m;
    stage_mix(&m, stage_load(&profiles[0]), TRUE);
    double t0, e0, best = G_MAXDOUBLE, best_t = 0;
    guint best_f = 0;
    mix_cost(g, &m, 0, 0, &t0, &e0);
    for (guint i = 0; i < gpu_sm_n_steps(g); i++) {
      double t, e;
      mix_cost(g, &m, gpu_sm_clock_at(g, i), 0, &t, &e);
      if (e < best) {
        best = e;
        best_t = t;
        best_f = gpu_sm_clock_at(g, i);
      }
    }
    g_test_message("%-16s GEMM8192 %.0f W uncapped at %u MHz (%.0f TFLOP/s); "
                   "at %.0f W: %u MHz %.0f TFLOP/s; stage bwd min energy %u "
                   "MHz (E %.3f, t %.3f); knee %.0f MHz",
                   g->name, top.power_w, top.sm_mhz,
                   k.flops / top.time_s / 1e12, g->power_limit_w.v,
                   capped.sm_mhz, k.flops / capped.time_s / 1e12, best_f,
                   best / e0, best_t / t0, gpu_memory_knee_mhz(g, 0));
    g_assert_cmpfloat(best, <=, e0);
  }
}

/* The math units' rates: the datasheet TF32 figures where the catalogue
 * has them (A100: 156 TFLOP/s dense = 1024 FLOP/clk/SM at 1410 MHz), half
 * the BF16 rate where a spec leaves tf32_flop_per_clk_sm at 0. */
static void test_math_rates(void)
{
  g_autoptr(GpuCatalogue) cat = gpu_catalogue_new();
  const GpuSpec *a100 = gpu_catalogue_lookup(cat, "A100-SXM4-80GB", NULL);
  g_assert_nonnull(a100);
  g_assert_cmpfloat(gpu_flop_per_clk_sm(a100, SIM_MATH_TENSOR), ==, 2048);
  g_assert_cmpfloat(gpu_flop_per_clk_sm(a100, SIM_MATH_TF32), ==, 1024);
  g_assert_cmpfloat(gpu_flop_per_clk_sm(a100, SIM_MATH_VECTOR), ==, 128);
  double tflops = a100->n_sm.v * gpu_flop_per_clk_sm(a100, SIM_MATH_TF32) *
                  1410e6 * 1e-12;
  g_assert_cmpfloat(fabs(tflops - 156), <, 0.5);
  g_autoptr(GpuSpec) s = gpu_spec_copy(a100);
  s->tf32_flop_per_clk_sm.v = 0;
  g_assert_cmpfloat(gpu_flop_per_clk_sm(s, SIM_MATH_TF32), ==, 1024);
  s->tensor_flop_per_clk_sm.v = 1000;
  g_assert_cmpfloat(gpu_flop_per_clk_sm(s, SIM_MATH_TF32), ==, 500);
  GError *error = NULL;
  g_assert_true(gpu_spec_validate(s, &error));
  g_assert_no_error(error);
  /* Every catalogue GPU's TF32 rate is a published figure, below BF16. */
  g_autoptr(GPtrArray) names = gpu_catalogue_names(cat);
  for (guint i = 0; i < names->len; i++) {
    const GpuSpec *g = gpu_catalogue_lookup(cat, g_ptr_array_index(names, i),
                                            NULL);
    g_assert_cmpfloat(g->tf32_flop_per_clk_sm.v, >, 0);
    g_assert_cmpfloat(g->tf32_flop_per_clk_sm.v, <, g->tensor_flop_per_clk_sm.v);
    g_assert_nonnull(g->tf32_flop_per_clk_sm.source);
  }
}

/* A FIFO named like a GPU file in a catalogue directory is refused, not
 * waited on (issue 27 finding 17: opening it blocked forever), and a GPU
 * file over 1 MiB is refused from its size. */
static void test_load_dir_not_regular(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *fifo = g_build_filename(dir, "a.gpu", NULL);
  g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);
  g_autofree char *big = g_build_filename(dir, "b.gpu", NULL);
  FILE *f = fopen(big, "w");
  g_assert_nonnull(f);
  g_assert_cmpint(ftruncate(fileno(f), 2 << 20), ==, 0);
  fclose(f);
  g_autoptr(GpuCatalogue) c = gpu_catalogue_new();
  GError *error = NULL;
  g_assert_false(gpu_catalogue_load_dir(c, dir, &error));
  g_assert_error(error, GPU_ERROR, GPU_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, "a.gpu: not a regular file (a FIFO)"));
  g_clear_error(&error);
  g_unlink(fifo);
  g_assert_false(gpu_catalogue_load_dir(c, dir, &error));
  g_assert_nonnull(strstr(error->message, "over the limit of 1 MiB"));
  g_clear_error(&error);
  test_rmdir(dir);
}

/* What the catalogue's numbers rest on (gpu_param_basis), and the
 * record's held-out checks (gpu_heldout_check). */
static void test_catalogue_provenance(void)
{
  GpuParam est = {1, "estimate: scaled"}, fit = {1, "fit to a.csv"};
  GpuParam pub = {1, "docs/sources.md: 400 W"}, none = {1, NULL};
  g_assert_cmpint(gpu_param_basis(&est), ==, GPU_BASIS_ESTIMATED);
  g_assert_cmpint(gpu_param_basis(&fit), ==, GPU_BASIS_FITTED);
  g_assert_cmpint(gpu_param_basis(&pub), ==, GPU_BASIS_GIVEN);
  g_assert_cmpint(gpu_param_basis(&none), ==, GPU_BASIS_GIVEN);

  g_autoptr(GpuCatalogue) cat = gpu_catalogue_new();
  /* docs/gpu-model.md, "Estimated entries": the power terms of these
   * parts are scaled from the A100 or A40 fit (none fitted on the part;
   * p_mem_static_w is 0, not modelled, and the GA102-shaped curve's form
   * is linear by choice), and none has a held-out check. */
  static const char *const scaled[] = {"L40S", "V100-SXM2-16GB",
                                       "V100-SXM2-32GB"};
  for (gsize i = 0; i < G_N_ELEMENTS(scaled); i++) {
    const GpuSpec *g = gpu_catalogue_lookup(cat, scaled[i], NULL);
    g_assert_nonnull(g);
    g_assert_null(gpu_heldout_check(g));
    const char *n;
    for (guint k = 0; (n = gpu_power_term_name(k)) != NULL; k++) {
      const GpuParam *p = gpu_spec_param((GpuSpec *)g, n);
      g_assert_nonnull(p);
      gboolean form = strcmp(n, "p_mem_static_w") == 0 ||
                      strcmp(n, "v_curve_exp") == 0;
      GpuBasis b = gpu_param_basis(p);
      if (b == GPU_BASIS_FITTED || (!form && b != GPU_BASIS_ESTIMATED))
        g_error("%s %s: %s", scaled[i], n, p->source);
    }
  }
  /* docs/gpu-model.md, "The H100 fit": every GH100 part's V(f), P_dyn and
   * P_leak rest on the H100 cap curve; the stall activity stays an
   * estimate (a compute-bound GEMM cannot show it), and so do the memory
   * rail off the measured 94 GB card and the PCIe board's P_const. */
  static const struct {
    const char *gpu;
    const char *fitted, *estimated;
  } hopper[] = {
    {"H100-SXM5-94GB", "p_dyn_w p_const_w p_leak_w p_mem_static_w v_min "
                       "f_knee_mhz v_curve_exp", "stall_activity"},
    {"H100-SXM5-80GB", "p_dyn_w p_const_w p_leak_w v_min f_knee_mhz "
                       "v_curve_exp", "p_mem_static_w stall_activity"},
    {"H200-SXM-141GB", "p_dyn_w p_const_w p_leak_w v_min f_knee_mhz "
                       "v_curve_exp", "p_mem_static_w stall_activity"},
    {"H100-PCIE-80GB", "p_dyn_w p_leak_w v_min f_knee_mhz v_curve_exp",
     "p_const_w p_mem_static_w stall_activity"},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(hopper); i++) {
    const GpuSpec *g = gpu_catalogue_lookup(cat, hopper[i].gpu, NULL);
    g_assert_nonnull(g);
    g_assert_null(gpu_heldout_check(g));
    g_autoptr(GString) fitted = g_string_new(NULL);
    g_autoptr(GString) estimated = g_string_new(NULL);
    const char *n;
    for (guint k = 0; (n = gpu_power_term_name(k)) != NULL; k++) {
      GpuBasis b = gpu_param_basis(gpu_spec_param((GpuSpec *)g, n));
      GString *into = b == GPU_BASIS_FITTED      ? fitted
                      : b == GPU_BASIS_ESTIMATED ? estimated
                                                 : NULL;
      g_assert_nonnull(into);
      g_string_append_printf(into, "%s%s", into->len > 0 ? " " : "", n);
    }
    g_assert_cmpstr(fitted->str, ==, hopper[i].fitted);
    g_assert_cmpstr(estimated->str, ==, hopper[i].estimated);
  }
  /* The SXM4 fit's own card and the two Zeus sweeps' boards are held out;
   * the A100 PCIe sweep holds from 300 down to 200 W, the A40's to 225 W,
   * so every checked GPU holds down to 75% of its default. */
  const GpuSpec *pcie = gpu_catalogue_lookup(cat, "A100-PCIE-80GB", NULL);
  const GpuCheck *k = gpu_heldout_check(pcie);
  g_assert_nonnull(k);
  g_assert_cmpfloat(k->min_limit_w, ==, 200);
  g_assert_nonnull(gpu_heldout_check(
      gpu_catalogue_lookup(cat, "A100-SXM4-80GB", NULL)));
  g_assert_null(gpu_heldout_check(
      gpu_catalogue_lookup(cat, "A100-SXM4-40GB", NULL)));
  g_assert_cmpfloat_with_epsilon(gpu_checked_limit_fraction(), 0.75, 1e-12);
  /* The check covers the terms it was made on: a copy keeps it, a copy
   * with another P_dyn or another name does not. */
  g_autoptr(GpuSpec) copy = gpu_spec_copy(pcie);
  g_assert_true(gpu_heldout_check(copy) == k);
  copy->p_dyn_w.v *= 1.1;
  g_assert_null(gpu_heldout_check(copy));
  g_autoptr(GpuSpec) renamed = gpu_spec_copy(pcie);
  g_free(renamed->name);
  renamed->name = g_strdup("A100-PCIE-80GB-mine");
  g_assert_null(gpu_heldout_check(renamed));
}

/* ---- The H100 fit: the cap curve ---------------------------------------- */

/* measured/h100-powercap: ViT-L/16 in TF32 on an H100 SXM 94GB under caps
 * of 200-700 W, the mean SM clock and board power at each.  The load is
 * priced from the catalogue as its FC1 GEMM (TF32, 50432 x 1024 x 4096,
 * 4-byte operands): activity.gemm times the fitted activity_tf32 (`joulesim
 * fidelity --only h100-powercap --refit`).  A fitted check on
 * 200, 400, 600 and 700 W, a prediction on 300 and 500 W: the clock the
 * cap settles it at and the board power there within 12% (the issue-29
 * target; the A100-scaled model was 11-35% too slow) -- and, tighter, within
 * 2% of the clock and power, which is what the fit reaches. */
static void test_calibration_h100_powercap(void)
{
  g_autoptr(GpuCatalogue) cat = gpu_catalogue_new();
  const GpuSpec *g = gpu_catalogue_lookup(cat, "H100-SXM5-94GB", NULL);
  GpuKernel k = {.klass = SIM_CLASS_GEMM, .tensor = SIM_MATH_TF32,
                 .flops = 2.0 * 50432 * 1024 * 4096,
                 .bytes = 4.0 * (50432.0 * 1024 + 1024 * 4096 + 50432.0 * 4096)};
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(
      TEST_DATA("measured/h100-powercap/h100_94gb_vitl16_tf32_caps.csv"),
      &text, NULL, NULL));
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  g_assert_cmpstr(lines[0], ==, "power_cap_w,total_power_w,memory_power_w,"
                                "gpu_power_w,mean_sm_mhz");
  guint n = 0;
  for (guint i = 1; lines[i] != NULL && lines[i][0] != '\0'; i++) {
    double cap, total, mem, sm_side, mhz;
    g_assert_cmpint(sscanf(lines[i], "%lf,%lf,%lf,%lf,%lf", &cap, &total,
                           &mem, &sm_side, &mhz), ==, 5);
    GpuCost c;
    gpu_kernel_cost(g, &k, 0, 0, cap, &c);
    double ef = 100 * (c.sm_mhz / mhz - 1), ep = 100 * (c.power_w / total - 1);
    gboolean fitted = cap == 200 || cap == 400 || cap == 600 || cap == 700;
    g_test_message("%3.0f W (%s): %u MHz (measured %.0f, %+.1f%%), %.0f W "
                   "(%.0f, %+.1f%%)", cap, fitted ? "fitted" : "predicted",
                   c.sm_mhz, mhz, ef, c.power_w, total, ep);
    g_assert_cmpfloat(fabs(ef), <, 2);
    g_assert_cmpfloat(fabs(ep), <, 2);
    g_assert_true(c.power_w <= cap);
    n++;
  }
  g_assert_cmpuint(n, ==, 6);
}

/* activity_tf32 prices the TF32 tensor unit and nothing else: a BF16,
 * FP8 or CUDA-core GEMM costs the same whatever it is; a TF32 GEMM under
 * a cap settles at a higher clock with Hopper's fitted value than with 1
 * (and 0, "not given", prices as 1).  Hopper's value is a fit on the cap
 * curve, every other part's an estimate of 1. */
static void test_model_activity_tf32(void)
{
  g_autoptr(GpuCatalogue) cat = gpu_catalogue_new();
  const GpuSpec *h = gpu_catalogue_lookup(cat, "H100-SXM5-94GB", NULL);
  g_assert_cmpfloat(h->activity_tf32.v, >, 0.5);
  g_assert_cmpfloat(h->activity_tf32.v, <, 1);
  g_autoptr(GpuSpec) one = gpu_spec_copy(h);
  one->activity_tf32.v = 1;
  g_autoptr(GpuSpec) unset = gpu_spec_copy(h);
  unset->activity_tf32.v = 0;
  g_assert_true(gpu_spec_validate(unset, NULL));
  GpuKernel k = {.klass = SIM_CLASS_GEMM, .flops = 2.0 * 8192 * 8192 * 8192,
                 .bytes = 2.0 * 3 * 8192 * 8192};
  for (guint m = 0; m < SIM_MATH_COUNT; m++) {
    k.tensor = m;
    GpuCost a, b, z;
    gpu_kernel_cost(h, &k, 0, 0, 400, &a);
    gpu_kernel_cost(one, &k, 0, 0, 400, &b);
    gpu_kernel_cost(unset, &k, 0, 0, 400, &z);
    g_assert_cmpfloat(b.power_w, ==, z.power_w);
    g_assert_cmpuint(b.sm_mhz, ==, z.sm_mhz);
    if (m == SIM_MATH_TF32) {
      g_assert_cmpuint(a.sm_mhz, >, b.sm_mhz);
    } else {
      g_assert_cmpfloat(a.power_w, ==, b.power_w);
      g_assert_cmpuint(a.sm_mhz, ==, b.sm_mhz);
    }
  }
  guint n;
  const GpuSpec *all = gpu_builtin_specs(&n);
  for (guint i = 0; i < n; i++) {
    gboolean gh100 = g_str_has_prefix(all[i].name, "H100") ||
                     g_str_has_prefix(all[i].name, "H200");
    g_assert_nonnull(all[i].activity_tf32.source);
    g_assert_cmpint(gpu_param_basis(&all[i].activity_tf32), ==,
                    gh100 ? GPU_BASIS_FITTED : GPU_BASIS_ESTIMATED);
    if (!gh100)
      g_assert_cmpfloat(all[i].activity_tf32.v, ==, 1);
  }
}

/* The H100 fit leaves the A100 record alone: the GA100 entries keep the
 * parameters of docs/gpu-model.md "The fit". */
static void test_calibration_a100_unchanged(void)
{
  g_autoptr(GpuCatalogue) cat = gpu_catalogue_new();
  static const char *const sxm[] = {"A100-SXM4-40GB", "A100-SXM4-80GB"};
  for (gsize i = 0; i < G_N_ELEMENTS(sxm); i++) {
    const GpuSpec *g = gpu_catalogue_lookup(cat, sxm[i], NULL);
    g_assert_cmpfloat(g->p_const_w.v, ==, 54.5);
    g_assert_cmpfloat(g->p_dyn_w.v, ==, 467.5);
    g_assert_cmpfloat(g->p_leak_w.v, ==, 29.1);
    g_assert_cmpfloat(g->v_min.v, ==, 0.772);
    g_assert_cmpfloat(g->f_knee_mhz.v, ==, 1088);
    g_assert_cmpfloat(g->stall_activity.v, ==, 0.20);
    g_assert_cmpfloat(g->eff_compute[SIM_CLASS_GEMM].v, ==, 0.945);
  }
  const GpuSpec *p = gpu_catalogue_lookup(cat, "A100-PCIE-80GB", NULL);
  g_assert_cmpfloat(p->p_const_w.v, ==, 26.6);
  g_assert_cmpfloat(p->v_min.v, ==, 0.744);
  g_assert_cmpfloat(p->f_knee_mhz.v, ==, 944);
  g_assert_cmpfloat(p->v_curve_exp.v, ==, 1.74);
  g_assert_cmpfloat(p->p_dyn_w.v, ==, 467.5);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/gpu/catalogue/validates", test_catalogue_validates);
  g_test_add_func("/gpu/catalogue/facts", test_catalogue_facts);
  g_test_add_func("/gpu/catalogue/provenance", test_catalogue_provenance);
  g_test_add_func("/gpu/catalogue/math-rates", test_math_rates);
  g_test_add_func("/gpu/catalogue/lookup-unknown", test_lookup_unknown);
  g_test_add_func("/gpu/catalogue/define", test_define);
  g_test_add_func("/gpu/catalogue/load-dir-not-regular",
                  test_load_dir_not_regular);
  for (gsize i = 0; i < G_N_ELEMENTS(invalid_cases); i++) {
    g_autofree char *p =
        g_strdup_printf("/gpu/catalogue/define-invalid/%s",
                        invalid_cases[i].what);
    g_test_add_data_func(p, &invalid_cases[i], test_define_invalid);
  }
  g_test_add_func("/gpu/spec/copy-roundtrip", test_copy_roundtrip);
  g_test_add_func("/gpu/spec/param", test_spec_param);
  g_test_add_func("/gpu/clocks/snap", test_snap);
  g_test_add_func("/gpu/clocks/voltage", test_voltage);
  for (gsize i = 0; i < G_N_ELEMENTS(shapes); i++) {
    g_autofree char *p =
        g_strdup_printf("/gpu/time/monotone/%s", shapes[i].name);
    g_test_add_data_func(p, &shapes[i], test_time_monotone);
  }
  g_test_add_func("/gpu/time/relative", test_relative_time);
  g_test_add_func("/gpu/time/compute-bound", test_compute_bound_scaling);
  g_test_add_func("/gpu/time/memory-knee", test_memory_knee);
  g_test_add_func("/gpu/power/gemm-power-limited", test_gemm_power_limited);
  for (gsize i = 0; i < G_N_ELEMENTS(gemm_figures); i++) {
    g_autofree char *p =
        g_strdup_printf("/gpu/power/gemm-published/%s", gemm_figures[i].gpu);
    g_test_add_data_func(p, &gemm_figures[i], test_gemm_published);
  }
  g_test_add_func("/gpu/power/cap-respects-limit", test_cap_respects_limit);
  g_test_add_func("/gpu/power/mem-clock-frees-power",
                  test_mem_clock_frees_power);
  g_test_add_func("/gpu/power/stall-memory-bound", test_stall_memory_bound);
  g_test_add_func("/gpu/power/gddr6x-gemm", test_gddr6x_gemm);
  g_test_add_func("/gpu/power/stage-energy-u-shape",
                  test_stage_energy_u_shape);
  for (gsize i = 0; i < G_N_ELEMENTS(profiles); i++) {
    g_autofree char *p =
        g_strdup_printf("/gpu/calibration/perseus/%s", profiles[i].gpu);
    g_test_add_data_func(p, &profiles[i], test_calibration_perseus);
    g_autofree char *q =
        g_strdup_printf("/gpu/calibration/fit/%s", profiles[i].gpu);
    g_test_add_data_func(q, &profiles[i], test_calibration_fit);
  }
  g_test_add_func("/gpu/calibration/report", test_calibration_report);
  g_test_add_func("/gpu/calibration/vcurve/A100", test_calibration_vcurve);
  g_test_add_func("/gpu/model/activity-tf32", test_model_activity_tf32);
  g_test_add_func("/gpu/calibration/h100-powercap",
                  test_calibration_h100_powercap);
  g_test_add_func("/gpu/calibration/a100-unchanged",
                  test_calibration_a100_unchanged);
  int rc = g_test_run();
  stage_free_all();
  return rc;
}

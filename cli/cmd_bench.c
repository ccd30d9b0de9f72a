/* cli/cmd_bench.c -- `joulesim bench`: the performance figures of DESIGN
 * section 10, as text or as JSON.
 *
 * Every case runs in a child process (this binary, `bench --case ...` or
 * `run SCRIPT`), so its wall time and peak memory are its own: the parent
 * forks, reads the child's stdout, and takes the peak RSS from wait4().  A
 * child prints its own figures as one line of `key=value` pairs (numbers,
 * or strings without spaces); the parent adds `wall_s`, `user_s`, `sys_s`
 * and `peak_rss_mb` and prints the lot as a table line or as one JSON
 * object per case.
 *
 * Every case has a `gpus` figure: the simulated GPUs of its workload (an
 * importer's: the ranks of the workload it built; null if the child did
 * not get that far and the parent cannot know, e.g. --trace FILE).  A
 * child that builds something big checks its estimate first (run/
 * memory.h: --max-memory, else the memory available); one that does not
 * fit prints refused=memory and its estimate, and the parent reports the
 * case as refused, not failed.
 *
 * Cases (the full set; --quick runs the small sizes of each kind):
 *   replay      generate and replay one GPT-3 iteration; single GPU (ops/s
 *               on one core), 175B on 1,024 and 8,192 GPUs, unfolded and
 *               folded; 8,192 with per-GPU variability (every rank priced
 *               on its own); 65,536 and 131,072 unfolded (refused where
 *               the estimate does not fit); Llama 3 405B on 16,384 H100s
 *               as its paper trained it (recipes[])
 *   planner     kernel-level DVFS planner on 175B/1,024 (by name and by op,
 *               0 ms and the GPU's switching latency); the kernel policy
 *               by name and Perseus on 175B/8,192 folded at the GPU's
 *               latency, through the policy API (js_simulate_report: plan
 *               and planned replay)
 *   perseus     Perseus frontier for 8 stages x 96 microbatches (needs the
 *               stage profile from tests/data/profiles; skipped elsewhere)
 *   native      native trace save and load of 175B/1,024
 *   import      Kineto JSON import throughput on a synthetic trace, and
 *               each --trace FILE against loading its native file
 *   sweep       sweep points per second with 1 and N forked jobs
 *   sweep-mpi   the same across 1, 2 and 4 MPI ranks (MPI build only)
 * A case whose target (DESIGN section 10) is known prints it and whether
 * it was met.  Timings live here and never in tests.
 */
#include "cli/commands.h"
#include "cli/options.h"
#include "run/memory.h"
#include "run/session.h"
#include "models/cluster.h"
#include "models/dvfs/planner.h"
#include "models/gpu.h"
#include "models/net.h"
#include "traces/gpt.h"
#include "traces/import.h"
#include "traces/native.h"

#include <errno.h>
#include <math.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char usage_bench[] =
  "usage: joulesim bench [--quick] [--json] [--scaling] [--only ID]...\n"
  "                      [--trace FILE]... [--max-memory SIZE] [--threads N]\n"
  "\n"
  "Measures the simulator: replayed ops per second on one core; wall time\n"
  "and peak memory of one GPT-3 175B iteration at kernel-level detail on\n"
  "1,024 GPUs (TP8 PP8 DP16) and 8,192 GPUs (DP128), unfolded, folded and\n"
  "with per-GPU variability, and on 65,536 and 131,072 GPUs; Llama 3 405B\n"
  "on 16,384 H100s (TP8 PP16 DP128, sequence 8,192); the kernel-level DVFS\n"
  "planner, and the kernel and Perseus policies on 8,192 GPUs folded at\n"
  "the GPU's switching latency; the Perseus frontier for 8 stages x 96\n"
  "microbatches; native trace save/load; Kineto import MB/s; and sweep\n"
  "points per second with 1 and N jobs (and MPI ranks in an MPI build);\n"
  "and 1 against 2 threads on 1,024 GPUs.  Every case runs in its own\n"
  "process; peak memory is that process's.  A case whose estimated memory\n"
  "does not fit is refused before it allocates (not a failure).\n"
  "  --quick      small sizes (seconds, not minutes)\n"
  "  --json       one JSON document on stdout instead of the table\n"
  "  --scaling    instead: wall time and memory against GPU count (8 to\n"
  "               8,192) and microbatches (8 to 256), unfolded and folded\n"
  "  --only ID    run only the cases whose id starts with ID (repeatable)\n"
  "  --trace F    also import profiler trace F and compare with loading\n"
  "               its native file (repeatable)\n"
  "  --max-memory SIZE\n"
  "               the memory limit of every case (e.g. 16G; default: the\n"
  "               memory available when a case checks)\n"
  "  --threads N  the threads every simulation of every case replays on\n"
  "               (joulesim run --threads; default 1; replay/175b-1024-\n"
  "               threads compares 1 and 2 itself)\n";

/* ---- child side: one case, figures as key=value --------------------------- */

static double child_rss_mb(void)
{
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_maxrss / 1024.0;
}

static double since_s(gint64 t0)
{
  return (double)(g_get_monotonic_time() - t0) * 1e-6;
}

/* CPU seconds (user + system) this process has used: on a loaded machine
 * a phase's CPU time moves much less than its wall time. */
static double cpu_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The workload a child case names: m = MODEL TP PP DP MB. */
static gboolean gpt_cfg(GptConfig *cfg, char **m, gboolean fold,
                        GError **error)
{
  gpt_config_init(cfg);
  if (!gpt_config_set_model(cfg, m[0], error))
    return FALSE;
  cfg->tp = (guint)atoi(m[1]);
  cfg->pp = (guint)atoi(m[2]);
  cfg->dp = (guint)atoi(m[3]);
  cfg->microbatches = (guint)atoi(m[4]);
  cfg->fold = fold;
  return gpt_config_validate(cfg, error);
}

/* Whether a workload of `cfg` fits in memory (run/memory.h: --max-memory,
 * else what the machine has available now).  When it does not, prints
 * the estimate and the limit as figures (the parent shows them with the
 * refusal) and fails with JS_MEMORY_ERROR_LIMIT: a case too big for this
 * machine stops cleanly instead of being OOM-killed. */
static gboolean gpt_fits(JsSession *s, const GptConfig *cfg, GError **error)
{
  guint64 need = gpt_estimate_bytes(cfg);
  char what[128];
  g_snprintf(what, sizeof what, "%s tp%u pp%u dp%u (%" G_GUINT64_FORMAT
             " ops%s)", cfg->model[0] != '\0' ? cfg->model : "gpt",
             cfg->tp, cfg->pp, cfg->dp, gpt_stored_ops(cfg),
             cfg->fold ? " held, folded" : "");
  if (js_memory_check(s->max_memory, need, what, error))
    return TRUE;
  printf("workload_need_bytes=%" G_GUINT64_FORMAT " limit_bytes=%"
         G_GUINT64_FORMAT "\n", need, js_memory_limit(s->max_memory));
  return FALSE;
}

/* cfg's workload on GPU gpu_name and the network preset net_name (8 GPUs
 * a node), checked against the memory limit first; *gen_s and *gen_cpu_s
 * its generation's wall and CPU seconds. */
static gboolean workload_setup(JsSession *s, const GptConfig *cfg,
                               const char *gpu_name, const char *net_name,
                               SimWorkload **w, Cluster **c, double *gen_s,
                               double *gen_cpu_s, GError **error)
{
  const GpuSpec *gpu = gpu_catalogue_lookup(s->catalogue, gpu_name, error);
  if (gpu == NULL || !gpt_fits(s, cfg, error))
    return FALSE;
  gint64 t0 = g_get_monotonic_time();
  double c0 = cpu_s();
  *w = gpt_generate(cfg, gpu, error);
  if (*w == NULL)
    return FALSE;
  *gen_s = since_s(t0);
  *gen_cpu_s = cpu_s() - c0;
  g_autoptr(NetSpec) net = net_preset(net_name, error);
  *c = net ? cluster_new(gpu, net, cfg->tp * cfg->pp * cfg->dp, 8, error)
           : NULL;
  return *c != NULL;
}

/* A GPT workload (m: MODEL TP PP DP MB) on A100s and the dgx-a100
 * network, as workload_setup. */
static gboolean gpt_setup(JsSession *s, char **m, gboolean fold,
                          SimWorkload **w, Cluster **c, double *gen_s,
                          double *gen_cpu_s, GError **error)
{
  GptConfig cfg;
  return gpt_cfg(&cfg, m, fold, error) &&
         workload_setup(s, &cfg, "A100-SXM4-80GB", "dgx-a100", w, c, gen_s,
                        gen_cpu_s, error);
}

/* One iteration of w on c at max clocks, timed; prints the replay
 * cases' figures (gen_s and gen_cpu_s: the generation's). */
static gboolean replay_timed(JsSession *s, Cluster *c, const SimWorkload *w,
                             double gen_s, double gen_cpu, GError **error)
{
  if (!cluster_validate(c, error))
    return FALSE;
  DvfsPolicy pol = {.kind = DVFS_MAX};
  JsRunOptions opt = {.iterations = 1, .seed = s->seed,
                      .switch_latency_ms = -1};
  gint64 t0 = g_get_monotonic_time();
  double c0 = cpu_s();
  g_autoptr(SimResult) r = js_simulate(s, c, w, &pol, &opt, error);
  if (r == NULL)
    return FALSE;
  double sim_s = since_s(t0), sim_cpu = cpu_s() - c0;
  double it_s = (double)r->time_ns * 1e-9;
  if (c->perf_spread > 0 || c->power_spread > 0)
    printf("perf_spread=%g power_spread=%g ", c->perf_spread,
           c->power_spread);
  if (s->threads > 1)
    printf("threads=%u ", s->threads);
  printf("gpus=%u ops=%" G_GUINT64_FORMAT " ops_replayed=%" G_GUINT64_FORMAT
         " gen_s=%.3f replay_s=%.3f mops_per_s=%.2f gen_cpu_s=%.3f "
         "replay_cpu_s=%.3f mops_per_cpu_s=%.2f iteration_s=%.6f "
         "energy_j=%.6e tflops_per_gpu=%.2f\n", w->n_ranks,
         r->ops_represented, r->ops, gen_s, sim_s,
         (double)r->ops / MAX(sim_s, 1e-9) * 1e-6, gen_cpu, sim_cpu,
         (double)r->ops / MAX(sim_cpu, 1e-9) * 1e-6, it_s, r->energy_j,
         r->flops / it_s / w->n_ranks * 1e-12);
  return TRUE;
}

/* replay MODEL TP PP DP MB FOLD PERF POWER: PERF and POWER are the
 * cluster's per-GPU variability (js.cluster{ variability = { perf =,
 * power = } }; 0 0: none, every rank priced alike). */
static gboolean case_replay(JsSession *s, char **a, GError **error)
{
  g_autoptr(SimWorkload) w = NULL;
  g_autoptr(Cluster) c = NULL;
  double gen_s = 0, gen_cpu = 0;
  if (!gpt_setup(s, a, atoi(a[5]) != 0, &w, &c, &gen_s, &gen_cpu, error))
    return FALSE;
  c->perf_spread = g_ascii_strtod(a[6], NULL);
  c->power_spread = g_ascii_strtod(a[7], NULL);
  return replay_timed(s, c, w, gen_s, gen_cpu, error);
}

/* A published training run a replay case takes as it was trained:
 * model, GPU, network, layout, sequence length and microbatches. */
typedef struct {
  const char *name;
  const char *model, *gpu, *net;
  guint tp, pp, dp, microbatches, seq_len;
  guint trim;          /* layers taken off the first and the last stage
                          each (0: layers / pp on every stage) */
} BenchRecipe;

static const BenchRecipe recipes[] = {
  /* Llama 3 405B on 16,384 H100s (arXiv:2407.21783): table 4's TP8 CP1
   * PP16 DP128 at sequence 8,192 with 16 sequences per data-parallel
   * rank (16 M tokens a step: microbatches of one sequence); section
   * 3.3.2's balanced pipeline, one layer fewer on the first and the last
   * stage, so 126 layers split 7, 8 x 14, 7.  BF16, fused attention and
   * sequence parallelism as Megatron-style training runs them; the
   * optimizer sharded (zero = 1, the nearest to their FSDP the generator
   * has) and full recomputation, without which the memory model puts
   * stage 1 at 93.8 GB on the 80 GB card (1F1B holds 15 microbatches
   * there).  A speed case, not their throughput: 1F1B's bubble (15 of
   * 31 slots at 16 microbatches on 16 stages) and the recompute put it
   * near 221 model TFLOP/s per GPU (283.8 counting the recompute)
   * against their ~400; their interleaved schedule without recompute,
   * as `joulesim fidelity --only llama-h100` runs it, gives 366. */
  {"llama3-405b-16384", "llama3-405b", "H100-SXM5-80GB", "dgx-h100",
   8, 16, 128, 16, 8192, 1},
};

/* Fills *cfg with recipe r, its stage split into layers[] (r->pp
 * entries).  The settings below hold for every recipe so far (recipes[]
 * says why); one that differs would become a field. */
static gboolean recipe_cfg(const BenchRecipe *r, GptConfig *cfg,
                           guint *layers, GError **error)
{
  gpt_config_init(cfg);
  if (!gpt_config_set_model(cfg, r->model, error))
    return FALSE;
  cfg->tp = r->tp;
  cfg->pp = r->pp;
  cfg->dp = r->dp;
  cfg->microbatches = r->microbatches;
  cfg->seq_len = r->seq_len;
  cfg->attention = GPT_ATTENTION_FLASH;
  cfg->sequence_parallel = TRUE;
  cfg->zero = 1;
  cfg->recompute = TRUE;
  if (r->trim > 0) {
    /* The inner stages take what an even split of the layers plus the
     * two trims gives; gpt_config_validate checks the sum. */
    guint inner = (cfg->layers + 2 * r->trim) / r->pp;
    for (guint p = 0; p < r->pp; p++)
      layers[p] = p == 0 || p == r->pp - 1 ? inner - r->trim : inner;
    cfg->stage_layers = layers;
  }
  return gpt_config_validate(cfg, error);
}

/* recipe NAME: one iteration of recipes[] NAME, unfolded, as replay. */
static gboolean case_recipe(JsSession *s, char **a, GError **error)
{
  const BenchRecipe *r = NULL;
  for (guint i = 0; i < G_N_ELEMENTS(recipes); i++)
    if (strcmp(a[0], recipes[i].name) == 0)
      r = &recipes[i];
  if (r == NULL) {
    g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                "bench --case recipe: no recipe '%s'", a[0]);
    return FALSE;
  }
  GptConfig cfg;
  g_autofree guint *layers = g_new0(guint, r->pp);
  g_autoptr(SimWorkload) w = NULL;
  g_autoptr(Cluster) c = NULL;
  double gen_s = 0, gen_cpu = 0;
  if (!recipe_cfg(r, &cfg, layers, error) ||
      !workload_setup(s, &cfg, r->gpu, r->net, &w, &c, &gen_s, &gen_cpu,
                      error))
    return FALSE;
  return replay_timed(s, c, w, gen_s, gen_cpu, error);
}

/* Whether two results are the same bit for bit (every figure the engine
 * fills). */
static gboolean same_result(const SimResult *a, const SimResult *b)
{
  return a->time_ns == b->time_ns && a->n_gpus == b->n_gpus &&
         a->n_iterations == b->n_iterations && a->ops == b->ops &&
         a->switches == b->switches &&
         memcmp(&a->energy_j, &b->energy_j, sizeof a->energy_j) == 0 &&
         memcmp(&a->waste_j, &b->waste_j, sizeof a->waste_j) == 0 &&
         memcmp(&a->flops, &b->flops, sizeof a->flops) == 0 &&
         memcmp(a->by_class, b->by_class, sizeof a->by_class) == 0 &&
         memcmp(a->by_phase, b->by_phase, sizeof a->by_phase) == 0 &&
         memcmp(&a->blocked, &b->blocked, sizeof a->blocked) == 0 &&
         memcmp(&a->idle, &b->idle, sizeof a->idle) == 0 &&
         memcmp(a->per_gpu, b->per_gpu, sizeof *a->per_gpu * a->n_gpus) == 0 &&
         memcmp(a->iterations, b->iterations,
                sizeof *a->iterations * a->n_iterations) == 0;
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median of v[0, n) (sorted in place). */
static double median(double *v, guint n)
{
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Alternated 1-thread/N-thread pairs the threads case times. */
#define THREAD_PAIRS 5

/* threads MODEL TP PP DP MB N: a replay on 1 thread to warm up (the
 * first run of a process pays the page faults of its fresh memory), then
 * THREAD_PAIRS pairs, one replay on 1 thread and one on N, alternated so
 * that the machine's drift falls on both (a shared 2-core VM's speed
 * moves by 1.5x within minutes, one core at a time), each with its own
 * engine.  Prints the medians of their wall and CPU seconds, the median of
 * the pairs' speedups (the target's figure) with the smallest and largest,
 * the ratio of the fastest runs (what the code gives while neither core
 * is slowed), and whether every result is the same bit for bit as the
 * first. */
static gboolean case_threads(JsSession *s, char **a, GError **error)
{
  guint threads = (guint)atoi(a[5]);
  g_autoptr(SimWorkload) w = NULL;
  g_autoptr(Cluster) c = NULL;
  double gen_s = 0, gen_cpu = 0;
  if (!gpt_setup(s, a, FALSE, &w, &c, &gen_s, &gen_cpu, error))
    return FALSE;
  DvfsPolicy pol = {.kind = DVFS_MAX};
  SimResult *first = NULL;
  gboolean identical = TRUE;
  double wall[2][THREAD_PAIRS], cpu[2][THREAD_PAIRS], ratio[THREAD_PAIRS];
  for (guint k = 0; k < 1 + 2 * THREAD_PAIRS; k++) {
    guint side = k == 0 ? 0 : (k - 1) % 2, pair = k == 0 ? 0 : (k - 1) / 2;
    JsRunOptions opt = {.iterations = 1, .seed = s->seed,
                        .switch_latency_ms = -1,
                        .threads = side == 0 ? 1 : threads};
    gint64 t0 = g_get_monotonic_time();
    double c0 = cpu_s();
    SimResult *r = js_simulate(s, c, w, &pol, &opt, error);
    if (r == NULL) {
      sim_result_free(first);
      return FALSE;
    }
    if (k > 0) {
      wall[side][pair] = since_s(t0);
      cpu[side][pair] = cpu_s() - c0;
    }
    if (first == NULL) {
      first = r;
      continue;
    }
    identical &= same_result(first, r);
    sim_result_free(r);
  }
  for (guint p = 0; p < THREAD_PAIRS; p++)
    ratio[p] = wall[0][p] / MAX(wall[1][p], 1e-9);
  /* median() sorts: [0] is then the smallest, [THREAD_PAIRS - 1] the
   * largest. */
  double r_med = median(ratio, THREAD_PAIRS);
  double w1 = median(wall[0], THREAD_PAIRS), wn = median(wall[1], THREAD_PAIRS);
  double best = wall[0][0] / MAX(wall[1][0], 1e-9);
  printf("gpus=%u threads=%u pairs=%u ops_replayed=%" G_GUINT64_FORMAT
         " replay_1_s=%.3f replay_n_s=%.3f speedup=%.3f speedup_min=%.3f "
         "speedup_max=%.3f speedup_best=%.3f replay_1_cpu_s=%.3f "
         "replay_n_cpu_s=%.3f identical=%d\n", w->n_ranks, threads,
         THREAD_PAIRS, first->ops, w1, wn, r_med, ratio[0],
         ratio[THREAD_PAIRS - 1], best,
         median(cpu[0], THREAD_PAIRS), median(cpu[1], THREAD_PAIRS),
         identical ? 1 : 0);
  sim_result_free(first);
  return TRUE;
}

/* planner NAME|OP LATENCY(0|gpu) MODEL TP PP DP MB: the kernel-level
 * planner alone (dvfs_planner_run), 1% slowdown budget. */
static gboolean case_planner(JsSession *s, char **a, GError **error)
{
  g_autoptr(SimWorkload) w = NULL;
  g_autoptr(Cluster) c = NULL;
  double gen_s = 0, gen_cpu = 0;
  if (!gpt_setup(s, a + 2, FALSE, &w, &c, &gen_s, &gen_cpu, error))
    return FALSE;
  DvfsPolicy p;
  dvfs_policy_init(&p, DVFS_KERNEL);
  p.slowdown = 0.01;
  p.granularity = strcmp(a[0], "op") == 0 ? DVFS_GRANULARITY_OP
                                          : DVFS_GRANULARITY_NAME;
  c->switch_latency_ms = strcmp(a[1], "0") == 0 ? 0 : -1;
  gint64 t0 = g_get_monotonic_time();
  g_autoptr(DvfsPlanResult) r = dvfs_planner_run(&p, c, w, s->catalogue, 0,
                                                 error);
  if (r == NULL)
    return FALSE;
  printf("gpus=%u plan_s=%.3f latency_ms=%.0f classes=%u evaluations=%u "
         "replays=%u saving_pct=%.3f slowdown_pct=%.3f\n", w->n_ranks,
         since_s(t0), r->latency_ms, r->n_classes, r->evaluations,
         r->simulations, 100 * (1 - r->energy_j / r->base_energy_j),
         100 * (r->time_s / r->base_time_s - 1));
  return TRUE;
}

/* policy KERNEL|PERSEUS MODEL TP PP DP MB FOLD LATENCY(0|gpu): a planning
 * policy through the policy API that js.simulate{ policy = ... } uses
 * (js_simulate_report: the session's checks, the plan and its replay), at
 * 0 ms switching latency or the GPU's (the catalogue's, what a script gets
 * by default: 10 ms on the A100).  KERNEL is js.policy.kernel{ slowdown =
 * 0.01 } (by name); PERSEUS is js.policy.perseus{ slowdown = 0.003 }
 * (docs/perseus.md's js.gpt figures).  run_s is the whole call: plan
 * and planned replay. */
static gboolean case_policy(JsSession *s, char **a, GError **error)
{
  gboolean perseus = strcmp(a[0], "perseus") == 0;
  if (!perseus && strcmp(a[0], "kernel") != 0) {
    g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                "bench --case policy: '%s' is not kernel or perseus", a[0]);
    return FALSE;
  }
  g_autoptr(SimWorkload) w = NULL;
  g_autoptr(Cluster) c = NULL;
  double gen_s = 0, gen_cpu = 0;
  if (!gpt_setup(s, a + 1, atoi(a[6]) != 0, &w, &c, &gen_s, &gen_cpu,
                 error))
    return FALSE;
  DvfsPolicy p;
  dvfs_policy_init(&p, perseus ? DVFS_PERSEUS : DVFS_KERNEL);
  p.slowdown = perseus ? 0.003 : 0.01;
  JsRunOptions opt = {.iterations = 1, .seed = s->seed,
                      .switch_latency_ms = strcmp(a[7], "0") == 0 ? 0 : -1};
  JsRunReport rep;
  gint64 t0 = g_get_monotonic_time();
  double c0 = cpu_s();
  g_autoptr(SimResult) r = js_simulate_report(s, c, w, &p, &opt, &rep,
                                              error);
  double run_s = since_s(t0), run_cpu = cpu_s() - c0;
  if (r == NULL) {
    js_run_report_clear(&rep);
    return FALSE;
  }
  printf("gpus=%u latency=%s gen_s=%.3f run_s=%.3f gen_cpu_s=%.3f "
         "run_cpu_s=%.3f iteration_s=%.6f energy_j=%.6e", w->n_ranks, a[7],
         gen_s, run_s, gen_cpu, run_cpu, (double)r->time_ns * 1e-9,
         r->energy_j);
  if (rep.plan != NULL) {
    const DvfsPlanResult *pr = rep.plan;
    printf(" classes=%u evaluations=%u replays=%u saving_pct=%.3f "
           "slowdown_pct=%.3f", pr->n_classes, pr->evaluations,
           pr->simulations, 100 * (1 - pr->energy_j / pr->base_energy_j),
           100 * (pr->time_s / pr->base_time_s - 1));
  }
  if (rep.pipeline != NULL) {
    const PerseusRun *pr = rep.pipeline;
    printf(" frontier_points=%u point=%u saving_pct=%.3f slowdown_pct=%.3f",
           pr->frontier != NULL ? pr->frontier->n_points : 0, pr->point,
           100 * (1 - pr->plan_energy_j / pr->allmax_energy_j),
           100 * ((double)pr->plan_time_ns / pr->allmax_time_ns - 1));
  }
  printf("\n");
  js_run_report_clear(&rep);
  return TRUE;
}

/* native MODEL TP PP DP MB: save once, load best of three. */
static gboolean case_native(JsSession *s, char **a, GError **error)
{
  GptConfig cfg;
  if (!gpt_cfg(&cfg, a, FALSE, error))
    return FALSE;
  const GpuSpec *gpu = gpu_catalogue_lookup(s->catalogue, "A100-SXM4-80GB",
                                            error);
  if (gpu == NULL || !gpt_fits(s, &cfg, error))
    return FALSE;
  g_autoptr(SimWorkload) w = gpt_generate(&cfg, gpu, error);
  if (w == NULL)
    return FALSE;
  g_autofree char *dir = g_dir_make_tmp("joulesim-bench-XXXXXX", error);
  if (dir == NULL)
    return FALSE;
  g_autofree char *path = g_build_filename(dir, "trace.h5", NULL);
  gboolean ok = FALSE;
  gint64 t0 = g_get_monotonic_time();
  if (!trace_native_save(w, path, error))
    goto out;
  double save_s = since_s(t0), load_s = G_MAXDOUBLE;
  for (int k = 0; k < 3; k++) {
    t0 = g_get_monotonic_time();
    g_autoptr(SimWorkload) l = trace_native_load(path, error);
    if (l == NULL)
      goto out;
    load_s = MIN(load_s, since_s(t0));
  }
  GStatBuf st;
  double mb = g_stat(path, &st) == 0 ? (double)st.st_size / 1e6 : 0.0;
  guint64 ops = sim_workload_n_ops(w);
  printf("gpus=%u ops=%" G_GUINT64_FORMAT " file_mb=%.1f save_s=%.3f "
         "load_s=%.3f load_mops_per_s=%.1f load_gb_per_s=%.2f\n",
         w->n_ranks, ops, mb, save_s, load_s,
         (double)ops / MAX(load_s, 1e-9) * 1e-6,
         mb * 1e-3 / MAX(load_s, 1e-9));
  ok = TRUE;
out:
  g_unlink(path);
  g_rmdir(dir);
  return ok;
}

/* import-kineto MBYTES: a synthetic trace of realistic events
 * (traces/import.c), uncompressed JSON. */
static gboolean case_import_kineto(JsSession *s, char **a, GError **error)
{
  g_autofree char *dir = g_dir_make_tmp("joulesim-bench-XXXXXX", error);
  if (dir == NULL)
    return FALSE;
  g_autofree char *json = g_build_filename(dir, "kineto.json", NULL);
  guint64 n_events = 0, bytes = (guint64)g_ascii_strtoull(a[0], NULL, 10);
  gboolean ok = trace_kineto_write_synthetic(json, bytes * 1000000,
                                             &n_events, error);
  GStatBuf js;
  double mb = ok && g_stat(json, &js) == 0 ? (double)js.st_size / 1e6 : 0;
  if (ok) {
    TraceImportOptions opt;
    memset(&opt, 0, sizeof opt);
    opt.catalogue = s->catalogue;
    opt.iteration = TRACE_ITERATION_ALL;
    const char *jp = json;
    gint64 t0 = g_get_monotonic_time();
    g_autoptr(SimWorkload) x = trace_import(&jp, 1, &opt, error);
    double sec = since_s(t0);
    if (x == NULL)
      ok = FALSE;
    else
      printf("gpus=%u file_mb=%.1f gpu_events=%" G_GUINT64_FORMAT
             " import_s=%.3f mb_per_s=%.1f\n", x->n_ranks, mb, n_events,
             sec, mb / MAX(sec, 1e-9));
  }
  g_unlink(json);
  g_rmdir(dir);
  return ok;
}

/* import-file PATH: import (best of three) against native load. */
static gboolean case_import_file(JsSession *s, char **a, GError **error)
{
  TraceImportOptions opt;
  memset(&opt, 0, sizeof opt);
  opt.catalogue = s->catalogue;
  const char *src = a[0];
  double import_s = G_MAXDOUBLE, load_s = G_MAXDOUBLE;
  g_autoptr(SimWorkload) t = NULL;
  for (int k = 0; k < 3; k++) {
    gint64 t0 = g_get_monotonic_time();
    g_autoptr(SimWorkload) x = trace_import(&src, 1, &opt, error);
    if (x == NULL)
      return FALSE;
    import_s = MIN(import_s, since_s(t0));
    if (t == NULL)
      t = g_steal_pointer(&x);
  }
  g_autofree char *dir = g_dir_make_tmp("joulesim-bench-XXXXXX", error);
  if (dir == NULL)
    return FALSE;
  g_autofree char *path = g_build_filename(dir, "trace.h5", NULL);
  gboolean ok = trace_native_save(t, path, error);
  for (int k = 0; ok && k < 3; k++) {
    gint64 t0 = g_get_monotonic_time();
    g_autoptr(SimWorkload) l = trace_native_load(path, error);
    ok = l != NULL;
    load_s = MIN(load_s, since_s(t0));
  }
  if (ok)
    printf("gpus=%u ops=%" G_GUINT64_FORMAT " import_s=%.4f load_s=%.4f "
           "speedup=%.1f\n", t->n_ranks, sim_workload_n_ops(t), import_s,
           load_s, import_s / MAX(load_s, 1e-9));
  g_unlink(path);
  g_rmdir(dir);
  return ok;
}

typedef struct {
  const char *name;
  guint argc;
  gboolean (*fn)(JsSession *s, char **argv, GError **error);
} ChildCase;

static const ChildCase child_cases[] = {
  {"replay", 8, case_replay},
  {"recipe", 1, case_recipe},
  {"threads", 6, case_threads},
  {"planner", 7, case_planner},
  {"policy", 8, case_policy},
  {"native", 5, case_native},
  {"import-kineto", 1, case_import_kineto},
  {"import-file", 1, case_import_file},
};

/* A child: case argv[0] with its arguments.  A case stopped by the memory
 * check (run/memory.h) prints refused=memory, so the parent reports a
 * refusal rather than a failure. */
static int run_child(int argc, char **argv, guint64 max_memory,
                     guint threads)
{
  for (guint i = 0; i < G_N_ELEMENTS(child_cases); i++) {
    const ChildCase *cc = &child_cases[i];
    if (argc < 1 || strcmp(argv[0], cc->name) != 0)
      continue;
    if ((guint)argc - 1 != cc->argc) {
      fprintf(stderr, "joulesim bench --case %s: needs %u arguments\n",
              cc->name, cc->argc);
      return EXIT_USAGE;
    }
    g_autoptr(JsSession) s = cli_session_new(1);
    s->max_memory = max_memory;
    s->threads = threads;
    GError *err = NULL;
    if (!cc->fn(s, argv + 1, &err)) {
      if (g_error_matches(err, JS_MEMORY_ERROR, JS_MEMORY_ERROR_LIMIT))
        printf("refused=memory\n");
      fprintf(stderr, "joulesim: %s\n", err->message);
      g_error_free(err);
      return EXIT_USER;
    }
    printf("child_rss_mb=%.0f\n", child_rss_mb());
    return 0;
  }
  fprintf(stderr, "joulesim bench --case: unknown case '%s'\n",
          argc > 0 ? argv[0] : "");
  return EXIT_USAGE;
}

/* ---- Lua cases ------------------------------------------------------------ */

/* arg: OUT.h5 N_POINTS.  N points of one GPT-3 6.7B iteration on 64 A100s
 * (TP1 and TP2, 16 microbatches: about 0.1 s each). */
static const char sweep_lua[] =
  "local js = require 'joulesim'\n"
  "local seeds = {}\n"
  "for i = 1, tonumber(arg[2]) // 2 do seeds[i] = i end\n"
  "js.sweep{ grid = { seed = seeds, tp = { 1, 2 } },\n"
  "  out = arg[1], table = 'bench', mode = 'replace',\n"
  "  run = function(p)\n"
  "    local c = js.cluster{ gpu = 'A100-SXM4-80GB', gpus = 64 }\n"
  "    local w = js.gpt{ model = 'gpt3-6.7b', tp = p.tp, dp = 64 // p.tp,\n"
  "                      microbatches = 16 }\n"
  "    local r = js.simulate{ cluster = c, workload = w, seed = p.seed }\n"
  "    return { time_s = r.time_s, energy_j = r.energy_j }\n"
  "  end }\n"
  "print('points=' .. arg[2] .. ' gpus=64')\n";

/* arg: PROFILE.csv MICROBATCHES.  The Perseus frontier of an 8-stage
 * pipeline on the stage profile (the whole run: load, model, frontier,
 * plan and one simulated iteration). */
static const char perseus_lua[] =
  "local js = require 'joulesim'\n"
  "local m = tonumber(arg[2])\n"
  "local w = js.pipeline{ profile = arg[1], microbatches = m, stages = 8 }\n"
  "local c = js.cluster{ gpu = 'A100-SXM4-80GB', gpus = 8,\n"
  "                      blocking_power_w = 83.64 }\n"
  "local r = js.simulate{ cluster = c, workload = w,\n"
  "                       policy = js.policy.perseus{ slowdown = 0 } }\n"
  "print(string.format('gpus=8 stages=8 microbatches=%d frontier_points=%d '\n"
  "  .. 'iteration_s=%.6f', m, #r.frontier, r.time_s))\n";

/* ---- parent side ------------------------------------------------------------ */

typedef struct {
  char *id;            /* e.g. "replay/175b-1024" */
  char *label;         /* human-readable */
  GPtrArray *argv;     /* child command line (this binary first) */
  char *script;        /* Lua source to write to a temp file, or NULL */
  guint gpus;          /* simulated GPUs of its workload (0: unknown
                          until the child says, e.g. an imported trace) */
  const char *target;  /* DESIGN section 10 target, text, or NULL */
  double target_s;     /* wall-time target (0: none) */
  double target_mb;    /* memory target (0: none) */
  double target_mops;  /* replay-rate target (0: none) */
  double target_speedup; /* thread-speedup target (0: none) */
} BenchCase;

static void bench_case_free(BenchCase *c)
{
  g_free(c->id);
  g_free(c->label);
  g_ptr_array_unref(c->argv);
  g_free(c->script);
  g_free(c);
}

static BenchCase *add_case(GPtrArray *cases, const char *self, const char *id,
                           const char *label, ...)
{
  BenchCase *c = g_new0(BenchCase, 1);
  c->id = g_strdup(id);
  c->label = g_strdup(label);
  c->argv = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(c->argv, g_strdup(self));
  va_list ap;
  va_start(ap, label);
  for (const char *a; (a = va_arg(ap, const char *)) != NULL;)
    g_ptr_array_add(c->argv, g_strdup(a));
  va_end(ap);
  g_ptr_array_add(c->argv, NULL);
  g_ptr_array_add(cases, c);
  return c;
}

typedef struct {
  gboolean ok;
  gboolean refused;         /* failed: stopped by the memory check */
  double wall_s, rss_mb;
  double user_s, sys_s;     /* the child's CPU time (wait4) */
  GPtrArray *keys, *values; /* the child's key=value figures */
  char *error;              /* child's stderr when it failed */
} BenchOutcome;

static void outcome_clear(BenchOutcome *o)
{
  g_clear_pointer(&o->keys, g_ptr_array_unref);
  g_clear_pointer(&o->values, g_ptr_array_unref);
  g_clear_pointer(&o->error, g_free);
}

static const char *outcome_get(const BenchOutcome *o, const char *key)
{
  for (guint i = 0; o->keys != NULL && i < o->keys->len; i++)
    if (strcmp(g_ptr_array_index(o->keys, i), key) == 0)
      return g_ptr_array_index(o->values, i);
  return NULL;
}

static double outcome_num(const BenchOutcome *o, const char *key)
{
  const char *v = outcome_get(o, key);
  return v != NULL ? g_ascii_strtod(v, NULL) : 0.0;
}

static char *read_all(int fd)
{
  GString *s = g_string_new(NULL);
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    g_string_append_len(s, buf, n);
  }
  close(fd);
  return g_string_free(s, FALSE);
}

/* Runs one case in a child process; fills *o.  Returns FALSE only when the
 * child could not be started at all. */
static gboolean run_case(BenchCase *c, const char *tmpdir, BenchOutcome *o,
                         GError **error)
{
  memset(o, 0, sizeof *o);
  g_autofree char *script = NULL;
  if (c->script != NULL) {
    script = g_build_filename(tmpdir, "case.lua", NULL);
    if (!g_file_set_contents(script, c->script, -1, error))
      return FALSE;
    /* argv: self run --quiet [--jobs N] SCRIPT ARGS: SCRIPT replaces the
     * "@" placeholder. */
    for (guint i = 0; i + 1 < c->argv->len; i++)
      if (strcmp(g_ptr_array_index(c->argv, i), "@") == 0) {
        g_free(g_ptr_array_index(c->argv, i));
        g_ptr_array_index(c->argv, i) = g_strdup(script);
      }
  }
  GPid pid;
  int out_fd = -1, err_fd = -1;
  gint64 t0 = g_get_monotonic_time();
  if (!g_spawn_async_with_pipes(NULL, (char **)c->argv->pdata, NULL,
                                G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &pid,
                                NULL, &out_fd, &err_fd, error))
    return FALSE;
  /* stderr is small (errors, progress off with --quiet); read stdout
   * first, then stderr. */
  g_autofree char *out = read_all(out_fd);
  g_autofree char *err = read_all(err_fd);
  int status = 0;
  struct rusage ru;
  while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR)
    ;
  o->wall_s = since_s(t0);
  o->rss_mb = (double)ru.ru_maxrss / 1024.0;
  o->user_s = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6;
  o->sys_s = (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
  g_spawn_close_pid(pid);
  if (script != NULL)
    g_unlink(script);
  o->ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!o->ok) {
    g_strstrip(err);
    o->error = g_strdup(*err != '\0' ? err : "child failed");
    if (WIFSIGNALED(status) && *err == '\0') {
      g_free(o->error);
      o->error = g_strdup_printf("child killed by signal %d (%s)",
                                 WTERMSIG(status),
                                 g_strsignal(WTERMSIG(status)));
    }
  }
  /* The figures, also of a failed child: a refused case prints its
   * estimate. */
  o->keys = g_ptr_array_new_with_free_func(g_free);
  o->values = g_ptr_array_new_with_free_func(g_free);
  g_auto(GStrv) words = g_strsplit_set(out, " \n", -1);
  for (char **w = words; *w != NULL; w++) {
    char *eq = strchr(*w, '=');
    if (eq == NULL || eq == *w)
      continue;
    g_ptr_array_add(o->keys, g_strndup(*w, eq - *w));
    g_ptr_array_add(o->values, g_strdup(eq + 1));
  }
  if (!o->ok) {
    const char *why = outcome_get(o, "refused");
    o->refused = why != NULL && strcmp(why, "memory") == 0;
    return TRUE;
  }
  /* Derived rates the child cannot see (its own start-up included). */
  const char *pts = outcome_get(o, "points");
  if (pts != NULL) {
    g_ptr_array_add(o->keys, g_strdup("points_per_s"));
    g_ptr_array_add(o->values, g_strdup_printf(
        "%.2f", g_ascii_strtod(pts, NULL) / MAX(o->wall_s, 1e-9)));
  }
  return TRUE;
}

/* A value prints bare in JSON when it is a finite number. */
static gboolean is_number(const char *v)
{
  char *end = NULL;
  double d = g_ascii_strtod(v, &end);
  return *v != '\0' && end != NULL && *end == '\0' && isfinite(d);
}

static void json_string(GString *s, const char *v)
{
  g_string_append_c(s, '"');
  for (const char *p = v; *p != '\0'; p++) {
    if (*p == '"' || *p == '\\')
      g_string_append_printf(s, "\\%c", *p);
    else if ((unsigned char)*p < 0x20)
      g_string_append_printf(s, "\\u%04x", (unsigned char)*p);
    else
      g_string_append_c(s, *p);
  }
  g_string_append_c(s, '"');
}

/* Whether a case met its targets: -1 no target, 0 missed, 1 met. */
static int target_met(const BenchCase *c, const BenchOutcome *o)
{
  if (c->target == NULL || !o->ok)
    return -1;
  gboolean met = TRUE;
  if (c->target_s > 0)
    met &= o->wall_s < c->target_s;
  if (c->target_mb > 0)
    met &= o->rss_mb < c->target_mb;
  if (c->target_mops > 0)
    met &= outcome_num(o, "mops_per_s") >= c->target_mops;
  if (c->target_speedup > 0)
    met &= outcome_num(o, "speedup") >= c->target_speedup &&
           outcome_num(o, "identical") == 1;
  return met;
}

/* The simulated GPUs of a case: the child's own figure when it printed
 * one, else what the case was set up with; 0 when neither is known. */
static guint outcome_gpus(const BenchCase *c, const BenchOutcome *o)
{
  const char *v = outcome_get(o, "gpus");
  return v != NULL && is_number(v) ? (guint)g_ascii_strtoull(v, NULL, 10)
                                   : c->gpus;
}

/* The figures a case prints besides the fixed fields: what the child
 * printed, less its own RSS (the parent's wait4 figure is the one shown),
 * the GPUs (a fixed field) and the refusal marker. */
static gboolean shown_key(const char *k)
{
  return strcmp(k, "child_rss_mb") != 0 && strcmp(k, "gpus") != 0 &&
         strcmp(k, "refused") != 0;
}

static void print_json(GString *s, const BenchCase *c, const BenchOutcome *o)
{
  g_string_append(s, "    {\"id\": ");
  json_string(s, c->id);
  g_string_append(s, ", \"label\": ");
  json_string(s, c->label);
  guint gpus = outcome_gpus(c, o);
  if (gpus > 0)
    g_string_append_printf(s, ", \"gpus\": %u", gpus);
  else
    g_string_append(s, ", \"gpus\": null");
  g_string_append_printf(s, ", \"ok\": %s", o->ok ? "true" : "false");
  if (!o->ok) {
    if (o->refused)
      g_string_append(s, ", \"refused\": \"memory\"");
    g_string_append(s, ", \"error\": ");
    json_string(s, o->error);
  } else {
    g_string_append_printf(s, ", \"wall_s\": %.3f, \"user_s\": %.3f, "
                           "\"sys_s\": %.3f, \"peak_rss_mb\": %.0f",
                           o->wall_s, o->user_s, o->sys_s, o->rss_mb);
  }
  for (guint i = 0; o->keys != NULL && i < o->keys->len; i++) {
    const char *k = g_ptr_array_index(o->keys, i);
    const char *v = g_ptr_array_index(o->values, i);
    if (!shown_key(k))
      continue;
    g_string_append(s, ", ");
    json_string(s, k);
    g_string_append(s, ": ");
    if (is_number(v))
      g_string_append(s, v);
    else
      json_string(s, v);
  }
  if (c->target != NULL) {
    g_string_append(s, ", \"target\": ");
    json_string(s, c->target);
    int met = target_met(c, o);
    if (met >= 0)
      g_string_append_printf(s, ", \"target_met\": %s",
                             met ? "true" : "false");
  }
  g_string_append(s, "}");
}

static void print_text(const BenchCase *c, const BenchOutcome *o)
{
  printf("%-44s", c->label);
  if (!o->ok) {
    printf(" %s: %s\n", o->refused ? "REFUSED" : "FAILED", o->error);
    fflush(stdout);
    return;
  }
  printf(" %8.2f s %7.0f MB ", o->wall_s, o->rss_mb);
  guint gpus = outcome_gpus(c, o);
  if (gpus > 0)
    printf(" gpus=%u", gpus);
  for (guint i = 0; i < o->keys->len; i++) {
    const char *k = g_ptr_array_index(o->keys, i);
    if (shown_key(k))
      printf(" %s=%s", k, (const char *)g_ptr_array_index(o->values, i));
  }
  int met = target_met(c, o);
  if (met >= 0)
    printf("  [target %s: %s]", c->target, met ? "met" : "MISSED");
  printf("\n");
  fflush(stdout);
}

/* Sets case c's target: its label and its bounds (0: none) on wall
 * seconds, peak MB and replayed M ops/s. */
static void set_target(BenchCase *c, const char *label, double wall_s,
                       double mb, double mops)
{
  c->target = label;
  c->target_s = wall_s;
  c->target_mb = mb;
  c->target_mops = mops;
}

/* A replay case: MODEL TPxPPxDP, MB microbatches, folded or not, with
 * the cluster's per-GPU variability (perf, power; 0 0: none). */
static BenchCase *add_replay_var(GPtrArray *cases, const char *self,
                                 const char *id, const char *label,
                                 const char *model, guint tp, guint pp,
                                 guint dp, guint mb, gboolean fold,
                                 double perf, double power)
{
  char a[7][G_ASCII_DTOSTR_BUF_SIZE];
  g_snprintf(a[0], sizeof a[0], "%u", tp);
  g_snprintf(a[1], sizeof a[1], "%u", pp);
  g_snprintf(a[2], sizeof a[2], "%u", dp);
  g_snprintf(a[3], sizeof a[3], "%u", mb);
  g_snprintf(a[4], sizeof a[4], "%d", fold ? 1 : 0);
  g_ascii_dtostr(a[5], sizeof a[5], perf);
  g_ascii_dtostr(a[6], sizeof a[6], power);
  BenchCase *c = add_case(cases, self, id, label, "bench", "--case",
                          "replay", model, a[0], a[1], a[2], a[3], a[4],
                          a[5], a[6], NULL);
  c->gpus = tp * pp * dp;
  return c;
}

static BenchCase *add_replay(GPtrArray *cases, const char *self,
                             const char *id, const char *label,
                             const char *model, guint tp, guint pp, guint dp,
                             guint mb, gboolean fold)
{
  return add_replay_var(cases, self, id, label, model, tp, pp, dp, mb, fold,
                        0, 0);
}

static const char *profile_175b =
    "tests/data/profiles/gpt3-175b+a100_sxm_bf16.csv";

/* --scaling: one GPT-3 175B iteration (64 microbatches) on 8 to 8,192
 * GPUs, TP8 and up to 8 pipeline stages, then on 1,024 GPUs with 8 to 256
 * microbatches; unfolded and folded.  docs/performance.md tabulates it. */
static void add_scaling(GPtrArray *cases, const char *self, gboolean quick)
{
  guint max_gpus = quick ? 512 : 8192;
  for (guint n = 8; n <= max_gpus; n *= 2) {
    guint pp = MIN(8, n / 8), dp = n / (8 * pp);
    for (int fold = 0; fold < 2; fold++) {
      g_autofree char *id = g_strdup_printf("scaling/gpus-%u%s", n,
                                            fold ? "-folded" : "");
      g_autofree char *label = g_strdup_printf(
          "scaling 175b %u GPUs (tp8 pp%u dp%u)%s", n, pp, dp,
          fold ? ", folded" : "");
      add_replay(cases, self, id, label, "gpt3-175b", 8, pp, dp, 64, fold);
    }
  }
  for (guint mb = 8; mb <= (quick ? 32u : 256u); mb *= 2)
    for (int fold = 0; fold < 2; fold++) {
      g_autofree char *id = g_strdup_printf("scaling/mb-%u%s", mb,
                                            fold ? "-folded" : "");
      g_autofree char *label = g_strdup_printf(
          "scaling 175b %u GPUs, %u microbatches%s", quick ? 64 : 1024, mb,
          fold ? ", folded" : "");
      add_replay(cases, self, id, label, "gpt3-175b", 8, 8, quick ? 1 : 16,
                 mb, fold);
    }
}

static GPtrArray *make_cases(const char *self, gboolean quick,
                             gboolean scaling, GPtrArray *traces)
{
  GPtrArray *cases = g_ptr_array_new_with_free_func(
      (GDestroyNotify)bench_case_free);
  BenchCase *c;
  if (scaling) {
    add_scaling(cases, self, quick);
    return cases;
  }
  if (quick) {
    add_replay(cases, self, "replay/1gpu", "replay gpt3-1.3b 1 GPU, 64 mb",
               "gpt3-1.3b", 1, 1, 1, 64, FALSE);
    add_replay(cases, self, "replay/6.7b-8", "replay gpt3-6.7b tp2 pp2 dp2",
               "gpt3-6.7b", 2, 2, 2, 16, FALSE);
    add_replay(cases, self, "replay/6.7b-8-folded",
               "replay gpt3-6.7b tp2 pp2 dp2, folded", "gpt3-6.7b", 2, 2, 2,
               16, TRUE);
    add_replay_var(cases, self, "replay/6.7b-8-variability",
                   "replay gpt3-6.7b tp2 pp2 dp2, variability", "gpt3-6.7b",
                   2, 2, 2, 16, FALSE, 0.02, 0.02);
    c = add_case(cases, self, "planner/name-0",
                 "kernel planner by name, 6.7b/8", "bench", "--case",
                 "planner", "name", "0", "gpt3-6.7b", "2", "2", "2", "16",
                 NULL);
    c->gpus = 8;
    c = add_case(cases, self, "native/6.7b-8", "native trace gpt3-6.7b/8",
                 "bench", "--case", "native", "gpt3-6.7b", "2", "2", "2",
                 "16", NULL);
    c->gpus = 8;
    add_case(cases, self, "import/kineto", "Kineto JSON import (20 MB)",
             "bench", "--case", "import-kineto", "20", NULL);
  } else {
    c = add_replay(cases, self, "replay/1gpu",
                   "replay gpt3-1.3b 1 GPU, 256 mb", "gpt3-1.3b", 1, 1, 1,
                   256, FALSE);
    set_target(c, ">= 20 Mops/s", 0, 0, 20);
    c = add_replay(cases, self, "replay/175b-1024",
                   "replay gpt3-175b 1,024 GPUs (tp8 pp8 dp16)", "gpt3-175b",
                   8, 8, 16, 64, FALSE);
    set_target(c, ">= 50 Mops/s on one core", 0, 0, 50);
    add_replay(cases, self, "replay/175b-1024-folded",
               "replay gpt3-175b 1,024 GPUs, folded", "gpt3-175b", 8, 8, 16,
               64, TRUE);
    c = add_replay(cases, self, "replay/175b-8192",
                   "replay gpt3-175b 8,192 GPUs (dp128)", "gpt3-175b", 8, 8,
                   128, 64, FALSE);
    set_target(c, "< 8 s, < 3 GB", 8, 3072, 0);
    c = add_replay(cases, self, "replay/175b-8192-folded",
                   "replay gpt3-175b 8,192 GPUs, folded", "gpt3-175b", 8, 8,
                   128, 64, TRUE);
    set_target(c, "< 1 s", 1, 0, 0);
    /* Per-GPU variability: every rank priced on its own (no shared price
     * cache, SimMachine.uniform_pricing off), as a what-if with
     * manufacturing spread runs; cannot fold. */
    c = add_replay_var(cases, self, "replay/175b-8192-variability",
                       "replay gpt3-175b 8,192 GPUs, variability 2%",
                       "gpt3-175b", 8, 8, 128, 64, FALSE, 0.02, 0.02);
    set_target(c, "< 10 s", 10, 0, 0);
    /* 65,536 GPUs unfolded: refused by the memory check on a machine
     * without the memory its estimate names. */
    c = add_replay(cases, self, "replay/175b-65536",
                   "replay gpt3-175b 65,536 GPUs (dp1024)", "gpt3-175b", 8, 8,
                   1024, 64, FALSE);
    set_target(c, "< 60 s, < 20 GB", 60, 20480, 0);
    /* 131,072 GPUs: the 65,536 layout with twice the data parallelism. */
    c = add_replay(cases, self, "replay/175b-131072",
                   "replay gpt3-175b 131,072 GPUs (dp2048)", "gpt3-175b", 8,
                   8, 2048, 64, FALSE);
    set_target(c, "< 60 s", 60, 0, 0);
    /* Llama 3 405B as its paper trained it on 16,384 H100s (recipes[]). */
    c = add_case(cases, self, "replay/llama3-405b-16384",
                 "replay llama3-405b 16,384 H100s (tp8 pp16 dp128)", "bench",
                 "--case", "recipe", "llama3-405b-16384", NULL);
    c->gpus = 16384;
    set_target(c, "< 5 s, < 4 GB", 5, 4096, 0);
    /* The same replay on 1 thread and on 2 (the guide's 2-core
     * machine): the speedup, and the results bit for bit. */
    c = add_case(cases, self, "replay/175b-1024-threads",
                 "replay gpt3-175b 1,024 GPUs, 1 thread then 2", "bench",
                 "--case", "threads", "gpt3-175b", "8", "8", "16", "64", "2",
                 NULL);
    c->gpus = 1024;
    c->target = ">= 1.7x on 2 threads, identical";
    c->target_speedup = 1.7;
    static const char *const plans[4][3] = {
      {"planner/name-0", "kernel planner by name, 0 ms", "name"},
      {"planner/op-0", "kernel planner by op, 0 ms", "op"},
      {"planner/name-gpu", "kernel planner by name, GPU latency", "name"},
      {"planner/op-gpu", "kernel planner by op, GPU latency", "op"},
    };
    for (guint k = 0; k < 4; k++) {
      c = add_case(cases, self, plans[k][0], plans[k][1], "bench", "--case",
                   "planner", plans[k][2], k < 2 ? "0" : "gpu", "gpt3-175b",
                   "8", "8", "16", "64", NULL);
      c->gpus = 1024;
    }
    /* The planning policies on a folded 8,192-GPU workload, through the
     * policy API (js.simulate{ policy = ... }). */
    c = add_case(cases, self, "planner/name-8192-folded",
                 "kernel policy by name, 8,192 GPUs, folded, GPU latency",
                 "bench", "--case", "policy", "kernel", "gpt3-175b", "8", "8",
                 "128", "64", "1", "gpu", NULL);
    c->gpus = 8192;
    set_target(c, "< 15 s", 15, 0, 0);
    c = add_case(cases, self, "planner/perseus-8192-folded",
                 "Perseus policy, 8,192 GPUs, folded, GPU latency", "bench",
                 "--case", "policy", "perseus", "gpt3-175b", "8", "8", "128",
                 "64", "1", "gpu", NULL);
    c->gpus = 8192;
    set_target(c, "< 15 s", 15, 0, 0);
    if (g_file_test(profile_175b, G_FILE_TEST_IS_REGULAR)) {
      c = add_case(cases, self, "perseus/8x96",
                   "Perseus frontier, 8 stages x 96 mb", "run", "--quiet",
                   "@", profile_175b, "96", NULL);
      c->script = g_strdup(perseus_lua);
      c->gpus = 8;
    }
    c = add_case(cases, self, "native/175b-1024",
                 "native trace gpt3-175b/1,024", "bench", "--case", "native",
                 "gpt3-175b", "8", "8", "16", "64", NULL);
    c->gpus = 1024;
    add_case(cases, self, "import/kineto", "Kineto JSON import (200 MB)",
             "bench", "--case", "import-kineto", "200", NULL);
  }
  for (guint i = 0; i < traces->len; i++) {
    const char *t = g_ptr_array_index(traces, i);
    g_autofree char *id = g_strdup_printf("import/file-%u", i + 1);
    g_autofree char *label = g_strdup_printf("import vs native load: %s", t);
    add_case(cases, self, id, label, "bench", "--case", "import-file", t,
             NULL);
  }
  /* Sweeps: 1 job and one per core, forked workers. */
  guint ncpu = MAX(g_get_num_processors(), 2);
  const char *pts = quick ? "8" : "40";
  for (guint k = 0; k < 2; k++) {
    char jobs[16];
    g_snprintf(jobs, sizeof jobs, "%u", k == 0 ? 1 : ncpu);
    g_autofree char *id = g_strdup_printf("sweep/jobs-%s", jobs);
    g_autofree char *label = g_strdup_printf("sweep, %s points, %s job%s",
                                             pts, jobs, k ? "s" : "");
    c = add_case(cases, self, id, label, "run", "--quiet", "--jobs", jobs,
                 "@", "@OUT", pts, NULL);
    c->script = g_strdup(sweep_lua);
    c->gpus = 64;
  }
#ifdef JOULESIM_MPI
  g_autofree char *mpirun = g_find_program_in_path("mpirun");
  for (guint r = 1; mpirun != NULL && r <= 4; r *= 2) {
    char nr[8];
    g_snprintf(nr, sizeof nr, "%u", r);
    g_autofree char *id = g_strdup_printf("sweep-mpi/ranks-%u", r);
    g_autofree char *label = g_strdup_printf("sweep, %s points, %u MPI rank%s",
                                             pts, r, r > 1 ? "s" : "");
    if (geteuid() == 0)
      c = add_case(cases, mpirun, id, label, "--oversubscribe",
                   "--allow-run-as-root", "-n", nr, self, "run", "--quiet",
                   "--jobs", "1", "@", "@OUT", pts, NULL);
    else
      c = add_case(cases, mpirun, id, label, "--oversubscribe", "-n", nr,
                   self, "run", "--quiet", "--jobs", "1", "@", "@OUT", pts,
                   NULL);
    c->script = g_strdup(sweep_lua);
    c->gpus = 64;
  }
#endif
  return cases;
}

static gboolean id_selected(const char *id, GPtrArray *only)
{
  if (only->len == 0)
    return TRUE;
  for (guint i = 0; i < only->len; i++)
    if (g_str_has_prefix(id, g_ptr_array_index(only, i)))
      return TRUE;
  return FALSE;
}

enum { OPT_HELP, OPT_CASE, OPT_QUICK, OPT_JSON, OPT_SCALING, OPT_TRACE,
       OPT_ONLY, OPT_MAX_MEMORY, OPT_THREADS };

static const CliOption bench_options[] = {
  {"--help", OPT_HELP, FALSE},
  {"-h", OPT_HELP, FALSE},
  {"--case", OPT_CASE, FALSE},
  {"--quick", OPT_QUICK, FALSE},
  {"--json", OPT_JSON, FALSE},
  {"--scaling", OPT_SCALING, FALSE},
  {"--trace", OPT_TRACE, TRUE},
  {"--only", OPT_ONLY, TRUE},
  {"--max-memory", OPT_MAX_MEMORY, TRUE},
  {"--threads", OPT_THREADS, TRUE},
  {NULL, 0, FALSE}};

/* Hands option `opt` with `value` on to a case's child: after its
 * command word (the first "bench" or "run" argument; an MPI case's comes
 * after mpirun's own options). */
static void pass_option(BenchCase *c, const char *opt, const char *value)
{
  for (guint k = 0; k + 1 < c->argv->len; k++) {
    const char *a = g_ptr_array_index(c->argv, k);
    if (k > 0 && (strcmp(a, "bench") == 0 || strcmp(a, "run") == 0)) {
      g_ptr_array_insert(c->argv, k + 1, g_strdup(opt));
      g_ptr_array_insert(c->argv, k + 2, g_strdup(value));
      return;
    }
  }
}

int cmd_bench(const char *self, int argc, char **argv)
{
  gboolean quick = FALSE, json = FALSE, scaling = FALSE;
  const char *max_memory_arg = NULL, *threads_arg = NULL;
  guint64 max_memory = 0;
  guint threads = 1;
  g_autoptr(GPtrArray) traces = g_ptr_array_new();
  g_autoptr(GPtrArray) only = g_ptr_array_new();
  CliArgs a;
  cli_args_init(&a, argc, argv, bench_options, 0);
  for (int id; (id = cli_next(&a)) != CLI_DONE;) {
    if (id == OPT_HELP) {
      fputs(usage_bench, stdout);
      return 0;
    } else if (id == OPT_CASE) {
      /* A child: the rest is its case and arguments. */
      return run_child(CLI_REST_ARGC(&a), CLI_REST_ARGV(&a), max_memory,
                       threads);
    } else if (id == OPT_QUICK) {
      quick = TRUE;
    } else if (id == OPT_JSON) {
      json = TRUE;
    } else if (id == OPT_SCALING) {
      scaling = TRUE;
    } else if (id == OPT_TRACE && a.value != NULL) {
      g_ptr_array_add(traces, (gpointer)a.value);
    } else if (id == OPT_ONLY && a.value != NULL) {
      g_ptr_array_add(only, (gpointer)a.value);
    } else if (id == OPT_MAX_MEMORY && a.value != NULL) {
      GError *merr = NULL;
      if (!js_memory_parse(a.value, &max_memory, &merr)) {
        fprintf(stderr, "joulesim bench: %s\n", merr->message);
        g_error_free(merr);
        return EXIT_USAGE;
      }
      max_memory_arg = a.value;
    } else if (id == OPT_THREADS && a.value != NULL) {
      char *end = NULL;
      guint64 v = g_ascii_strtoull(a.value, &end, 10);
      if (end == a.value || *end != '\0' || v < 1 || v > SIM_MAX_THREADS) {
        fprintf(stderr, "joulesim bench: --threads needs an integer in "
                        "1..%u\n", SIM_MAX_THREADS);
        return EXIT_USAGE;
      }
      threads = (guint)v;
      threads_arg = a.value;
    } else {
      /* An unknown option, an argument, or --trace/--only without a
       * value. */
      fprintf(stderr, "joulesim bench: unknown option '%s'\n%s", a.arg,
              usage_bench);
      return EXIT_USAGE;
    }
  }
  /* The child cases need this very binary: /proc/self/exe, not argv[0],
   * which may be a bare name found on the PATH. */
  g_autofree char *exe = g_file_read_link("/proc/self/exe", NULL);
  g_autoptr(GPtrArray) cases = make_cases(exe != NULL ? exe : self, quick,
                                          scaling, traces);
  GError *err = NULL;
  g_autofree char *dir = g_dir_make_tmp("joulesim-bench-XXXXXX", &err);
  if (dir == NULL) {
    fprintf(stderr, "joulesim: %s\n", err->message);
    g_error_free(err);
    return EXIT_USER;
  }
  g_autofree char *out_h5 = g_build_filename(dir, "sweep.h5", NULL);
  GString *js = g_string_new(NULL);
  g_string_append_printf(js, "{\n  \"joulesim\": \"%s\",\n  \"git\": \"%s\",\n"
                         "  \"cores\": %u,\n  \"threads\": %u,\n"
                         "  \"quick\": %s,\n  \"cases\": [\n",
                         JOULESIM_VERSION, JOULESIM_GIT_REV,
                         g_get_num_processors(), threads,
                         quick ? "true" : "false");
  if (!json)
    printf("joulesim %s bench (%u cores; each case in its own process; wall "
           "time and peak RSS of that process)\n", JOULESIM_VERSION,
           g_get_num_processors());
  guint failed = 0, refused = 0, n_json = 0;
  for (guint i = 0; i < cases->len; i++) {
    BenchCase *c = g_ptr_array_index(cases, i);
    if (!id_selected(c->id, only))
      continue;
    for (guint k = 0; k + 1 < c->argv->len; k++)
      if (strcmp(g_ptr_array_index(c->argv, k), "@OUT") == 0) {
        g_free(g_ptr_array_index(c->argv, k));
        g_ptr_array_index(c->argv, k) = g_strdup(out_h5);
      }
    if (max_memory_arg != NULL)
      pass_option(c, "--max-memory", max_memory_arg);
    if (threads_arg != NULL)
      pass_option(c, "--threads", threads_arg);
    BenchOutcome o;
    if (!run_case(c, dir, &o, &err)) {
      fprintf(stderr, "joulesim: bench %s: %s\n", c->id, err->message);
      g_clear_error(&err);
      failed++;
      continue;
    }
    if (o.refused)
      refused++;
    else if (!o.ok)
      failed++;
    if (json) {
      if (n_json++ > 0)
        g_string_append(js, ",\n");
      print_json(js, c, &o);
    } else {
      print_text(c, &o);
    }
    g_unlink(out_h5);
    outcome_clear(&o);
  }
  g_string_append(js, "\n  ]\n}\n");
  if (json)
    fputs(js->str, stdout);
  g_string_free(js, TRUE);
  g_rmdir(dir);
  /* A case refused for memory is not a failure: the machine is too small
   * for it, and it said so before allocating. */
  if (refused > 0)
    fprintf(stderr, "joulesim: %u bench case%s refused: not enough memory "
            "for %s estimate\n", refused, refused == 1 ? "" : "s",
            refused == 1 ? "its" : "their");
  if (failed > 0) {
    fprintf(stderr, "joulesim: %u bench case%s failed\n", failed,
            failed == 1 ? "" : "s");
    return EXIT_USER;
  }
  return 0;
}

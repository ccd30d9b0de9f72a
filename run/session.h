/* run/session.h -- one scenario run's context and the orchestration shared
 * by the Lua binding, the CLI and the benchmark: cluster + workload + policy
 * -> machine -> plan -> engine -> result.  No global state: everything a
 * script needs lives in its JsSession.
 */
#ifndef LUA_SESSION_H
#define LUA_SESSION_H

#include <glib.h>
#include "sim/engine.h"
#include "models/gpu.h"
#include "models/cluster.h"
#include "models/dvfs/policy.h"
#include "models/dvfs/planner.h"
#include "models/dvfs/perseus.h"
#include "models/straggler.h"
#include "run/confine.h"
#include "run/trust.h"
#include "traces/profile.h"
#include "traces/timeline.h"
#include "models/fit.h"

G_BEGIN_DECLS

/* The limits of one script run (joulesim run --max-seconds,
 * --max-instructions, --max-memory) and their state while it runs: the
 * Lua VM's count hook and capped allocator (lua/sandbox.c), the hard stop
 * and a sweep's share (run/limits.c).  A fork()ed sweep worker inherits all of it: the same
 * deadline, the instructions and heap counted so far. */
typedef struct {
  double max_seconds;        /* wall time; 0: unlimited */
  guint64 max_instructions;  /* Lua VM instructions; 0: unlimited */
  gint64 deadline_us;        /* g_get_monotonic_time() when time is up; 0 */
  guint64 executed;          /* instructions counted (hook periods) */
  gsize heap_bytes;          /* the Lua heap in use */
  gsize heap_limit;          /* its cap (--max-memory); 0: none */
  gboolean heap_refused;     /* an allocation was refused at the cap */
  char *hit;                 /* owned: the limit that stopped the script */
  guint close_depth;         /* coroutine.close calls in progress */
  guintptr cstack_base;      /* a C stack address when the script began */
  /* A sweep's share of the limits (js_limits_share), taken by each worker
   * after the fork (js_limits_after_fork). */
  guint shared_by;           /* workers sharing them; 0: no sweep */
  gsize worker_heap_limit;   /* a worker's heap cap; 0: none */
  guint64 worker_max_memory; /* a worker's --max-memory; 0: none given */
} JsLimits;

/* How long after the --max-seconds deadline the hard stop ends a process
 * that is still inside C code. */
#define JS_HARD_STOP_S 2

/* Sets the --max-seconds deadline (none when lim->max_seconds is 0) and
 * arms the hard stop: SIGALRM, JS_HARD_STOP_S seconds after it, writes
 * stop_message to stderr and _exit(1)s.  js_limits_stop_clock disarms
 * it. */
void js_limits_start_clock(JsLimits *lim, const char *stop_message);
void js_limits_stop_clock(JsLimits *lim);

/* Where the text a script writes goes: Lua's print (JS_PRINT_OUT, the
 * script's output), its warnings and a Lua panic's message (JS_PRINT_ERR,
 * diagnostics).  The library never prints: the CLI installs a hook that
 * writes to stdout and stderr (cli/session.c); with no hook (C tests,
 * fuzz targets) the text is dropped.  `text` is not NUL-terminated. */
typedef enum { JS_PRINT_OUT, JS_PRINT_ERR } JsPrintStream;
typedef void (*JsPrintFunc)(JsPrintStream to, const char *text, gsize len,
                            gpointer data);
struct SweepProgress; /* run/sweep.h */

typedef struct {
  GpuCatalogue *catalogue;  /* owned; the built-in entries (callers that
                               want $JOULESIM_GPU_PATH's call
                               gpu_catalogue_load_path) */
  guint64 seed;             /* --seed */
  char *scenario_path;      /* owned, may be NULL */
  char *scenario_source;    /* owned, may be NULL */
  char *run_id;             /* owned: this run's id, written with every
                               results row (column run_id) and as the
                               table attribute run:<id> (docs/sweeps.md,
                               "Telling runs apart") */
  char *run_started;        /* owned: when, ISO 8601 UTC */
  gboolean quiet;
  guint jobs;
  guint threads;            /* --threads: js.simulate's replay threads
                               (default 1; sim_engine_set_threads) */
  guint64 max_memory;       /* --max-memory bytes; 0: what is available */
  gboolean sandbox;         /* --sandbox: allow-listed globals, confined
                               files (lua/sandbox.c, run/confine.h) */
  JsConfine *confine;       /* owned; the sandbox's file rules (set when
                               sandbox is) */
  JsLimits limits;
  JsPrintFunc print;        /* NULL: a script's text is dropped */
  gpointer print_data;
  gboolean lua_warnings_on; /* Lua's warn("@on") / warn("@off"); a new
                               Lua state starts with them off */
  gboolean lua_warning_open; /* a Lua warning's pieces are still coming
                                (lua/sandbox.c) */
  guint sweep_failed;       /* points failed in sweeps since
                               js_sweep_take_failed (run/sweep.h) */
  /* Optional: how a sweep shows its progress (cli/sweep_progress.c);
   * NULL: it does not. */
  void (*sweep_progress)(const struct SweepProgress *p, gpointer data);
  gpointer sweep_progress_data;
  int trust_weakest;        /* the weakest JsTrustLevel of the runs since
                               js.sweep's worker began its point; -1:
                               none ran (run/sweep_pool.c) */
  /* The GPU memory of the js.simulate runs since js.sweep's worker began
   * its point (the sweep's memory_gb and fits columns): the largest
   * per-rank estimate in GB, < 0 when no run had one (a js.gpt workload
   * has), and whether one of them did not fit its GPU. */
  double gpu_memory_gb;
  gboolean gpu_memory_unfit;
} JsSession;

JsSession *js_session_new(guint64 seed);
void js_session_free(JsSession *s);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(JsSession, js_session_free)

/* The seed of a run whose caller may name one: `seed` when `given`, else
 * the session's (--seed).  Every door that takes a seed argument
 * (js.simulate, js.validate, math.randomseed, ...) defaults it here. */
guint64 js_session_seed(const JsSession *s, gboolean given, guint64 seed);

/* Turns the sandbox on with its default rules: writes below the current
 * directory, reads there and below the directory of `script` (may be
 * NULL).  --allow-write/--allow-read add to s->confine afterwards. */
gboolean js_session_sandbox(JsSession *s, const char *script, GError **error);

/* In the parent, before js.sweep forks `workers` workers: divides what is
 * left of the memory limits among them.  With
 * --max-memory, each worker may hold (max_memory - this process's resident
 * bytes) / workers, its copy of the Lua heap included (a worker's garbage
 * collector touches every inherited page, so copy-on-write does not keep
 * it shared); JS_MEMORY_ERROR_LIMIT when that share would not hold the
 * heap a worker starts with and a few MB to run in.  Without it, the Lua
 * heap left under the memory available at start is divided. */
gboolean js_limits_share(JsSession *s, guint workers, GError **error);

/* In a fork()ed child (js.sweep's workers): takes the worker's share of
 * the limits (js_limits_share) and re-arms the --max-seconds hard stop,
 * which fork does not inherit. */
void js_limits_after_fork(JsSession *s);

/* Whether the joulesim API may read `path` (write it, replacing what is
 * there only if it is a file of `kind`) in this session: always outside
 * the sandbox; inside, js_confine_check and, for writes, js_output_check.
 * Errors name the path and the rule. */
gboolean js_session_may_read(const JsSession *s, const char *path,
                             GError **error);
gboolean js_session_may_write(const JsSession *s, const char *path,
                              JsFileKind kind, GError **error);

/* A run's timeline (traces/timeline.h): Chrome JSON at `path`, or power
 * and SM clock per GPU as /timelines/<name> of the results file `path`.
 * Strings are borrowed. */
typedef struct {
  const char *path;
  const char *name;          /* HDF5: the timeline's name; NULL: JSON */
  gboolean replace;          /* HDF5: replace timeline `name` if it exists */
  ResMeta meta;              /* HDF5: the results file's, when it is new */
  const char *gpus;          /* the GPUs written, "0,4-7"; NULL: all */
  const char *gpus_context;  /* optional: prefixes an error in `gpus`
                                ("CONTEXT: ...") */
  gint64 t0_ns, t1_ns;       /* the window; t1_ns < 0: to the end */
  const char *label;         /* stored in the file; may be NULL */
} JsTimelineSpec;

/* No file; all GPUs, the whole run. */
void js_timeline_spec_init(JsTimelineSpec *t);

typedef struct {
  guint iterations;          /* >= 1 */
  guint64 seed;
  double switch_latency_ms;  /* < 0: the policy's (when it names one),
                                else the cluster's */
  SimObserver observer;      /* optional: sees every op of the run (a
                                pipeline policy's: of the replay it
                                returns; perseus_run) */
  gpointer observer_data;
  const JsTimelineSpec *timeline; /* optional, borrowed: the run writes
                                this timeline (its observer replaces
                                `observer`); the file is there only when
                                the run succeeds */
  const StragglerSet *stragglers; /* optional, borrowed: slow GPUs */
  gboolean variability;      /* TRUE: perf_spread and power_spread replace
                                the cluster's for this run */
  double perf_spread, power_spread;
  guint threads;             /* replay threads; 0: the session's */
} JsRunOptions;

/* What a run produced besides its result. */
typedef struct {
  DvfsPlanResult *plan;      /* planned kinds: the planner's report (its
                                `plan` taken out); else NULL */
  PerseusRun *pipeline;      /* pipeline kinds (perseus, envpipe, zeus):
                                the run, its `result` taken out (its
                                candidate clocks: clocks); else NULL */
  guint n_stages, n_microbatches; /* pipeline kinds */
  GArray *steps;             /* JsStepRow, per iteration per step, for a
                                workload with step markers (trace import
                                --step all); else NULL */
  DvfsKind pipeline_kind;    /* pipeline kinds: which one ran */
  JsTrust trust;             /* how far the result can be trusted
                                (run/trust.h); set when the run succeeds */
  TraceTimelineCounts timeline; /* with JsRunOptions.timeline: what the
                                file holds */
} JsRunReport;

/* One profiled step of one replayed iteration: the time from its marker
 * (ProfilerStep#N on the first rank that has them) to the next one (or
 * the iteration's end), and the energy of every GPU in that window. */
typedef struct {
  guint iteration;
  gint64 step;               /* N of ProfilerStep#N */
  gint64 time_ns;
  double energy_j;
} JsStepRow;

void js_run_report_clear(JsRunReport *r);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(JsRunReport, js_run_report_clear)

/* Simulates w on c under policy p: plans it first when it is a planned
 * policy (powercap, iteration, pass, kernel, custom; models/dvfs/
 * planner.h), then replays opt->iterations iterations with the plan (and
 * the power limit a powercap policy chose).  The pipeline policies
 * (perseus, envpipe, zeus) plan and run through perseus_run, which applies
 * opt->stragglers itself (a straggler-aware Perseus re-plans at iteration
 * boundaries); every other policy runs on a machine that slows the
 * stragglers' kernels (models/straggler.h).  When the machine prices ops
 * from a measured table, the plan is checked against the table's clock
 * ranges first (price_table_check_plan) and the pricing after the run
 * (cluster_machine_check).  Returns a new result or NULL with an error
 * naming what failed.
 *
 * A folded workload (w->fold_rep set: js.gpt{ fold = true }, or
 * sim_workload_fold) replays one representative per class of identical
 * ranks and gives the unfolded results (sim/engine.h).  That is exact only
 * if every member of a class is priced like its representative, so it is
 * refused (SIM_ERROR_INVALID, naming the cause) with per-GPU variability,
 * with a non-empty straggler set, with an observer (timeline), with a
 * planned or pipeline policy (their planners observe an unfolded baseline
 * replay; models/dvfs/model.c folds identical ranks itself), and on a
 * cluster whose last node is partly filled. */
SimResult *js_simulate(JsSession *s, const Cluster *c, const SimWorkload *w,
                       const DvfsPolicy *p, const JsRunOptions *opt,
                       GError **error);

/* Same, and hands over the planner's report (chosen plan, figures, per-
 * kernel summary; its `plan` field taken out, NULL) in *plan_out: NULL for
 * max/fixed, set for a planned policy even when the replay then fails.
 * Caller frees it with dvfs_plan_result_free. */
SimResult *js_simulate_planned(JsSession *s, const Cluster *c,
                               const SimWorkload *w, const DvfsPolicy *p,
                               const JsRunOptions *opt,
                               DvfsPlanResult **plan_out, GError **error);

/* Same, filling *report (cleared first; the caller clears it, also on
 * failure). */
SimResult *js_simulate_report(JsSession *s, const Cluster *c,
                              const SimWorkload *w, const DvfsPolicy *p,
                              const JsRunOptions *opt, JsRunReport *report,
                              GError **error);

/* js_simulate_report's part for a run with opt->timeline (run/
 * timeline.c): opens the file (errors name it, or the GPU list), runs with
 * it as the observer, and writes it (RES_ERROR_EXISTS: an HDF5 timeline of
 * that name exists and replace is off) or abandons it. */
SimResult *js_simulate_timeline(JsSession *s, const Cluster *c,
                                const SimWorkload *w, const DvfsPolicy *p,
                                const JsRunOptions *opt, JsRunReport *report,
                                GError **error);

/* An uncertainty interval of a run from bootstrap resamples of a measured
 * profile: every resample's fitted GPU replaces the cluster's, and the run
 * is simulated again (run/uncertainty.c). */
typedef struct {
  const Profile *profile;    /* borrowed */
  guint samples;             /* >= 2 */
  double level;              /* in (0, 1) */
  FitMode mode;              /* what is refitted: time, power or all */
  double power_limit_w;      /* the profile's power limit; 0: the GPU's */
  gboolean seed_given;       /* seed: the resamples' seed, when given;
                                else the run's (JsRunOptions.seed) */
  guint64 seed;
} JsUncertaintySpec;

/* Defaults: 200 samples, level 0.9, all refitted, the run's seed. */
void js_uncertainty_spec_init(JsUncertaintySpec *u, const Profile *profile);

/* The intervals of the run (s, c, w, p, opt; its timeline and observer
 * are not used) on u's resamples: energy in iv[0], time in iv[1], their
 * estimates from the GPU refitted to every point of the profile.  A
 * resample's run is not one of the script's: it leaves the session's
 * trust_weakest as it was. */
gboolean js_simulate_intervals(JsSession *s, const Cluster *c,
                               const SimWorkload *w, const DvfsPolicy *p,
                               const JsRunOptions *opt,
                               const JsUncertaintySpec *u, FitInterval iv[2],
                               GError **error);

G_END_DECLS

#endif

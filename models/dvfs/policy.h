/* models/dvfs/policy.h -- DVFS policies: turn a workload into a frequency
 * plan (DESIGN section 6).
 *
 * A policy is a small value (kind + parameters) that scripts build with
 * js.policy.NAME{...}.  What a kind does lives in its class
 * (DvfsPolicyClass, a table of function pointers as ROSS's tw_lptype): its
 * name, accepted arguments, label, check, and either `plan` (a plan to
 * replay: the uniform policies max and fixed directly, the planned ones
 * powercap, iteration, pass, kernel and custom through the planner,
 * models/dvfs/planner.h) or `run` (the pipeline policies, which drive
 * their own engine through perseus_run, models/dvfs/perseus.h).  Each class
 * is defined in models/dvfs/policy_NAME.c and listed once in the registry
 * (models/dvfs/policy.c, `classes`).  Definitions used throughout: baseline = the same
 * workload at auto clocks; energy saving = 1 - E/E_base; slowdown =
 * T/T_base - 1; a policy with slowdown = s keeps the simulated slowdown
 * <= s + DVFS_SLOWDOWN_TOL.
 */
#ifndef MODELS_DVFS_POLICY_H
#define MODELS_DVFS_POLICY_H

#include <glib.h>
#include "sim/engine.h"
#include "models/cluster.h"
#include "models/straggler.h"

G_BEGIN_DECLS

/* Tolerance on the slowdown budget: per-op durations are rounded to whole
 * nanoseconds, so a plan that is exact in the model may end a few ns late.
 * The planner accepts T <= T_base * (1 + s + DVFS_SLOWDOWN_TOL). */
#define DVFS_SLOWDOWN_TOL 1e-6

/* The built-in kinds: a kind is its class's index in the registry
 * (dvfs_policy_class), so a class listed after these has the kind
 * DVFS_KIND_COUNT, DVFS_KIND_COUNT + 1, ... (find it by name:
 * dvfs_policy_class_by_name). */
typedef enum {
  DVFS_MAX = 0,   /* auto clocks everywhere: the baseline */
  DVFS_FIXED,     /* locked clocks everywhere */
  DVFS_POWERCAP,  /* a power limit (watts > 0) or the best one within s */
  DVFS_ITERATION, /* one clock pair for the whole iteration */
  DVFS_PASS,      /* one pair per phase (forward, backward, optimizer) */
  DVFS_KERNEL,    /* one pair per distinct kernel (or op, or segment) */
  DVFS_CUSTOM,    /* a callback chooses the pair of each kernel/segment */
  DVFS_PERSEUS,   /* pipelines: a time-energy frontier point (perseus.h) */
  DVFS_ENVPIPE,   /* pipelines: EnvPipe (models/dvfs/envpipe.h) */
  DVFS_ZEUS,      /* pipelines: Zeus's power limit (models/dvfs/zeus.h) */
  DVFS_PLAN,      /* pipelines: a given clock per computation (replay) */
  DVFS_KIND_COUNT
} DvfsKind;

typedef enum {
  DVFS_GRANULARITY_NAME = 0, /* one pair per distinct (kernel name, phase) */
  DVFS_GRANULARITY_OP        /* one pair per op */
} DvfsGranularity;

/* What a custom policy is shown for one unit (a distinct kernel, an op or a
 * segment of consecutive ops): its time and energy at each candidate clock
 * pair.  Times and energies are per iteration, summed over every op of the
 * unit on every GPU; energy is board power x time while the ops run. */
typedef struct {
  SimClocks clocks;      /* requested pair (0 = auto) */
  double time_s;
  double energy_j;
} DvfsOption;

typedef struct {
  const char *name;      /* kernel name; a segment: "first .. last" */
  const char *kind;      /* "kernel", "op" or "segment" */
  SimOpClass klass;      /* of the first kernel */
  SimPhase phase;        /* of the first kernel */
  guint64 count;         /* kernels, all GPUs, per iteration */
  double slack_s;        /* the least free stretch of its ops at auto
                            clocks: how much each could grow without
                            delaying the iteration (0: on a critical path) */
  double critical_frac;  /* share of its auto time on critical paths */
  guint n_options;       /* options[0] is auto */
  const DvfsOption *options;
} DvfsUnitInfo;

/* A custom policy's chooser: sets *out (0 = auto for either clock) or
 * returns FALSE with error set to abort the plan. */
typedef gboolean (*DvfsChooseFn)(gpointer data, const DvfsUnitInfo *unit,
                                 SimClocks *out, GError **error);

typedef struct {
  DvfsKind kind;
  guint sm_mhz;               /* DVFS_FIXED: 0 = auto */
  guint mem_mhz;              /* DVFS_FIXED: 0 = auto */
  /* The fields below are zero in a zero-initialised policy; use
   * dvfs_policy_init() for the planned kinds. */
  double slowdown;            /* budget s >= 0 (POWERCAP search, ITERATION,
                                 PASS, KERNEL) */
  double watts;               /* POWERCAP: > 0 a fixed limit, 0 = search */
  DvfsGranularity granularity; /* KERNEL, CUSTOM */
  double switch_latency_ms;   /* KERNEL, CUSTOM, PASS: the latency the plan
                                 is made and checked for; -1 = the run's */
  double min_segment_ms;      /* KERNEL, CUSTOM: -1 = the latency */
  /* The pipeline kinds (PERSEUS, ENVPIPE, ZEUS) run through perseus_run
   * (models/dvfs/perseus.h) on a pipelined workload. */
  gboolean straggler_aware;   /* PERSEUS: re-plan around stragglers */
  guint lag;                  /* PERSEUS: iterations before the reaction */
  double eta;                 /* ZEUS: weight of energy in [0, 1] */
  double step_w;              /* ZEUS: power-limit step (> 0) */
  double resolution;          /* PERSEUS: frontier time resolution, [0, 0.1]
                                 (PERSEUS_RESOLUTION) */
  gboolean kernel_within;     /* PERSEUS: kernel-level clocks inside each
                                 computation (perseus_kernel_plan) */
  /* PLAN: the SM clock of every computation, plan_stages x
   * plan_microbatches x 2 at (s * M + m) * 2 + b (b = 1 backward; the
   * order of pipeline_node_id), in MHz; borrowed. */
  const guint16 *plan_mhz;
  guint plan_stages, plan_microbatches;
  DvfsChooseFn choose;        /* CUSTOM */
  gpointer choose_data;       /* CUSTOM, borrowed */
  /* Optional restriction of the candidate clocks (borrowed arrays; NULL =
   * every SM clock step and every memory clock of the GPU). */
  const guint *sm_clocks;
  guint n_sm_clocks;
  const guint *mem_clocks;
  guint n_mem_clocks;
  /* Parameters of a kind that none of the fields above names: a class's
   * arguments (DvfsArg.offset) may address these. */
  double extra[4];
} DvfsPolicy;

/* Sets every field to its default for `kind` (latency and segment length
 * from the run, granularity by name, no budget; the pipeline fields --
 * straggler_aware, lag, eta, step_w, resolution, kernel_within -- to the
 * defaults of the perseus and zeus classes' argument tables). */
void dvfs_policy_init(DvfsPolicy *p, DvfsKind kind);

/* Stable lower-case names ("max", "fixed", "powercap", "iteration", "pass",
 * "kernel", "custom", "perseus", "envpipe", "zeus", "plan") and granularity
 * names ("name", "op"). */
const char *dvfs_kind_name(DvfsKind k);
const char *dvfs_granularity_name(DvfsGranularity g);

/* ---- classes ----------------------------------------------------------- */

/* One argument a policy accepts (js.policy.NAME{key = value}): its type,
 * the field of DvfsPolicy it sets, its default when absent and the range
 * a given value must be in.  The table is the one statement of them: the
 * doors parse by it (lua/policy.c, cli/policy_spec.c) and
 * dvfs_check_args checks a DvfsPolicy by it, where a field equal to the
 * default stands for an argument not given. */
typedef enum {
  DVFS_ARG_NUM,     /* double */
  DVFS_ARG_UINT,    /* guint, an integer in [lo, hi] */
  DVFS_ARG_BOOL,    /* gboolean */
  DVFS_ARG_CHOICE   /* an enum (int): the index of a name in `choices` */
} DvfsArgType;

typedef struct {
  const char *name;            /* NULL ends a list */
  DvfsArgType type;
  gsize offset;                /* offsetof(DvfsPolicy, field) */
  double def, lo, hi;
  const char *const *choices;  /* DVFS_ARG_CHOICE, NULL-terminated */
  const char *note;            /* ends dvfs_check_args's range error:
                                  " W", " (the weight of energy)" */
} DvfsArg;

/* Writes v, converted to argument a's type (an integer, a boolean: v !=
 * 0, a choice's index), into a's field of p: how every door sets what it
 * parsed. */
void dvfs_arg_set(const DvfsArg *a, DvfsPolicy *p, double v);

/* Argument a's field of p, as a double. */
double dvfs_arg_get(const DvfsArg *a, const DvfsPolicy *p);

/* Writes the default of every argument of the list a into p. */
void dvfs_arg_defaults(const DvfsArg *a, DvfsPolicy *p);


/* What a policy plans or runs on: the run's cluster (its overrides
 * applied), the workload, the catalogue that resolves the workload's
 * reference GPU (may be NULL) and the run's seed. */
typedef struct {
  const Cluster *run;
  const SimWorkload *w;
  const GpuCatalogue *catalogue;
  const StragglerSet *stragglers; /* run: may be NULL */
  guint iterations;               /* run: >= 1 */
  SimObserver observer;           /* run: sees the replay whose result is
                                     returned (a timeline); may be NULL */
  gpointer observer_data;
  guint64 seed;                   /* the GPUs' variability draws
                                     (cluster_machine_new) */
} DvfsContext;

struct DvfsPlanResult; /* models/dvfs/planner.h */
struct PerseusRun;     /* models/dvfs/perseus.h */
struct PlannerClass;   /* models/dvfs/planner-private.h */

enum {
  DVFS_CLASS_PLANNED = 1 << 0,  /* plans from an observed replay of every
                                   rank class (the planner; a folded
                                   workload's representatives): its plan
                                   result is the run's report, its
                                   switch_latency_ms the run's latency */
  DVFS_CLASS_PIPELINE = 1 << 1, /* drives its own engine (`run`), on a
                                   pipelined workload */
  /* What a Lua door reads besides the typed arguments, and requires from
   * the constructor: */
  DVFS_CLASS_TAKES_FN = 1 << 2,   /* `fn`, a function: the chooser
                                     (DvfsPolicy.choose) */
  DVFS_CLASS_TAKES_PLAN = 1 << 3  /* `plan`, clocks per stage and
                                     microbatch or a sched.json path:
                                     plan_mhz */
};

typedef struct {
  const char *name;            /* "kernel": js.policy.kernel */
  const char *const *keys;     /* accepted argument names, "name" first
                                  (the order error messages list them) */
  const DvfsArg *args;         /* their types, in the order they are read */
  guint flags;                 /* DVFS_CLASS_* */
  /* DVFS_CLASS_PLANNED: what it gives the planner (its flags and search,
   * or its own strategy); its `plan` is then planner_plan. */
  const struct PlannerClass *planner;
  /* A short readable label (caller frees); NULL: the name. */
  char *(*label)(const DvfsPolicy *p);
  /* Checks p's parameters against the cluster; NULL: nothing to check. */
  gboolean (*check)(const DvfsPolicy *p, const Cluster *c, GError **error);
  /* Plans p: a result whose `plan` is replayed (and power_limit_w, when
   * >= 0, applied).  Called with a checked p.  Caller owns the result. */
  struct DvfsPlanResult *(*plan)(const DvfsPolicy *p, const DvfsContext *x,
                                 GError **error);
  /* Or runs p itself (DVFS_CLASS_PIPELINE; `plan` is then NULL): plans,
   * reacts to stragglers and replays x->iterations iterations. */
  struct PerseusRun *(*run)(const DvfsPolicy *p, const DvfsContext *x,
                            GError **error);
} DvfsPolicyClass;

/* The class of kind k (NULL when there is none), of a name ("auto" is
 * max's alias; NULL when unknown), and how many are registered. */
const DvfsPolicyClass *dvfs_policy_class(DvfsKind k);

/* The argument of class kl called name; NULL when it takes none so called. */
const DvfsArg *dvfs_class_arg(const DvfsPolicyClass *kl, const char *name);
const DvfsPolicyClass *dvfs_policy_class_by_name(const char *name);
guint dvfs_policy_n_classes(void);

/* Checks p against x->run (dvfs_policy_check), then plans it with its
 * class's `plan`: the one call a door makes for a policy it replays.
 * NULL with an error for a policy that fails its check or whose class
 * runs itself. */
struct DvfsPlanResult *dvfs_policy_plan(const DvfsPolicy *p,
                                        const DvfsContext *x, GError **error);

/* TRUE for the kinds that need the planner (dvfs_planner_run): powercap,
 * iteration, pass, kernel, custom. */
gboolean dvfs_policy_is_planned(const DvfsPolicy *p);
/* TRUE for the pipeline kinds (perseus, envpipe, zeus, plan), which plan and run
 * through perseus_run (models/dvfs/perseus.h). */
gboolean dvfs_policy_is_pipeline(const DvfsPolicy *p);

/* A short readable label: "max", "fixed(sm=1200)", "kernel(name,s=0.01)".
 * With g (may be NULL) the clocks it shows are the ones that run on g,
 * snapped to its steps: fixed{ sm = 1207 } on an A100 is
 * "fixed(sm=1200)".  Caller frees. */
char *dvfs_policy_label(const DvfsPolicy *p, const GpuSpec *g);

/* A clock (0 = auto) within the GPU's SM clock range / memory clocks;
 * DVFS_ERROR_INVALID naming `what` otherwise (js.simulate's policies,
 * js.gpu.price). */
gboolean dvfs_check_sm(const GpuSpec *g, const char *what, guint v,
                       GError **error);
gboolean dvfs_check_mem(const GpuSpec *g, const char *what, guint v,
                        GError **error);

/* Checks the policy's parameters against the cluster's GPU (clocks within
 * range, power limit within the GPU's range, budget >= 0) with its class's
 * `check`, then its class's arguments against their table
 * (dvfs_check_args); errors name the parameter, its value and the allowed
 * range. */
gboolean dvfs_policy_check(const DvfsPolicy *p, const Cluster *c,
                           GError **error);

/* Checks every argument of class kl in p against kl->args: a number
 * within [lo, hi] or equal to its default, a choice among its names
 * (booleans are always one or the other).  DVFS_ERROR_INVALID naming the
 * argument, its value and the range otherwise: "eta = 2 must be in
 * [0, 1] (the weight of energy)". */
gboolean dvfs_check_args(const DvfsPolicyClass *kl, const DvfsPolicy *p,
                         GError **error);

/* Builds the plan of a uniform policy (max, fixed) for workload w on
 * cluster c.  Caller owns the plan.  Planned and pipeline kinds fail with
 * DVFS_ERROR_INVALID (use dvfs_planner_run / perseus_run). */
SimPlan *dvfs_plan(const DvfsPolicy *p, const Cluster *c,
                   const SimWorkload *w, GError **error);

#define DVFS_ERROR (dvfs_error_quark())
GQuark dvfs_error_quark(void);
typedef enum {
  DVFS_ERROR_INVALID,  /* bad policy parameter */
  DVFS_ERROR_CALLBACK, /* a custom policy's chooser failed */
  DVFS_ERROR_INTERNAL  /* the plan model disagrees with the engine */
} DvfsError;

G_END_DECLS

#endif

/* lua/pipeline.c -- computation-level pipelines and the pipeline policies
 * from Lua:
 *
 *   js.pipeline{ profile, microbatches, schedule, stages, dp,
 *                activation_bytes, grad_bytes }          -> workload
 *   js.perseus_frontier{ cluster, workload, resolution, exact }
 *                                                        -> frontier
 *   js.pipeline_run{ cluster, workload, policy, slowdown, straggler_aware,
 *                    lag, eta, step_w, stragglers, iterations, seed,
 *                    switch_latency_ms }                 -> result
 *
 * A frontier is a list of { time_s, energy_j } from fastest to slowest
 * (energy of one whole pipeline: its simulated GPUs x tp), with fields
 * exact, steps, allmax = { time_s, energy_j }, and a method
 * fr:plan(i) -> { [stage] = { forward = { mhz per microbatch },
 * backward = { ... } } } (stages and microbatches 1-based).
 *
 * pipeline_run runs max, Perseus, EnvPipe and Zeus (js.simulate runs the
 * same through js.policy.perseus/envpipe/zeus), reading their arguments by
 * the classes' tables (models/dvfs/policy_perseus.c, policy_zeus.c): it
 * plans, applies stragglers, runs the
 * engine and returns a result table (time_s, energy_j, iteration_time_s,
 * energy_per_iteration_j, iterations, ... plus the plan's figures).
 *
 * The `stragglers` argument is read by lua/stragglers.c, as js.simulate's.
 *
 * Every argument is checked before any C object is made (a Lua error is a
 * longjmp); C objects that must outlive a possible error live in userdata.
 */
#include "lua/luautil.h"

#include <lauxlib.h>
#include <math.h>
#include <string.h>

#include "models/dvfs/perseus.h"
#include "traces/pipeline.h"
#include "traces/profile.h"
#include "traces/sched.h"

#define FRONTIER_MT "joulesim.PerseusFrontier"

/* ---- helpers ------------------------------------------------------------ */

/* The profile path of argument `profile` of the table at idx: a string, or
 * any value with a string field `path` (a profile from js.profile.load).
 * Borrowed from the Lua stack (left on it). */
static const char *profile_path(lua_State *L, int idx, const char *fn)
{
  int t = lua_getfield(L, idx, "profile");
  if (t == LUA_TSTRING)
    return lua_tostring(L, -1);
  if (t == LUA_TTABLE || t == LUA_TUSERDATA) {
    if (lua_getfield(L, -1, "path") == LUA_TSTRING)
      return lua_tostring(L, -1);
    lua_pop(L, 1);
  }
  luaL_error(L, "%s: argument 'profile' must be a profile CSV path or a "
                "profile from js.profile.load (got %s)", fn,
             luaL_typename(L, -1));
  return NULL;
}

/* ---- js.pipeline ----------------------------------------------------------- */

static const char *const pipeline_keys[] = {
  "profile", "microbatches", "schedule", "stages", "dp", "activation_bytes",
  "grad_bytes", NULL};
static const char *const schedules[] = {"1f1b", "gpipe", NULL};

static int l_pipeline(lua_State *L)
{
  const char *fn = "js.pipeline";
  jsl_check_keys(L, 1, fn, pipeline_keys);
  const char *path = profile_path(L, 1, fn);
  PipelineConfig cfg;
  pipeline_config_init(&cfg);
  cfg.microbatches = (guint)jsl_opt_int(L, 1, fn, "microbatches", 0, 1,
                                        PIPELINE_MAX_MICROBATCHES);
  if (cfg.microbatches == 0)
    luaL_error(L, "%s: argument 'microbatches' is required (an integer in "
                  "1..%d)", fn, (int)PIPELINE_MAX_MICROBATCHES);
  cfg.schedule = (PipelineSchedule)jsl_opt_choice(L, 1, fn, "schedule", 0,
                                                  schedules);
  cfg.stages = (guint)jsl_opt_int(L, 1, fn, "stages", 0, 0, 256);
  cfg.dp = (guint)jsl_opt_int(L, 1, fn, "dp", 1, 1, PIPELINE_MAX_RANKS);
  cfg.activation_bytes = jsl_opt_num(L, 1, fn, "activation_bytes", 0, 0,
                                     1e15);
  cfg.grad_bytes = jsl_opt_num(L, 1, fn, "grad_bytes", 0, 0, 1e15);

  jsl_check_read(L, fn, path);
  GError *err = NULL;
  LWorkload *u = jsl_new_workload(L);
  Profile *prof = profile_load(path, &err);
  if (prof == NULL)
    return jsl_raise_gerror(L, fn, err);
  u->w = pipeline_from_profile(prof, &cfg, &err);
  profile_free(prof);
  if (u->w == NULL)
    return jsl_raise_gerror(L, fn, err);
  char *base = g_path_get_basename(path);
  char *dot = strrchr(base, '.');
  if (dot != NULL)
    *dot = '\0';
  u->label = g_strdup_printf("pipeline %s S%u M%u dp%u %s", base, u->w->pp,
                             cfg.microbatches, cfg.dp,
                             pipeline_schedule_name(cfg.schedule));
  g_free(base);
  return 1;
}

/* ---- frontiers --------------------------------------------------------------- */

typedef struct {
  PerseusFrontier *f;
  guint S, M, tp;
  guint n_clocks;
  guint16 *clocks;
} LFrontier;

static int frontier_gc(lua_State *L)
{
  LFrontier *u = luaL_checkudata(L, 1, FRONTIER_MT);
  perseus_frontier_free(u->f);
  g_free(u->clocks);
  u->f = NULL;
  u->clocks = NULL;
  return 0;
}

/* fr:plan(i): the clocks of point i, by stage, pass and microbatch. */
static int frontier_plan(lua_State *L)
{
  const char *fn = "frontier:plan";
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_getfield(L, 1, "_frontier");
  LFrontier *u = luaL_testudata(L, -1, FRONTIER_MT);
  if (u == NULL || u->f == NULL)
    return luaL_error(L, "%s: call it on a frontier from js.perseus_frontier "
                         "(fr:plan(i))", fn);
  lua_Integer i = luaL_checkinteger(L, 2);
  if (i < 1 || i > (lua_Integer)u->f->n_points)
    return luaL_error(L, "%s: point %I is out of range 1..%d", fn, i,
                      (int)u->f->n_points);
  const guint16 *ch = u->f->points[i - 1].choice;
  lua_createtable(L, (int)u->S, 0);
  for (guint s = 0; s < u->S; s++) {
    lua_createtable(L, 0, 2);
    for (guint b = 0; b < 2; b++) {
      lua_createtable(L, (int)u->M, 0);
      for (guint m = 0; m < u->M; m++) {
        guint16 k = ch[pipeline_node_id(u->M, s, m, b)];
        lua_pushinteger(L, k < u->n_clocks ? u->clocks[k] : 0);
        lua_rawseti(L, -2, m + 1);
      }
      lua_setfield(L, -2, b ? "backward" : "forward");
    }
    lua_rawseti(L, -2, s + 1);
  }
  return 1;
}

/* Pushes the frontier table (takes ownership of f): see lua/luautil.h. */
void jsl_push_frontier(lua_State *L, PerseusFrontier *f, guint S, guint M,
                       guint tp, const guint16 *clocks, guint n_clocks,
                       gint64 allmax_time_ns, double allmax_energy_j)
{
  LFrontier *u = lua_newuserdatauv(L, sizeof *u, 0);
  memset(u, 0, sizeof *u);
  u->f = f;
  luaL_setmetatable(L, FRONTIER_MT);
  u->S = S;
  u->M = M;
  u->tp = tp;
  u->n_clocks = n_clocks;
  u->clocks = g_memdup2(clocks, sizeof(guint16) * n_clocks);
  int ud = lua_gettop(L);

  lua_createtable(L, (int)f->n_points, 6);
  for (guint j = 0; j < f->n_points; j++) {
    lua_createtable(L, 0, 2);
    jsl_set_num(L, "time_s", (double)f->points[j].time_ns * 1e-9);
    jsl_set_num(L, "energy_j", f->points[j].energy_j * u->tp);
    lua_rawseti(L, -2, j + 1);
  }
  lua_pushboolean(L, f->exact);
  lua_setfield(L, -2, "exact");
  jsl_set_int(L, "steps", (lua_Integer)f->steps);
  jsl_set_int(L, "computations", (lua_Integer)f->n_nodes);
  lua_createtable(L, 0, 2);
  jsl_set_num(L, "time_s", (double)allmax_time_ns * 1e-9);
  jsl_set_num(L, "energy_j", allmax_energy_j * u->tp);
  lua_setfield(L, -2, "allmax");
  lua_pushvalue(L, ud);
  lua_setfield(L, -2, "_frontier");
  lua_pushcfunction(L, frontier_plan);
  lua_setfield(L, -2, "plan");
  lua_remove(L, ud);
}

/* The frontier of model pm (takes ownership of f). */
static void push_frontier(lua_State *L, PerseusFrontier *f,
                          const PerseusModel *pm)
{
  const PipelineGroups *g = perseus_model_groups(pm);
  guint n_clocks = 0;
  const guint16 *clk = perseus_model_clocks(pm, &n_clocks);
  guint16 *mx = perseus_dag_max_choice(perseus_model_dag(pm));
  gint64 t;
  double e;
  perseus_dag_eval(perseus_model_dag(pm), mx, NULL, &t, &e);
  g_free(mx);
  jsl_push_frontier(L, f, g->n_stages, g->n_microbatches,
                    perseus_model_tp(pm), clk, n_clocks, t, e);
}

static const char *const frontier_keys[] = {"cluster", "workload",
                                            "resolution", "exact", NULL};

/* A model (and a machine for it) in a userdata, freed by __gc, so that a
 * later Lua error cannot leak it. */
typedef struct {
  ClusterMachine *m;
  PerseusModel *pm;
} LModel;

static int model_gc(lua_State *L)
{
  LModel *u = lua_touserdata(L, 1);
  perseus_model_free(u->pm);
  cluster_machine_free(u->m);
  u->pm = NULL;
  u->m = NULL;
  return 0;
}

static int l_perseus_frontier(lua_State *L)
{
  const char *fn = "js.perseus_frontier";
  JsSession *s = jsl_session(L);
  jsl_check_keys(L, 1, fn, frontier_keys);
  lua_getfield(L, 1, "cluster");
  Cluster *c = jsl_check_cluster(L, -1, fn);
  lua_getfield(L, 1, "workload");
  LWorkload *lw = jsl_check_workload(L, -1, fn);
  /* The resolution is perseus's argument, read by its class's table. */
  DvfsPolicy p;
  dvfs_policy_init(&p, DVFS_PERSEUS);
  const DvfsPolicyClass *perseus = dvfs_policy_class(DVFS_PERSEUS);
  jsl_policy_arg(L, 1, fn, dvfs_class_arg(perseus, "resolution"), &p);
  PerseusOptions o;
  perseus_options_init(&o);
  o.resolution = p.resolution;
  o.exact = jsl_opt_bool(L, 1, fn, "exact", o.exact);

  LModel *u = lua_newuserdatauv(L, sizeof *u, 0);
  memset(u, 0, sizeof *u);
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, model_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  GError *err = NULL;
  /* The frontier takes no seed: a cluster's variability draws from 0. */
  u->m = cluster_machine_new(c, lw->w, s->catalogue, 0, &err);
  if (u->m == NULL)
    return jsl_raise_gerror(L, fn, err);
  u->pm = perseus_model_new(lw->w, cluster_machine_sim(u->m), c->gpu,
                            cluster_machine_table(u->m), &err);
  if (u->pm == NULL)
    return jsl_raise_gerror(L, fn, err);
  PerseusFrontier *f = perseus_frontier_with(perseus_model_dag(u->pm), &o,
                                             &err);
  if (f == NULL)
    return jsl_raise_gerror(L, fn, err);
  push_frontier(L, f, u->pm);
  return 1;
}

/* ---- js.pipeline_run -------------------------------------------------------------- */

static const char *const run_keys[] = {
  "cluster", "workload", "policy", "slowdown", "straggler_aware", "lag",
  "eta", "step_w", "stragglers", "iterations", "seed", "switch_latency_ms",
  "resolution", NULL};
static const char *const run_policies[] = {"max", "perseus", "envpipe",
                                           "zeus", NULL};
static const DvfsKind run_kinds[] = {DVFS_MAX, DVFS_PERSEUS, DVFS_ENVPIPE,
                                     DVFS_ZEUS};

/* The policy of js.pipeline_run's table: its kind, and the arguments of
 * the perseus and zeus classes read by their tables, whichever kind runs
 * (an argument of another kind is read and left unused).  perseus_run
 * checks the result by the run kind's table. */
static void read_run_policy(lua_State *L, const char *fn, DvfsPolicy *p)
{
  static const struct {
    DvfsKind owner;
    const char *name;
  } rest[] = {{DVFS_PERSEUS, "straggler_aware"}, {DVFS_PERSEUS, "lag"},
              {DVFS_ZEUS, "eta"}, {DVFS_ZEUS, "step_w"},
              {DVFS_PERSEUS, "resolution"}};
  dvfs_policy_init(p, run_kinds[jsl_opt_choice(L, 1, fn, "policy", 0,
                                               run_policies)]);
  const DvfsPolicyClass *perseus = dvfs_policy_class(DVFS_PERSEUS);
  jsl_policy_arg(L, 1, fn, dvfs_class_arg(perseus, "slowdown"), p);
  jsl_warn_slowdown(L, fn, p->slowdown);
  for (gsize i = 0; i < G_N_ELEMENTS(rest); i++) {
    const DvfsPolicyClass *kl = dvfs_policy_class(rest[i].owner);
    jsl_policy_arg(L, 1, fn, dvfs_class_arg(kl, rest[i].name), p);
  }
}

typedef struct {
  PerseusRun *r;
  Cluster *c;
} LRun;

static int run_gc(lua_State *L)
{
  LRun *u = lua_touserdata(L, 1);
  perseus_run_free(u->r);
  cluster_free(u->c);
  u->r = NULL;
  u->c = NULL;
  return 0;
}

static int l_pipeline_run(lua_State *L)
{
  const char *fn = "js.pipeline_run";
  JsSession *s = jsl_session(L);
  jsl_check_keys(L, 1, fn, run_keys);
  lua_getfield(L, 1, "cluster");
  Cluster *c = jsl_check_cluster(L, -1, fn);
  lua_getfield(L, 1, "workload");
  LWorkload *lw = jsl_check_workload(L, -1, fn);
  DvfsPolicy pol;
  read_run_policy(L, fn, &pol);
  guint iterations = (guint)jsl_opt_int(L, 1, fn, "iterations", 1, 1, 100000);
  guint64 seed = jsl_opt_seed(L, 1, fn, "seed");
  double lat = jsl_opt_num(L, 1, fn, "switch_latency_ms", -1, 0, 1e6);
  StragglerSet *set = jsl_stragglers_from_lua(L, 1, fn, lw->w, iterations,
                                              seed);

  LRun *u = lua_newuserdatauv(L, sizeof *u, 0);
  memset(u, 0, sizeof *u);
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, run_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  GError *err = NULL;
  /* The run's own copy of the cluster: its latency override. */
  u->c = cluster_copy(c, &err);
  if (u->c == NULL)
    return jsl_raise_gerror(L, fn, err);
  if (lat >= 0)
    u->c->switch_latency_ms = lat;
  if (lw->w->n_ranks != u->c->n_gpus)
    luaL_error(L, "%s: the workload has %d ranks but the cluster has %d GPUs",
               fn, (int)lw->w->n_ranks, (int)u->c->n_gpus);
  DvfsContext x = {u->c, lw->w, s->catalogue, set, iterations, NULL, NULL,
                   seed};
  u->r = perseus_run(&pol, &x, &err);
  if (u->r == NULL)
    return jsl_raise_gerror(L, fn, err);

  const PerseusRun *r = u->r;
  const SimResult *res = r->result;
  double t = (double)res->time_ns * 1e-9;
  lua_createtable(L, 0, 29);
  g_autofree char *label = NULL;
  if (pol.kind == DVFS_PERSEUS)
    label = g_strdup_printf("perseus(s=%g%s)", pol.slowdown,
                            pol.straggler_aware ? ",straggler-aware" : "");
  else if (pol.kind == DVFS_ZEUS)
    label = g_strdup_printf("zeus(eta=%g,%gW)", pol.eta, r->limit_w);
  else
    label = g_strdup(dvfs_kind_name(pol.kind));
  lua_pushstring(L, label);
  lua_setfield(L, -2, "policy");
  lua_pushstring(L, u->c->gpu->name);
  lua_setfield(L, -2, "gpu");
  jsl_set_int(L, "n_gpus", res->n_gpus);
  jsl_set_num(L, "time_s", t);
  jsl_set_num(L, "energy_j", res->energy_j);
  jsl_push_node_energy(L, res, u->c);
  jsl_set_num(L, "avg_power_w", t > 0 ? res->energy_j / t / res->n_gpus : 0);
  jsl_set_num(L, "waste_j", res->waste_j);
  jsl_set_num(L, "blocked_j", res->blocked.energy_j);
  jsl_set_num(L, "idle_j", res->idle.energy_j);
  jsl_set_int(L, "switches", (lua_Integer)res->switches);
  jsl_set_num(L, "iteration_time_s", t / res->n_iterations);
  jsl_set_num(L, "energy_per_iteration_j", res->energy_j / res->n_iterations);
  lua_createtable(L, (int)res->n_iterations, 0);
  for (guint i = 0; i < res->n_iterations; i++) {
    lua_createtable(L, 0, 2);
    jsl_set_num(L, "time_s", (double)res->iterations[i].time_ns * 1e-9);
    jsl_set_num(L, "energy_j", res->iterations[i].energy_j);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "iterations");
  /* The plan on the DAG model, one whole pipeline (x tp). */
  jsl_set_num(L, "allmax_time_s", (double)r->allmax_time_ns * 1e-9);
  jsl_set_num(L, "allmax_energy_j", r->allmax_energy_j * r->tp);
  jsl_set_num(L, "plan_time_s", (double)r->plan_time_ns * 1e-9);
  jsl_set_num(L, "plan_energy_j", r->plan_energy_j * r->tp);
  if (pol.kind == DVFS_ZEUS) {
    jsl_set_num(L, "limit_w", r->limit_w);
    jsl_set_int(L, "limits_tried", r->n_tried);
  }
  if (r->frontier != NULL) {
    const PerseusFrontier *f = r->frontier;
    jsl_set_int(L, "point", r->point + 1);
    lua_createtable(L, (int)f->n_points, 0);
    for (guint j = 0; j < f->n_points; j++) {
      lua_createtable(L, 0, 2);
      jsl_set_num(L, "time_s", (double)f->points[j].time_ns * 1e-9);
      jsl_set_num(L, "energy_j", f->points[j].energy_j * r->tp);
      lua_rawseti(L, -2, j + 1);
    }
    lua_setfield(L, -2, "frontier");
  }
  return 1;
}

/* ---- js.perseus.load_schedule ---------------------------------------------------------- */

/* js.perseus.load_schedule(path) -> { [stage] = { forward = { MHz per
 * microbatch }, backward = { ... } } }: a Perseus/Merak N.sched.json
 * (traces/sched.h) as the plan js.policy.plan replays; the format of
 * fr:plan(i). */
static int l_load_schedule(lua_State *L)
{
  const char *fn = "js.perseus.load_schedule";
  const char *path = luaL_checkstring(L, 1);
  jsl_check_read(L, fn, path);
  GError *err = NULL;
  SchedPlan *sp = sched_plan_load(path, &err);
  if (sp == NULL)
    return jsl_raise_gerror(L, fn, err);
  /* Copy into Lua first, free, then push: a Lua error cannot leak it. */
  guint S = sp->n_stages, M = sp->n_microbatches;
  guint16 *mhz = lua_newuserdatauv(L, sizeof(guint16) * 2 * (gsize)S * M, 0);
  memcpy(mhz, sp->mhz, sizeof(guint16) * 2 * (gsize)S * M);
  sched_plan_free(sp);
  lua_createtable(L, (int)S, 0);
  for (guint s = 0; s < S; s++) {
    lua_createtable(L, 0, 2);
    for (guint b = 0; b < 2; b++) {
      lua_createtable(L, (int)M, 0);
      for (guint m = 0; m < M; m++) {
        lua_pushinteger(L, mhz[pipeline_node_id(M, s, m, b)]);
        lua_rawseti(L, -2, m + 1);
      }
      lua_setfield(L, -2, b ? "backward" : "forward");
    }
    lua_rawseti(L, -2, s + 1);
  }
  return 1;
}

/* ---- registration ------------------------------------------------------------------ */

void jsl_register_pipeline(lua_State *L)
{
  luaL_newmetatable(L, FRONTIER_MT);
  lua_pushcfunction(L, frontier_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  static const luaL_Reg funcs[] = {
    {"pipeline", l_pipeline},
    {"perseus_frontier", l_perseus_frontier},
    {"pipeline_run", l_pipeline_run},
    {NULL, NULL}};
  luaL_setfuncs(L, funcs, 0);
  static const luaL_Reg perseus_funcs[] = {
    {"load_schedule", l_load_schedule},
    {NULL, NULL}};
  luaL_newlib(L, perseus_funcs);
  lua_setfield(L, -2, "perseus");
}

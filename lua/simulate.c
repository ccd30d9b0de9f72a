/* lua/simulate.c -- js.simulate: one run of a workload on a cluster under
 * a policy, and the result table it returns (lua/bind.c's conventions).
 *
 * Arguments are checked completely first (one parser per sub-table:
 * uncertainty, timeline, variability, each translated into run/'s
 * options), then the run goes through js_simulate_report and the interval
 * through js_simulate_intervals (run/session.h); what it leaves behind is
 * owned by a
 * userdata until the result table is built, so a Lua error while building
 * it cannot leak.  The result table's fields are documented in
 * docs/lua-api.md ("js.simulate"). */
#include "lua/luautil.h"
#include "traces/timeline.h"

#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <string.h>

/* ---- results tables ----------------------------------------------------------- */

static void push_te(lua_State *L, const SimTE *te)
{
  lua_createtable(L, 0, 2);
  jsl_set_num(L, "time_s", te->time_ns * 1e-9);
  jsl_set_num(L, "energy_j", te->energy_j);
}

/* Converts a SimResult into the documented plain table. */
static void push_result(lua_State *L, const SimResult *r, const Cluster *c,
                        const SimWorkload *w, const DvfsPolicy *p,
                        const GArray *steps)
{
  double t = (double)r->time_ns * 1e-9;
  lua_createtable(L, 0, 29);
  g_autofree char *label = dvfs_policy_label(p, c->gpu);
  lua_pushstring(L, label);
  lua_setfield(L, -2, "policy");
  lua_pushstring(L, c->gpu->name);
  lua_setfield(L, -2, "gpu");
  jsl_set_int(L, "n_gpus", r->n_gpus);
  jsl_set_num(L, "time_s", t);
  jsl_set_num(L, "energy_j", r->energy_j);
  jsl_push_node_energy(L, r, c);
  jsl_set_num(L, "avg_power_w", t > 0 ? r->energy_j / t / r->n_gpus : 0);
  jsl_set_num(L, "cluster_power_w", t > 0 ? r->energy_j / t : 0);
  jsl_set_num(L, "peak_power_w", r->peak_power_w);
  jsl_set_num(L, "held_j", r->held_j);
  jsl_set_num(L, "waste_j", r->waste_j);
  jsl_set_num(L, "blocked_j", r->blocked.energy_j);
  jsl_set_num(L, "idle_j", r->idle.energy_j);
  jsl_set_int(L, "switches", (lua_Integer)r->switches);
  jsl_set_int(L, "ops", (lua_Integer)r->ops);
  jsl_set_int(L, "ops_represented", (lua_Integer)r->ops_represented);
  jsl_set_num(L, "flops", r->flops);
  jsl_set_num(L, "tflops_per_gpu",
          t > 0 ? r->flops / t / r->n_gpus * 1e-12 : 0);
  /* MFU against the datasheet dense BF16 peak (989 TFLOP/s on an H100,
   * not the 1071 its top SM clock would give): the figure papers quote. */
  jsl_set_num(L, "mfu", t > 0 ? r->flops / t / r->n_gpus /
                                  gpu_mfu_peak_flops(c->gpu, NULL)
                              : 0);
  jsl_set_num(L, "tokens_per_s",
          t > 0 ? w->tokens_per_iteration * r->n_iterations / t : 0);
  jsl_set_num(L, "iteration_time_s", t / r->n_iterations);
  jsl_set_num(L, "energy_per_iteration_j", r->energy_j / r->n_iterations);
  if (steps != NULL && steps->len > 0) {
    /* A workload of every profiled step: one row per step (run/session.h,
     * JsStepRow), numbered by iteration and ProfilerStep. */
    lua_createtable(L, (int)steps->len, 0);
    for (guint i = 0; i < steps->len; i++) {
      const JsStepRow *row = &g_array_index(steps, JsStepRow, i);
      lua_createtable(L, 0, 4);
      jsl_set_num(L, "time_s", (double)row->time_ns * 1e-9);
      jsl_set_num(L, "energy_j", row->energy_j);
      jsl_set_int(L, "iteration", (lua_Integer)row->iteration + 1);
      jsl_set_int(L, "step", (lua_Integer)row->step);
      lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
  } else {
    lua_createtable(L, (int)r->n_iterations, 0);
    for (guint i = 0; i < r->n_iterations; i++) {
      lua_createtable(L, 0, 2);
      jsl_set_num(L, "time_s", (double)r->iterations[i].time_ns * 1e-9);
      jsl_set_num(L, "energy_j", r->iterations[i].energy_j);
      lua_rawseti(L, -2, i + 1);
    }
  }
  lua_setfield(L, -2, "iterations");
  lua_createtable(L, 0, SIM_CLASS_COUNT);
  for (int k = 0; k < SIM_CLASS_COUNT; k++) {
    push_te(L, &r->by_class[k]);
    lua_setfield(L, -2, sim_class_name((SimOpClass)k));
  }
  lua_setfield(L, -2, "by_class");
  lua_createtable(L, 0, SIM_PHASE_COUNT);
  for (int k = 0; k < SIM_PHASE_COUNT; k++) {
    push_te(L, &r->by_phase[k]);
    lua_setfield(L, -2, sim_phase_name((SimPhase)k));
  }
  push_te(L, &r->blocked);
  lua_setfield(L, -2, "blocked");
  push_te(L, &r->idle);
  lua_setfield(L, -2, "idle");
  lua_setfield(L, -2, "by_phase");
  lua_createtable(L, (int)r->n_gpus, 0);
  for (guint g = 0; g < r->n_gpus; g++) {
    const SimGpuResult *pg = &r->per_gpu[g];
    lua_createtable(L, 0, 10);
    jsl_set_num(L, "energy_j", pg->energy_j);
    jsl_set_num(L, "avg_power_w", t > 0 ? pg->energy_j / t : 0);
    jsl_set_num(L, "peak_power_w", pg->peak_power_w);
    jsl_set_num(L, "kernel_s", pg->kernel_ns * 1e-9);
    jsl_set_num(L, "comm_s", pg->comm_ns * 1e-9);
    jsl_set_num(L, "blocked_s", pg->blocked_ns * 1e-9);
    jsl_set_num(L, "idle_s", pg->idle_ns * 1e-9);
    jsl_set_num(L, "blocked_j", pg->blocked_j);
    jsl_set_num(L, "idle_j", pg->idle_j);
    jsl_set_num(L, "tflops", t > 0 ? pg->flops / t * 1e-12 : 0);
    jsl_set_int(L, "switches", (lua_Integer)pg->switches);
    lua_rawseti(L, -2, g + 1);
  }
  lua_setfield(L, -2, "per_gpu");
}

/* r.trust = { level = "validated" | "calibrated" | "estimated",
 * reasons = { ... } } (run/trust.h), on the result table on top of the
 * stack. */
static void push_trust(lua_State *L, const JsTrust *t)
{
  lua_createtable(L, 0, 2);
  lua_pushstring(L, js_trust_level_name(t->level));
  lua_setfield(L, -2, "level");
  guint n = t->reasons != NULL ? t->reasons->len : 0;
  lua_createtable(L, (int)n, 0);
  for (guint i = 0; i < n; i++) {
    lua_pushstring(L, g_ptr_array_index(t->reasons, i));
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "reasons");
  lua_setfield(L, -2, "trust");
}

/* ---- js.simulate ----------------------------------------------------------- */

static const char *const simulate_keys[] = {
  "cluster", "workload", "policy", "iterations", "seed", "stragglers",
  "variability", "switch_latency_ms", "timeline", "uncertainty", "threads",
  "check_memory", NULL};
static const char *const uncertainty_keys[] = {
  "profile", "samples", "level", "fit", "seed", "power_limit_w", NULL};
static const char *const fit_modes[] = {"none", "time", "power", "all", NULL};

/* What a run leaves behind, owned by a userdata (freed by __gc) so that a
 * Lua error while the result table is built cannot leak it. */
typedef struct {
  SimResult *r;
  JsRunReport rep;
} LSimBox;

static int simbox_gc(lua_State *L)
{
  LSimBox *u = lua_touserdata(L, 1);
  g_clear_pointer(&u->r, sim_result_free);
  js_run_report_clear(&u->rep);
  return 0;
}

static void push_interval(lua_State *L, const char *k, const FitInterval *iv,
                          double level)
{
  lua_createtable(L, 0, 7);
  jsl_set_num(L, "estimate", iv->estimate);
  jsl_set_num(L, "lo", iv->lo);
  jsl_set_num(L, "hi", iv->hi);
  jsl_set_num(L, "mean", iv->mean);
  jsl_set_num(L, "sd", iv->sd);
  jsl_set_num(L, "level", level);
  jsl_set_int(L, "samples", iv->samples);
  lua_setfield(L, -2, k);
}

/* The pipeline policies' figures (on the DAG model, one whole pipeline)
 * and frontier, on the result table on top of the stack. */
static void push_pipeline(lua_State *L, JsRunReport *rep)
{
  PerseusRun *pr = rep->pipeline;
  if (pr == NULL)
    return;
  jsl_set_num(L, "allmax_time_s", (double)pr->allmax_time_ns * 1e-9);
  jsl_set_num(L, "allmax_energy_j", pr->allmax_energy_j * pr->tp);
  jsl_set_num(L, "plan_time_s", (double)pr->plan_time_ns * 1e-9);
  jsl_set_num(L, "plan_energy_j", pr->plan_energy_j * pr->tp);
  /* 0: the policy's own plan ran; 1-3: its switching-latency fallback
   * (PerseusRun.latency_fallback). */
  jsl_set_int(L, "latency_fallback", pr->latency_fallback);
  if (rep->pipeline_kind == DVFS_PLAN)
    jsl_set_int(L, "plan_snapped", pr->plan_snapped);
  if (pr->n_tried > 0) {
    jsl_set_num(L, "limit_w", pr->limit_w);
    jsl_set_int(L, "limits_tried", pr->n_tried);
  }
  if (pr->frontier != NULL) {
    jsl_set_int(L, "point", pr->point + 1);
    jsl_push_frontier(L, g_steal_pointer(&pr->frontier), rep->n_stages,
                      rep->n_microbatches, pr->tp, pr->clocks, pr->n_clocks,
                      pr->allmax_time_ns, pr->allmax_energy_j);
    lua_setfield(L, -2, "frontier");
  }
}

/* js.simulate{uncertainty = { profile =, samples = 200, level = 0.9,
 * fit = "all", seed =, power_limit_w = }}: an interval from bootstrap
 * resamples of a profile (run/session.h, js_simulate_intervals).
 * u->profile NULL when not given; the profile stays on the stack. */
static void parse_uncertainty(lua_State *L, const char *fn,
                              JsUncertaintySpec *u)
{
  js_uncertainty_spec_init(u, NULL);
  if (lua_getfield(L, 1, "uncertainty") == LUA_TNIL)
    return;
  const char *ufn = "js.simulate{uncertainty}";
  int ui = lua_gettop(L);
  if (!lua_istable(L, ui))
    luaL_error(L, "%s: argument 'uncertainty' must be a table {profile, "
                  "samples, level, fit, seed, power_limit_w} (got %s)", fn,
               luaL_typename(L, ui));
  jsl_check_keys(L, ui, ufn, uncertainty_keys);
  u->samples = (guint)jsl_opt_int(L, ui, ufn, "samples", u->samples, 2,
                                  100000);
  u->level = jsl_opt_num(L, ui, ufn, "level", u->level, 1e-6, 1 - 1e-6);
  u->mode = (FitMode)jsl_opt_choice(L, ui, ufn, "fit", u->mode, fit_modes);
  if (u->mode == FIT_NONE)
    luaL_error(L, "%s: argument 'fit' must fit something (time, power or "
                  "all) for an interval", ufn);
  u->seed_given = lua_getfield(L, ui, "seed") != LUA_TNIL;
  lua_pop(L, 1);
  u->seed = (guint64)jsl_opt_int(L, ui, ufn, "seed", 0, 0, G_MAXINT64);
  u->power_limit_w = jsl_opt_num(L, ui, ufn, "power_limit_w", 0, 0, 1e5);
  u->profile = jsl_check_profile(L, ui, ufn); /* stays on the stack */
}

/* js.simulate{timeline = "out.json" | true ("timeline.json") |
 * { path = "out.json", gpus = "0,4-7", window = "0.1:0.2" } |
 * { out = "file.h5", run = "name", replace = false, gpus =, window = }}:
 * Chrome JSON at `path`, or power and clock per GPU at /timelines/<run>
 * of the results file `out` (run/session.h, JsTimelineSpec).  t->path
 * NULL when not given; *window the window's text, parsed by the caller.
 * The value stays on the stack: the strings are borrowed from it. */
static void parse_timeline(lua_State *L, const char *fn, JsTimelineSpec *t,
                           const char **window)
{
  js_timeline_spec_init(t);
  *window = NULL;
  int tl_type = lua_getfield(L, 1, "timeline");
  if (tl_type == LUA_TSTRING) {
    t->path = lua_tostring(L, -1);
  } else if (tl_type == LUA_TBOOLEAN) {
    t->path = lua_toboolean(L, -1) ? "timeline.json" : NULL;
  } else if (tl_type == LUA_TTABLE) {
    static const char *const tkeys[] = {"path", "out", "run", "replace",
                                        "gpus", "window", NULL};
    const char *tfn = "js.simulate{timeline}";
    int ti = lua_gettop(L);
    jsl_check_keys(L, ti, tfn, tkeys);
    const char *out = jsl_opt_str(L, ti, tfn, "out", NULL);
    t->name = jsl_opt_str(L, ti, tfn, "run", NULL);
    t->replace = jsl_opt_bool(L, ti, tfn, "replace", FALSE);
    if (out != NULL && lua_getfield(L, ti, "path") != LUA_TNIL)
      luaL_error(L, "%s: give 'path' (Chrome JSON) or 'out' (HDF5), not "
                    "both", tfn);
    if ((out != NULL) != (t->name != NULL))
      luaL_error(L, "%s: 'out' (an HDF5 results file) and 'run' (the "
                    "timeline's name under /timelines) go together", tfn);
    if (out == NULL && t->replace)
      luaL_error(L, "%s: 'replace' is for an HDF5 timeline ('out', 'run')",
                 tfn);
    t->path = out != NULL ? out
                          : jsl_opt_str(L, ti, tfn, "path", "timeline.json");
    t->gpus = jsl_opt_str(L, ti, tfn, "gpus", NULL);
    *window = jsl_opt_str(L, ti, tfn, "window", NULL);
  } else if (tl_type != LUA_TNIL) {
    luaL_error(L, "%s: argument 'timeline' must be a file name, true, or a "
                  "table {path | out, run, gpus, window} (got %s)", fn,
               luaL_typename(L, -1));
  }
}

/* js.simulate{variability = {perf, power}}: overrides the cluster's for
 * this run only (JsRunOptions.variability). */
static void parse_variability(lua_State *L, JsRunOptions *opt)
{
  if (lua_getfield(L, 1, "variability") != LUA_TNIL) {
    static const char *const vkeys[] = {"perf", "power", NULL};
    const char *vfn = "js.simulate{variability}";
    jsl_check_keys(L, lua_gettop(L), vfn, vkeys);
    opt->variability = TRUE;
    opt->perf_spread = jsl_opt_num(L, -1, vfn, "perf", 0, 0, 0.5);
    opt->power_spread = jsl_opt_num(L, -1, vfn, "power", 0, 0, 0.5);
  }
  lua_pop(L, 1);
}

/* The run's outputs, collected with a userdata left on the stack. */
static LSimBox *push_simbox(lua_State *L)
{
  LSimBox *box = lua_newuserdatauv(L, sizeof *box, 0);
  memset(box, 0, sizeof *box);
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, simbox_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  return box;
}

/* Holds a js.gpt workload's GPU memory estimate against the cluster's
 * GPU (when its memory is known): the session keeps the largest estimate
 * and whether one did not fit (the sweep's memory_gb and fits columns);
 * a layout that does not fit is refused unless `check` is false. */
static void check_gpu_memory(lua_State *L, const char *fn, JsSession *s,
                             const Cluster *c, const LWorkload *lw,
                             gboolean check)
{
  const GptMemory *m = lw->gpu_memory;
  if (m == NULL)
    return;
  double peak = gpt_memory_stage(m, gpt_memory_peak_stage(m))->total_bytes;
  s->gpu_memory_gb = MAX(s->gpu_memory_gb, peak / 1e9);
  double cap = c->gpu->memory_gb.v * 1e9;
  GError *err = NULL;
  if (cap <= 0 || gpt_memory_check(m, cap, c->gpu->name, &err))
    return;
  s->gpu_memory_unfit = TRUE;
  if (check)
    jsl_raise_gerror(L, fn, err);
  g_error_free(err);
}

static int l_simulate(lua_State *L)
{
  const char *fn = "js.simulate";
  JsSession *s = jsl_session(L);
  jsl_check_keys(L, 1, fn, simulate_keys);
  lua_getfield(L, 1, "cluster");
  Cluster *c = jsl_check_cluster(L, -1, fn);
  lua_getfield(L, 1, "workload");
  LWorkload *lw = jsl_check_workload(L, -1, fn);
  /* js.gpt's reference GPU left at its default on another cluster GPU:
   * the ops are rescaled from the A100 by the roofline model, which moves
   * H100 results by 2-3% against pricing them on the H100. */
  if (lw->ref_defaulted && lw->w->ref_gpu != NULL &&
      strcmp(lw->w->ref_gpu, c->gpu->name) != 0)
    jsl_warn(L, "%s: the workload was priced on %s, js.gpt's default "
                "reference GPU, and the cluster has %s: its ops are "
                "rescaled between them; give js.gpt{ gpu = \"%s\" } to "
                "price them on the cluster's GPU", fn, lw->w->ref_gpu,
             c->gpu->name, c->gpu->name);
  /* Hybrid sharding's node groups are the generator's nodes: on nodes of
   * another size its intra-node collectives would cross nodes. */
  const char *gpn = lw->w->provenance != NULL
                        ? g_hash_table_lookup(lw->w->provenance,
                                              "gpus_per_node")
                        : NULL;
  if (gpn != NULL && g_ascii_strtoull(gpn, NULL, 10) != c->gpus_per_node)
    luaL_error(L, "%s: the workload shards within nodes of %s GPUs "
                  "(js.gpt's zero_group = \"node\") and the cluster's "
                  "nodes have %d: give js.gpt{ gpus_per_node = %d }", fn,
               gpn, (int)c->gpus_per_node, (int)c->gpus_per_node);
  lua_getfield(L, 1, "policy");
  DvfsPolicy pol;
  jsl_policy_from_lua(L, lua_gettop(L), fn, &pol);
  JsRunOptions opt = {0};
  opt.iterations = (guint)jsl_opt_int(L, 1, fn, "iterations", 1, 1, 100000);
  opt.seed = jsl_opt_seed(L, 1, fn, "seed");
  opt.switch_latency_ms = jsl_opt_num(L, 1, fn, "switch_latency_ms", -1, 0, 1e6);
  opt.threads = (guint)jsl_opt_int(L, 1, fn, "threads", s->threads, 1,
                                   SIM_MAX_THREADS);
  /* The set lives in a userdata left on the stack for the whole call. */
  opt.stragglers = jsl_stragglers_from_lua(L, 1, fn, lw->w, opt.iterations,
                                           opt.seed);
  JsUncertaintySpec u;
  parse_uncertainty(L, fn, &u);
  JsTimelineSpec t;
  const char *window;
  parse_timeline(L, fn, &t, &window);
  if (t.path != NULL)
    jsl_check_write(L, fn, t.path,
                    t.name != NULL ? JS_FILE_RESULTS : JS_FILE_TIMELINE);
  GError *err = NULL;
  if (window != NULL &&
      !trace_timeline_parse_window(window, &t.t0_ns, &t.t1_ns, &err))
    return jsl_raise_gerror(L, fn, err);
  if (t.path != NULL) {
    t.meta = (ResMeta){JOULESIM_VERSION, s->scenario_path,
                       s->scenario_source, s->seed, s->run_id,
                       s->run_started};
    t.label = lw->label;
    opt.timeline = &t;
  }
  parse_variability(L, &opt);
  check_gpu_memory(L, fn, s, c, lw,
                   jsl_opt_bool(L, 1, fn, "check_memory", TRUE));
  LSimBox *box = push_simbox(L);
  box->r = js_simulate_report(s, c, lw->w, &pol, &opt, &box->rep, &err);
  if (box->r == NULL)
    return jsl_raise_gerror(L, fn, err);
  /* Uncertainty: the same run on GPUs refitted to bootstrap resamples. */
  FitInterval iv[2];
  if (u.profile != NULL &&
      !js_simulate_intervals(s, c, lw->w, &pol, &opt, &u, iv, &err))
    return jsl_raise_gerror(L, "js.simulate{uncertainty}", err);
  push_result(L, box->r, c, lw->w, &pol, box->rep.steps);
  push_trust(L, &box->rep.trust);
  if (t.path != NULL) {
    lua_pushstring(L, t.path);
    lua_setfield(L, -2, "timeline");
  }
  jsl_push_plan(L, box->rep.plan);
  push_pipeline(L, &box->rep);
  if (u.profile != NULL) {
    /* estimate: the run on the GPU refitted to every point of the
     * profile (r.energy_j and r.time_s are on the cluster's GPU). */
    push_interval(L, "energy_interval", &iv[0], u.level);
    push_interval(L, "time_interval", &iv[1], u.level);
  }
  return 1;
}

void jsl_register_simulate(lua_State *L)
{
  lua_pushcfunction(L, l_simulate);
  lua_setfield(L, -2, "simulate");
}

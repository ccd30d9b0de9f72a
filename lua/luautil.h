/* lua/luautil.h -- helpers shared by the files of the Lua binding.
 *
 * Every checker raises a Lua error (it does not return) on bad input, with a
 * message "FN: argument 'KEY' must be ... (got ...)" located at the calling
 * script line.  Strings returned are borrowed from the Lua stack/table.
 */
#ifndef LUA_LUAUTIL_H
#define LUA_LUAUTIL_H

#include <glib.h>
#include <lua.h>
#include "run/session.h"
#include "io/results.h"
#include "models/fit.h"
#include "traces/profile.h"
#include "traces/gpt_memory.h"

G_BEGIN_DECLS

#define CLUSTER_MT "joulesim.Cluster"
#define WORKLOAD_MT "joulesim.Workload"
#define RESULTS_MT "joulesim.Results"
#define RNG_MT "joulesim.Rng"

typedef struct {
  Cluster *c;
} LCluster;
typedef struct {
  SimWorkload *w;
  char *label;
  gboolean ref_defaulted; /* js.gpt priced it on its default reference
                             GPU (no 'gpu' given): js.simulate warns when
                             the cluster has another */
  GptMemory *gpu_memory; /* owned: js.gpt's GPU memory estimate; NULL for
                            other workloads */
  double params, model_flops; /* js.gpt: gpt_n_params and
                            gpt_megatron_flops of its config; 0 otherwise */
} LWorkload;
typedef struct {
  ResTable *t; /* owned; NULL once closed */
} LResults;


/* The session of this Lua state (its extra space, set by jsl_state_new). */
JsSession *jsl_session(lua_State *L);
/* Raises "FN: message" at the caller's line and frees err.  Never returns. */
int jsl_raise_gerror(lua_State *L, const char *fn, GError *err);
/* A warning on the diagnostics, once per distinct message, naming the
 * script line (lua/sandbox.c). */
G_GNUC_PRINTF(2, 3)
void jsl_warn(lua_State *L, const char *fmt, ...);
/* Warns when a policy's slowdown (a fraction) is >= 1. */
void jsl_warn_slowdown(lua_State *L, const char *fn, double slowdown);
/* The closest of a NULL-terminated list to s (edit distance <= 3) or NULL. */
const char *jsl_closest(const char *s, const char *const *names);
/* The same for a short value: within a third of its length (at least 1). */
const char *jsl_closest_value(const char *s, const char *const *names);
/* The table at idx may only have string keys from `allowed`. */
void jsl_check_keys(lua_State *L, int idx, const char *fn,
                    const char *const *allowed);
lua_Integer jsl_opt_int(lua_State *L, int idx, const char *fn,
                        const char *key, lua_Integer def, lua_Integer lo,
                        lua_Integer hi);
/* t[key], a seed in 0..2^63-1, else the session's (js_session_seed). */
guint64 jsl_opt_seed(lua_State *L, int idx, const char *fn, const char *key);
double jsl_opt_num(lua_State *L, int idx, const char *fn, const char *key,
                   double def, double lo, double hi);
const char *jsl_opt_str(lua_State *L, int idx, const char *fn,
                        const char *key, const char *def);
gboolean jsl_opt_bool(lua_State *L, int idx, const char *fn, const char *key,
                      gboolean def);
/* Index of the value in `names`, def when absent; error lists names. */
int jsl_opt_choice(lua_State *L, int idx, const char *fn, const char *key,
                   int def, const char *const *names);
/* Userdata accessors (raise on a wrong type). */
Cluster *jsl_check_cluster(lua_State *L, int idx, const char *fn);
LWorkload *jsl_check_workload(lua_State *L, int idx, const char *fn);
/* Reads the number, integer, boolean or string at the top of the stack
 * into v (a results-table cell named `name`; strings borrowed from the
 * stack).  FALSE, v untouched but for name, for any other type. */
gboolean jsl_value_from_top(lua_State *L, const char *name, ResValue *v);
/* Pushes an empty workload userdata (every field NULL or 0) for the
 * caller to fill: it owns what is stored in it (w, label, gpu_memory;
 * freed by __gc) and jsl_check_workload refuses it until w is set.  Make
 * it before the objects it will own, so that no Lua error, a memory
 * error included, can come between an allocation and its owner. */
LWorkload *jsl_new_workload(lua_State *L);
/* Pushes an owner for one C object and returns its slot, NULL: what the
 * caller stores there is freed by free_fn when the owner is collected
 * (or left NULL: nothing is).  Push it before allocating the object, as
 * jsl_new_workload, so that a Lua error while the object is converted to
 * Lua values, a memory error included, cannot leak it. */
gpointer *jsl_push_owner(lua_State *L, GDestroyNotify free_fn);
/* The owners' metatable (lua/luautil.c), made with the module so that
 * jsl_protect_metatables covers it. */
void jsl_register_owner(lua_State *L);

/* t[k] = v on the table at the top of the stack. */
static inline void jsl_set_num(lua_State *L, const char *k, double v)
{
  lua_pushnumber(L, v);
  lua_setfield(L, -2, k);
}
static inline void jsl_set_int(lua_State *L, const char *k, lua_Integer v)
{
  lua_pushinteger(L, v);
  lua_setfield(L, -2, k);
}
/* r.node, r.pue, r.gpu_energy_j, r.node_energy_j, r.facility_energy_j of
 * run r on cluster c (models/node.h), on the table on top of the stack. */
void jsl_push_node_energy(lua_State *L, const SimResult *r, const Cluster *c);

/* lua/sandbox.c: a new Lua state for session s, its allocator capped by
 * s->max_memory (else the memory available now), s in its extra space;
 * NULL when out of memory. */
lua_State *jsl_state_new(JsSession *s);
/* lua/sandbox.c: the sandbox's globals in place of luaL_openlibs. */
void jsl_open_sandbox(lua_State *L);
/* lua/sandbox.c: the global print, writing through the session's print
 * hook (run/session.h); after the libraries are open. */
void jsl_open_print(lua_State *L);
/* lua/sandbox.c: xpcall, coroutine.close and coroutine.wrap guarded
 * against Lua 5.4.4's nested-close crash and against script code running
 * with hooks off after a limit is hit; after the libraries are open,
 * sandboxed or not. */
void jsl_open_guards(lua_State *L);
/* lua/sandbox.c: __metatable on every "joulesim.*" metatable. */
void jsl_protect_metatables(lua_State *L);
/* lua/sandbox.c: raise "FN: sandbox: ..." unless the session may read
 * (write, over an existing file of `kind` only) `path`; no-ops outside the
 * sandbox.  Raise: call them before any C allocation is live. */
void jsl_check_read(lua_State *L, const char *fn, const char *path);
void jsl_check_write(lua_State *L, const char *fn, const char *path,
                     JsFileKind kind);
/* lua/sandbox.c: start (stop) --max-seconds and --max-instructions for a
 * run of L: the count hook and the hard-stop alarm. */
void jsl_limits_begin(lua_State *L, JsSession *s);
void jsl_limits_end(lua_State *L, JsSession *s);
/* lua/sandbox.c: the error message of a run that a limit stopped, when
 * `message` alone would not say so (the script caught the limit's error,
 * or the heap cap refused memory); NULL otherwise.  Caller frees. */
char *jsl_limits_explain(JsSession *s, const char *message);

/* lua/bind.c: sets the script's generator (math.random's) to stream
 * `seed`, as math.randomseed(seed) would, without calling the script's
 * math.randomseed; a no-op when the state has no math library. */
void jsl_reseed_script(lua_State *L, guint64 seed);

/* Registration hooks, one per feature file: each adds its functions to the
 * module table on top of the stack (called by require "joulesim" before the
 * prelude runs). */
void jsl_register_simulate(lua_State *L); /* lua/simulate.c: js.simulate */
void jsl_register_policy(lua_State *L);   /* lua/policy.c */
void jsl_register_gpu(lua_State *L);      /* lua/gpu.c: js.gpu table, js.gpu.define */
void jsl_register_trace(lua_State *L);    /* lua/trace.c: js.trace */
void jsl_register_profile(lua_State *L);  /* lua/validate.c: js.profile, js.validate */
void jsl_register_pipeline(lua_State *L); /* lua/pipeline.c: js.pipeline */
void jsl_register_sweep(lua_State *L);    /* lua/sweep.c: js.sweep */
void jsl_register_csv(lua_State *L);      /* lua/csv.c: js.csv */
void jsl_register_numeric(lua_State *L);  /* lua/numeric.c: js.nelder_mead */

/* Reads the policy table at idx (NULL/nil = max) into *p; raises on error. */
void jsl_policy_from_lua(lua_State *L, int idx, const char *fn, DvfsPolicy *p);
/* Reads argument a of a policy class (its type, default and range: the
 * class's table) from the table at idx into p; raises on a bad value. */
void jsl_policy_arg(lua_State *L, int idx, const char *fn, const DvfsArg *a,
                    DvfsPolicy *p);

/* lua/stragglers.c: the straggler set of argument `stragglers` of the table
 * at idx (a list of {gpu|pipeline, slowdown, from_iteration,
 * to_iteration}, or one random model {rate, slowdown = {lo, hi},
 * duration = {lo, hi}}) for workload w run `iterations` iterations with
 * `seed`; NULL when absent.  Always pushes one userdata owning the set:
 * the set is valid while it stays on the stack.  Raises on a bad
 * argument. */
StragglerSet *jsl_stragglers_from_lua(lua_State *L, int idx, const char *fn,
                                      const SimWorkload *w, guint iterations,
                                      guint64 seed);
/* lua/pipeline.c: pushes a frontier table (list of {time_s, energy_j},
 * fastest first, energies x tp; fields exact, steps, computations,
 * allmax = {time_s, energy_j}; method fr:plan(i)) for frontier f (ownership
 * taken) of an S-stage, M-microbatch pipeline whose option k runs
 * clocks[k] (copied). */
void jsl_push_frontier(lua_State *L, PerseusFrontier *f, guint S, guint M,
                       guint tp, const guint16 *clocks, guint n_clocks,
                       gint64 allmax_time_ns, double allmax_energy_j);

/* lua/policy.c: sets r.plan (the planner's figures) and r.plan_summary
 * (per-kernel rows) on the result table on top of the stack; pr may be
 * NULL (nothing is set). */
void jsl_push_plan(lua_State *L, const DvfsPlanResult *pr);

/* lua/validate.c: the profile argument 'profile' of the table at idx: a
 * path (loaded, and pushed as a profile userdata so it is collected) or a
 * profile from js.profile.load.  Leaves one value on the stack; raises
 * when absent or invalid. */
Profile *jsl_check_profile(lua_State *L, int idx, const char *fn);

G_END_DECLS

#endif

/* lua/policy.c -- DVFS policies from Lua.
 *
 * js.policy.NAME{...} constructors (max, auto, fixed, powercap, iteration,
 * pass, kernel, custom, and the pipeline policies perseus, envpipe, zeus
 * for pipelined workloads: models/dvfs/perseus.h) check every argument and
 * return a plain table {name = NAME, ...} that js.simulate reads back with
 * jsl_policy_from_lua (so hand-written tables are checked the same way).
 * Parsing is generic over the policy's class (models/dvfs/policy.h): its
 * `keys` and typed `args`; what a class takes besides (a function, a plan
 * table) is in its flags (DVFS_CLASS_TAKES_*), and the rules across
 * arguments are here by kind (`rules`).  A Lua function given as `policy`
 * is a custom policy: the planner calls it once per distinct
 * kernel (or op, or segment) with a table describing the unit and its
 * options, and it returns the clocks.
 *
 * The chooser runs the function under lua_pcall with a traceback, inside
 * the planner (C): a Lua error becomes a GError (DVFS_ERROR_CALLBACK) and
 * never longjmps through the planner's allocations.
 */
#include "lua/luautil.h"

#include <lauxlib.h>
#include <string.h>

/* The policy names js.simulate accepts: the registry's, in kind order, and
 * "auto" (an alias of max) last.  Built once. */
static const char *const *kind_names(void)
{
  static const char **names;
  if (g_once_init_enter(&names)) {
    guint n = dvfs_policy_n_classes();
    const char **v = g_new0(const char *, n + 2);
    for (guint k = 0; k < n; k++)
      v[k] = dvfs_policy_class((DvfsKind)k)->name;
    v[n] = "auto";
    g_once_init_leave(&names, v);
  }
  return names;
}

/* ---- the chooser --------------------------------------------------------- */

typedef struct {
  lua_State *L;
  int fn;           /* absolute stack index of the function */
} LuaChooser;

static int chooser_traceback(lua_State *L)
{
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL)
    msg = lua_pushfstring(L, "(error object is a %s value)",
                          luaL_typename(L, 1));
  luaL_traceback(L, L, msg, 1);
  return 1;
}

static void set_str(lua_State *L, const char *k, const char *v)
{
  lua_pushstring(L, v);
  lua_setfield(L, -2, k);
}

/* Protected: (function, lightuserdata unit) -> the function's 2 results. */
static int call_chooser(lua_State *L)
{
  const DvfsUnitInfo *u = lua_touserdata(L, 2);
  lua_pushvalue(L, 1);
  lua_createtable(L, 0, 12);
  set_str(L, "name", u->name);
  set_str(L, "kind", u->kind);
  set_str(L, "class", sim_class_name(u->klass));
  set_str(L, "phase", sim_phase_name(u->phase));
  jsl_set_int(L, "count", (lua_Integer)u->count);
  jsl_set_num(L, "slack_s", u->slack_s);
  jsl_set_num(L, "critical_frac", u->critical_frac);
  jsl_set_num(L, "time_s", u->n_options > 0 ? u->options[0].time_s : 0);
  jsl_set_num(L, "energy_j", u->n_options > 0 ? u->options[0].energy_j : 0);
  lua_createtable(L, (int)u->n_options, 0);
  for (guint i = 0; i < u->n_options; i++) {
    lua_createtable(L, 0, 4);
    jsl_set_int(L, "sm", u->options[i].clocks.sm_mhz);
    jsl_set_int(L, "mem", u->options[i].clocks.mem_mhz);
    jsl_set_num(L, "time_s", u->options[i].time_s);
    jsl_set_num(L, "energy_j", u->options[i].energy_j);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "options");
  lua_call(L, 1, 2);
  return 2;
}

/* Reads a clock from the value at idx: nil -> 0; else an integer in
 * 0..65535.  FALSE when it is something else. */
static gboolean clock_value(lua_State *L, int idx, guint *out)
{
  if (lua_isnil(L, idx)) {
    *out = 0;
    return TRUE;
  }
  int isint = 0;
  lua_Integer v = lua_tointegerx(L, idx, &isint);
  if (!isint || v < 0 || v > 65535 || lua_type(L, idx) != LUA_TNUMBER)
    return FALSE;
  *out = (guint)v;
  return TRUE;
}

static gboolean lua_choose(gpointer data, const DvfsUnitInfo *u,
                           SimClocks *out, GError **error)
{
  LuaChooser *ch = data;
  lua_State *L = ch->L;
  int top = lua_gettop(L);
  if (!lua_checkstack(L, 8)) {
    g_set_error(error, DVFS_ERROR, DVFS_ERROR_CALLBACK,
                "policy function: Lua stack overflow");
    return FALSE;
  }
  lua_pushcfunction(L, chooser_traceback);
  int h = lua_gettop(L);
  lua_pushcfunction(L, call_chooser);
  lua_pushvalue(L, ch->fn);
  lua_pushlightuserdata(L, (void *)u);
  if (lua_pcall(L, 2, 2, h) != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    g_set_error(error, DVFS_ERROR, DVFS_ERROR_CALLBACK,
                "policy function failed for '%s': %s", u->name,
                msg != NULL ? msg : "error");
    lua_settop(L, top);
    return FALSE;
  }
  guint sm = 0, mem = 0;
  gboolean ok;
  if (lua_istable(L, -2)) {
    lua_getfield(L, -2, "sm");
    lua_getfield(L, -3, "mem");
    ok = clock_value(L, -2, &sm) && clock_value(L, -1, &mem);
  } else {
    ok = clock_value(L, -2, &sm) && clock_value(L, -1, &mem);
  }
  if (!ok) {
    g_set_error(error, DVFS_ERROR, DVFS_ERROR_CALLBACK,
                "policy function returned %s for '%s': return nil (auto), "
                "SM and memory clocks in MHz (integers), or a table "
                "{sm =, mem =}", luaL_typename(L, top + 2), u->name);
    lua_settop(L, top);
    return FALSE;
  }
  out->sm_mhz = (guint16)sm;
  out->mem_mhz = (guint16)mem;
  lua_settop(L, top);
  return TRUE;
}

/* ---- plans ------------------------------------------------------------------- */

/* The clocks of list plan[s].<pass> at index idx: integers in 1..65535,
 * written to out[(s * M + m) * 2 + b].  Raises naming the entry. */
static void read_pass(lua_State *L, int idx, const char *fn, guint s,
                      const char *pass, guint M, guint16 *out)
{
  int b = strcmp(pass, "backward") == 0;
  for (guint m = 0; m < M; m++) {
    lua_rawgeti(L, idx, (lua_Integer)m + 1);
    int isint = 0;
    lua_Integer v = lua_tointegerx(L, -1, &isint);
    if (!isint || lua_type(L, -1) != LUA_TNUMBER || v < 1 || v > 65535)
      luaL_error(L, "%s: plan[%d].%s[%d] must be an SM clock in MHz (an "
                    "integer in 1..65535), got %s", fn, (int)s + 1, pass,
                 (int)m + 1, luaL_tolstring(L, -1, NULL));
    out[((gsize)s * M + m) * 2 + (gsize)b] = (guint16)v;
    lua_pop(L, 1);
  }
}

/* Pushes the plan of argument `plan` of the table at idx: a table
 * { [stage] = { forward = { MHz per microbatch }, backward = { ... } } }
 * (what fr:plan(i) and js.perseus.load_schedule return) or the path of a
 * Perseus N.sched.json.  Fills p's plan fields; the clocks live in a
 * userdata left on the stack.  Raises on a plan of the wrong shape. */
static void read_plan(lua_State *L, int idx, const char *fn, DvfsPolicy *p)
{
  int t = lua_getfield(L, idx, "plan");
  if (t == LUA_TSTRING) {
    /* A file: js.perseus.load_schedule(path) turns it into the table. */
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "loaded");
    lua_getfield(L, -1, "joulesim");
    if (lua_getfield(L, -1, "perseus") != LUA_TTABLE ||
        lua_getfield(L, -1, "load_schedule") != LUA_TFUNCTION)
      luaL_error(L, "%s: js.perseus.load_schedule is not available", fn);
    lua_pushvalue(L, -6);
    lua_call(L, 1, 1);
    lua_replace(L, -6);
    lua_pop(L, 4);
    t = LUA_TTABLE;
  }
  if (t != LUA_TTABLE)
    luaL_error(L, "%s: argument 'plan' must be a plan { [stage] = { forward "
                  "= { MHz per microbatch }, backward = { ... } } } or the "
                  "path of a sched.json (got %s)", fn, luaL_typename(L, -1));
  int plan = lua_gettop(L);
  lua_Integer S = (lua_Integer)lua_rawlen(L, plan);
  if (S < 1 || S > 4096)
    luaL_error(L, "%s: argument 'plan' must list 1..4096 stages (plan[1], "
                  "plan[2], ...; got %d)", fn, (int)S);
  guint M = 0;
  for (lua_Integer s = 1; s <= S; s++) {
    if (lua_rawgeti(L, plan, s) != LUA_TTABLE)
      luaL_error(L, "%s: plan[%d] must be a table { forward = {...}, "
                    "backward = {...} } (got %s)", fn, (int)s,
                 luaL_typename(L, -1));
    for (int b = 0; b < 2; b++) {
      const char *pass = b ? "backward" : "forward";
      if (lua_getfield(L, -1, pass) != LUA_TTABLE)
        luaL_error(L, "%s: plan[%d].%s must be a list of clocks, one per "
                      "microbatch (got %s)", fn, (int)s, pass,
                   luaL_typename(L, -1));
      lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
      if (M == 0 && n >= 1 && n <= 65535)
        M = (guint)n;
      if (n != (lua_Integer)M)
        luaL_error(L, "%s: plan[%d].%s has %d clocks, plan[1].forward %d: "
                      "every stage needs one clock per microbatch for each "
                      "pass", fn, (int)s, pass, (int)n, (int)M);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  if (M == 0)
    luaL_error(L, "%s: plan[1].forward must hold 1..65535 clocks", fn);
  guint16 *mhz = lua_newuserdatauv(L, sizeof(guint16) * 2 * (gsize)S * M, 0);
  for (lua_Integer s = 1; s <= S; s++) {
    lua_rawgeti(L, plan, s);
    for (int b = 0; b < 2; b++) {
      const char *pass = b ? "backward" : "forward";
      lua_getfield(L, -1, pass);
      read_pass(L, lua_gettop(L), fn, (guint)s - 1, pass, M, mhz);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  lua_remove(L, plan);
  p->plan_mhz = mhz;
  p->plan_stages = (guint)S;
  p->plan_microbatches = M;
}

/* ---- parsing --------------------------------------------------------------- */

/* Reads argument a into p from the table at idx: see lua/luautil.h. */
void jsl_policy_arg(lua_State *L, int idx, const char *fn, const DvfsArg *a,
                    DvfsPolicy *p)
{
  double v = 0;
  switch (a->type) {
  case DVFS_ARG_NUM:
    v = jsl_opt_num(L, idx, fn, a->name, a->def, a->lo, a->hi);
    break;
  case DVFS_ARG_UINT:
    v = (double)jsl_opt_int(L, idx, fn, a->name, (lua_Integer)a->def,
                            (lua_Integer)a->lo, (lua_Integer)a->hi);
    break;
  case DVFS_ARG_BOOL:
    v = jsl_opt_bool(L, idx, fn, a->name, a->def != 0);
    break;
  case DVFS_ARG_CHOICE:
    v = jsl_opt_choice(L, idx, fn, a->name, (int)a->def, a->choices);
    break;
  }
  dvfs_arg_set(a, p, v);
}

/* Reads the class's typed arguments from the table at idx, in order. */
static void parse_args(lua_State *L, int idx, const char *fn, const DvfsArg *a,
                       DvfsPolicy *p)
{
  for (; a->name != NULL; a++)
    jsl_policy_arg(L, idx, fn, a, p);
}

/* Rules across a class's arguments that its table cannot say, by kind.
 * parse: after the arguments, for js.policy.NAME{...} and
 * js.simulate{policy = {...}} alike; construct: the constructor's own rule
 * (after parse).  Each raises on bad input.  What a class takes besides
 * its typed arguments (a function, a plan) is its flags
 * (DVFS_CLASS_TAKES_FN, DVFS_CLASS_TAKES_PLAN). */
typedef struct {
  void (*parse)(lua_State *L, int idx, const char *fn, DvfsPolicy *p);
  void (*construct)(lua_State *L, const char *fn, const DvfsPolicy *p);
} ArgRules;

#define POWERCAP_EITHER                                                     \
  "%s: give either 'watts' (a power limit) or 'slowdown' (search the "     \
  "lowest-energy limit within that slowdown)"

static void powercap_parse(lua_State *L, int idx, const char *fn,
                           DvfsPolicy *p)
{
  if ((p->watts > 0) == (p->slowdown >= 0))
    luaL_error(L, POWERCAP_EITHER, fn);
  p->slowdown = MAX(p->slowdown, 0.0);
}

static void powercap_construct(lua_State *L, const char *fn,
                               const DvfsPolicy *p)
{
  if (lua_isnoneornil(L, 1))
    luaL_error(L, POWERCAP_EITHER, fn);
}

static void fixed_construct(lua_State *L, const char *fn, const DvfsPolicy *p)
{
  if (p->sm_mhz == 0 && p->mem_mhz == 0)
    luaL_error(L, "%s: give 'sm' and/or 'mem' (MHz)", fn);
}

static void perseus_parse(lua_State *L, int idx, const char *fn,
                          DvfsPolicy *p)
{
  if (p->straggler_aware && p->kernel_within)
    luaL_error(L, "%s: 'kernel' = true cannot be combined with "
                  "'straggler_aware' = true", fn);
}

static const ArgRules rules[DVFS_KIND_COUNT] = {
  [DVFS_FIXED] = {NULL, fixed_construct},
  [DVFS_POWERCAP] = {powercap_parse, powercap_construct},
  [DVFS_PERSEUS] = {perseus_parse, NULL},
};

/* Kind k's rules (none for a class registered past the built-in kinds). */
static const ArgRules *rules_of(DvfsKind k)
{
  static const ArgRules none;
  return (guint)k < DVFS_KIND_COUNT ? &rules[k] : &none;
}

/* A class that takes a function or a plan needs it from its constructor. */
static void check_taken(lua_State *L, const char *fn,
                        const DvfsPolicyClass *kl)
{
  if (kl->flags & DVFS_CLASS_TAKES_FN) {
    if (!lua_istable(L, 1) || lua_getfield(L, 1, "fn") != LUA_TFUNCTION)
      luaL_error(L, "%s: argument 'fn' must be a function", fn);
    lua_pop(L, 1);
  }
  if ((kl->flags & DVFS_CLASS_TAKES_PLAN) && lua_isnoneornil(L, 1))
    luaL_error(L, "%s: give 'plan' (a plan from fr:plan(i) or "
                  "js.perseus.load_schedule, or a sched.json path)", fn);
}

/* Parses the arguments of kind k from the table at idx (or defaults when
 * nil) into *p.  Raises on a bad key or value. */
static void parse_fields(lua_State *L, int idx, DvfsKind k, const char *fn,
                         DvfsPolicy *p)
{
  const DvfsPolicyClass *kl = dvfs_policy_class(k);
  dvfs_policy_init(p, k);
  if (lua_isnoneornil(L, idx))
    return;
  jsl_check_keys(L, idx, fn, kl->keys);
  parse_args(L, idx, fn, kl->args, p);
  jsl_warn_slowdown(L, fn, p->slowdown);
  if (kl->flags & DVFS_CLASS_TAKES_PLAN)
    read_plan(L, idx, fn, p);
  if (rules_of(k)->parse != NULL)
    rules_of(k)->parse(L, idx, fn, p);
}

/* Installs a chooser calling the function at absolute index fn_idx; the
 * chooser's state is a userdata left on the stack (collected with it). */
static void attach_chooser(lua_State *L, int fn_idx, DvfsPolicy *p)
{
  LuaChooser *ch = lua_newuserdatauv(L, sizeof *ch, 0);
  ch->L = L;
  ch->fn = fn_idx;
  p->choose = lua_choose;
  p->choose_data = ch;
}

/* A function-taking policy's `fn`: attached as its chooser. */
static void read_fn(lua_State *L, int idx, const char *fn, DvfsPolicy *p)
{
  lua_getfield(L, idx, "fn");
  if (!lua_isfunction(L, -1))
    luaL_error(L, "%s: argument 'fn' must be a function (got %s)", fn,
               luaL_typename(L, -1));
  attach_chooser(L, lua_gettop(L), p);
}

void jsl_policy_from_lua(lua_State *L, int idx, const char *fn, DvfsPolicy *p)
{
  idx = lua_absindex(L, idx);
  dvfs_policy_init(p, DVFS_MAX);
  if (lua_isnoneornil(L, idx))
    return;
  if (lua_isfunction(L, idx)) {
    dvfs_policy_init(p, DVFS_CUSTOM);
    attach_chooser(L, idx, p);
    return;
  }
  if (!lua_istable(L, idx))
    luaL_error(L, "%s: argument 'policy' must be a policy from js.policy or "
                  "a function (got %s)", fn, luaL_typename(L, idx));
  int k = jsl_opt_choice(L, idx, fn, "name", -1, kind_names());
  if (k < 0)
    luaL_error(L, "%s: argument 'policy' must be a policy from js.policy "
                  "(the table has no 'name')", fn);
  if ((guint)k == dvfs_policy_n_classes()) /* "auto" */
    k = DVFS_MAX;
  const DvfsPolicyClass *kl = dvfs_policy_class((DvfsKind)k);
  /* The function name lives on the Lua stack: an error longjmps. */
  lua_pushfstring(L, "js.policy.%s", kl->name);
  const char *name = lua_tostring(L, -1);
  parse_fields(L, idx, (DvfsKind)k, name, p);
  if (kl->flags & DVFS_CLASS_TAKES_FN)
    read_fn(L, idx, name, p);
}

/* ---- constructors ------------------------------------------------------------ */

/* js.policy.NAME{...} (upvalues: the function's name and the kind):
 * checks argument 1 and returns a new table {name = NAME, <the given
 * fields>}. */
static int construct(lua_State *L)
{
  const char *fn = lua_tostring(L, lua_upvalueindex(1));
  DvfsKind k = (DvfsKind)lua_tointeger(L, lua_upvalueindex(2));
  const DvfsPolicyClass *kl = dvfs_policy_class(k);
  if (!lua_isnoneornil(L, 1) && !lua_istable(L, 1))
    luaL_error(L, "%s: expects a table of named arguments (got %s)", fn,
               luaL_typename(L, 1));
  if (lua_istable(L, 1)) {
    lua_getfield(L, 1, "name");
    if (!lua_isnil(L, -1))
      luaL_error(L, "%s: unknown argument 'name'", fn);
    lua_pop(L, 1);
  }
  DvfsPolicy p;
  parse_fields(L, 1, k, fn, &p);
  check_taken(L, fn, kl);
  if (rules_of(k)->construct != NULL)
    rules_of(k)->construct(L, fn, &p);
  lua_createtable(L, 0, 6);
  lua_pushstring(L, kl->name);
  lua_setfield(L, -2, "name");
  if (lua_istable(L, 1)) {
    lua_pushnil(L);
    while (lua_next(L, 1) != 0) {
      lua_pushvalue(L, -2);
      lua_insert(L, -2);
      lua_settable(L, -4);
    }
  }
  return 1;
}

static void register_constructor(lua_State *L, const char *name, DvfsKind k)
{
  lua_pushfstring(L, "js.policy.%s", name);
  lua_pushinteger(L, (lua_Integer)k);
  lua_pushcclosure(L, construct, 2);
  lua_setfield(L, -2, name);
}

/* js.policy's __index: a name that is no policy is an error naming the
 * closest one, where plain Lua would return nil and the call fail with
 * "attempt to call a nil value (field 'kernal')". */
static int unknown_policy(lua_State *L)
{
  const char *name = lua_tostring(L, 2);
  if (name == NULL)
    return luaL_error(L, "js.policy: policies are named by strings (got a "
                         "%s key)", luaL_typename(L, 2));
  const char *const *names = kind_names();
  const char *near = jsl_closest_value(name, names);
  char *list = g_strjoinv(", ", (char **)names);
  lua_pushstring(L, list); /* no C allocation may outlive the longjmp */
  g_free(list);
  if (near != NULL)
    return luaL_error(L, "js.policy.%s: no such policy (did you mean "
                         "js.policy.%s?); policies: %s", name, near,
                      lua_tostring(L, -1));
  return luaL_error(L, "js.policy.%s: no such policy; policies: %s", name,
                    lua_tostring(L, -1));
}

/* One constructor per registered class, and js.policy.auto (max's). */
void jsl_register_policy(lua_State *L)
{
  guint n = dvfs_policy_n_classes();
  lua_createtable(L, 0, (int)n + 1);
  for (guint k = 0; k < n; k++) {
    register_constructor(L, dvfs_policy_class((DvfsKind)k)->name,
                         (DvfsKind)k);
    if (k == DVFS_MAX)
      register_constructor(L, "auto", DVFS_MAX);
  }
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, unknown_policy);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, -2);
  lua_setfield(L, -2, "policy");
}

/* ---- results ------------------------------------------------------------------- */

void jsl_push_plan(lua_State *L, const DvfsPlanResult *pr)
{
  if (pr == NULL)
    return;
  lua_createtable(L, 0, 16);
  set_str(L, "chosen", pr->chosen);
  jsl_set_num(L, "base_time_s", pr->base_time_s);
  jsl_set_num(L, "base_energy_j", pr->base_energy_j);
  jsl_set_num(L, "time_s", pr->time_s);
  jsl_set_num(L, "energy_j", pr->energy_j);
  jsl_set_num(L, "saving", pr->base_energy_j > 0
                           ? 1 - pr->energy_j / pr->base_energy_j : 0);
  jsl_set_num(L, "slowdown", pr->base_time_s > 0
                             ? pr->time_s / pr->base_time_s - 1 : 0);
  jsl_set_num(L, "latency_ms", pr->latency_ms);
  jsl_set_num(L, "power_limit_w", pr->power_limit_w);
  jsl_set_int(L, "switches", (lua_Integer)pr->switches);
  jsl_set_int(L, "units", pr->n_units);
  jsl_set_int(L, "candidates", pr->n_candidates);
  jsl_set_int(L, "classes", pr->n_classes);
  jsl_set_int(L, "evaluations", pr->evaluations);
  jsl_set_int(L, "simulations", pr->simulations);
  lua_setfield(L, -2, "plan");
  guint n = pr->summary != NULL ? pr->summary->len : 0;
  lua_createtable(L, (int)n, 0);
  for (guint i = 0; i < n; i++) {
    const DvfsSummaryRow *r = &g_array_index(pr->summary, DvfsSummaryRow, i);
    lua_createtable(L, 0, 13);
    set_str(L, "kernel", r->name);
    set_str(L, "class", sim_class_name(r->klass));
    set_str(L, "phase", sim_phase_name(r->phase));
    jsl_set_int(L, "count", (lua_Integer)r->count);
    jsl_set_num(L, "base_time_s", r->base_time_s);
    jsl_set_num(L, "base_energy_j", r->base_energy_j);
    jsl_set_int(L, "sm_mhz", r->sm_mhz);
    jsl_set_int(L, "mem_mhz", r->mem_mhz);
    jsl_set_int(L, "n_pairs", r->n_pairs);
    jsl_set_num(L, "time_s", r->time_s);
    jsl_set_num(L, "energy_j", r->energy_j);
    jsl_set_num(L, "dtime_s", r->time_s - r->base_time_s);
    jsl_set_num(L, "denergy_j", r->energy_j - r->base_energy_j);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "plan_summary");
}

/* lua/validate.c -- measured profiles against the model from Lua:
 * js.profile (load, load_nvml, profile userdata), js.validate,
 * js.validate_interval and js.validate_run.
 *
 * The validation itself, its report and its HDF5 tables are run/validate.h
 * (shared with `joulesim validate`, cli/cmd_validate.c); loading is
 * traces/profile.c and fitting models/fit.c.  This file checks the Lua
 * arguments, converts the results to Lua tables and, for js.validate{
 * save_gpu = }, defines the fitted entry in the session's catalogue.  See
 * docs/validation.md.
 */
#include "lua/luautil.h"
#include "run/validate.h"
#include "models/fit.h"
#include "models/gpufile.h"
#include "traces/profile.h"

#include <lauxlib.h>
#include <math.h>
#include <string.h>

#define PROFILE_MT "joulesim.Profile"
#define FITMODEL_MT "joulesim.FitModel"

/* ---------------------------------------------------------------------- */
/* Lua: profiles                                                           */

typedef struct {
  Profile *p;
} LProfile;

static int profile_gc(lua_State *L)
{
  LProfile *u = luaL_checkudata(L, 1, PROFILE_MT);
  g_clear_pointer(&u->p, profile_free);
  return 0;
}

static Profile *check_profile(lua_State *L, int idx, const char *fn)
{
  LProfile *u = luaL_testudata(L, idx, PROFILE_MT);
  if (u == NULL || u->p == NULL)
    luaL_error(L, "%s: expected a profile from js.profile.load (got %s)", fn,
               luaL_typename(L, idx));
  return u->p;
}

static void push_profile(lua_State *L, Profile *p)
{
  LProfile *u = lua_newuserdatauv(L, sizeof *u, 0);
  u->p = p;
  luaL_setmetatable(L, PROFILE_MT);
}

static void set_str(lua_State *L, const char *k, const char *v)
{
  lua_pushstring(L, v);
  lua_setfield(L, -2, k);
}

static void push_op(lua_State *L, const ProfileOp *op)
{
  lua_createtable(L, 0, 7);
  set_str(L, "name", op->name);
  if (op->instruction != NULL) {
    jsl_set_int(L, "stage", op->stage);
    set_str(L, "instruction", op->instruction);
  }
  set_str(L, "class", sim_class_name(op->klass));
  jsl_set_num(L, "count", op->count);
  lua_createtable(L, (int)op->points->len, 0);
  for (guint j = 0; j < op->points->len; j++) {
    const ProfilePoint *pt = &g_array_index(op->points, ProfilePoint, j);
    lua_createtable(L, 0, 4);
    jsl_set_int(L, "sm_mhz", pt->sm_mhz);
    jsl_set_int(L, "mem_mhz", pt->mem_mhz);
    jsl_set_num(L, "time_s", pt->time_s);
    jsl_set_num(L, "energy_j", pt->energy_j);
    lua_rawseti(L, -2, j + 1);
  }
  lua_setfield(L, -2, "points");
}

/* p:at(op_name, sm_mhz[, mem_mhz]) -> time_s, energy_j (interpolated). */
static int profile_at(lua_State *L)
{
  const char *fn = "profile:at";
  Profile *p = check_profile(L, 1, fn);
  const char *name = luaL_checkstring(L, 2);
  lua_Integer sm = luaL_checkinteger(L, 3);
  lua_Integer mem = luaL_optinteger(L, 4, 0);
  if (sm <= 0 || sm > 100000 || mem < 0 || mem > 100000)
    return luaL_error(L, "%s: clocks must be in 1..100000 MHz", fn);
  const ProfileOp *op = profile_find(p, name);
  if (op == NULL)
    return luaL_error(L, "%s: no op '%s' in %s", fn, name, p->path);
  double t, e;
  GError *err = NULL;
  if (!profile_op_at(op, (guint)sm, (guint)mem, &t, &e, &err))
    return jsl_raise_gerror(L, fn, err);
  lua_pushnumber(L, t);
  lua_pushnumber(L, e);
  return 2;
}

/* p:op(name) -> the op table or nil. */
static int profile_op(lua_State *L)
{
  Profile *p = check_profile(L, 1, "profile:op");
  const ProfileOp *op = profile_find(p, luaL_checkstring(L, 2));
  if (op == NULL)
    lua_pushnil(L);
  else
    push_op(L, op);
  return 1;
}

static int profile_index(lua_State *L)
{
  Profile *p = check_profile(L, 1, "profile");
  const char *k = luaL_checkstring(L, 2);
  if (strcmp(k, "path") == 0) {
    lua_pushstring(L, p->path);
  } else if (strcmp(k, "format") == 0) {
    lua_pushstring(L, js_profile_format_name(p->format));
  } else if (strcmp(k, "stages") == 0) {
    lua_pushinteger(L, p->n_stages);
  } else if (strcmp(k, "ops") == 0) {
    lua_createtable(L, (int)p->ops->len, 0);
    for (guint i = 0; i < p->ops->len; i++) {
      push_op(L, g_ptr_array_index(p->ops, i));
      lua_rawseti(L, -2, i + 1);
    }
  } else if (strcmp(k, "clocks") == 0) {
    /* Distinct SM clocks, ascending. */
    GArray *all = g_array_new(FALSE, FALSE, sizeof(guint));
    for (guint i = 0; i < p->ops->len; i++) {
      const ProfileOp *op = g_ptr_array_index(p->ops, i);
      for (guint j = 0; j < op->points->len; j++)
        g_array_append_val(all,
                           g_array_index(op->points, ProfilePoint, j).sm_mhz);
    }
    guint *v = (guint *)all->data;
    for (guint i = 1; i < all->len; i++) /* insertion sort: small */
      for (guint j = i; j > 0 && v[j - 1] > v[j]; j--) {
        guint t = v[j];
        v[j] = v[j - 1];
        v[j - 1] = t;
      }
    lua_createtable(L, (int)all->len, 0);
    int n = 0;
    for (guint i = 0; i < all->len; i++)
      if (i == 0 || v[i] != v[i - 1]) {
        lua_pushinteger(L, v[i]);
        lua_rawseti(L, -2, ++n);
      }
    g_array_unref(all);
  } else if (strcmp(k, "at") == 0) {
    lua_pushcfunction(L, profile_at);
  } else if (strcmp(k, "op") == 0) {
    lua_pushcfunction(L, profile_op);
  } else {
    lua_pushnil(L);
  }
  return 1;
}

static int profile_tostring(lua_State *L)
{
  Profile *p = check_profile(L, 1, "profile");
  lua_pushfstring(L, "profile %s (%s form, %d ops)", p->path,
                  js_profile_format_name(p->format), (int)p->ops->len);
  return 1;
}

static int l_profile_load(lua_State *L)
{
  const char *path = luaL_checkstring(L, 1);
  jsl_check_read(L, "js.profile.load", path);
  GError *err = NULL;
  Profile *p = profile_load(path, &err);
  if (p == NULL)
    return jsl_raise_gerror(L, "js.profile.load", err);
  push_profile(L, p);
  return 1;
}

static int l_profile_load_nvml(lua_State *L)
{
  const char *samples = luaL_checkstring(L, 1);
  const char *windows = luaL_checkstring(L, 2);
  jsl_check_read(L, "js.profile.load_nvml", samples);
  jsl_check_read(L, "js.profile.load_nvml", windows);
  GError *err = NULL;
  Profile *p = profile_load_nvml(samples, windows, &err);
  if (p == NULL)
    return jsl_raise_gerror(L, "js.profile.load_nvml", err);
  push_profile(L, p);
  return 1;
}

/* The profile argument `key` of the table at idx: a path (loaded; the
 * returned profile is then pushed as a userdata so it is collected) or a
 * profile userdata.  Leaves one value on the stack. */
static Profile *arg_profile(lua_State *L, int idx, const char *fn)
{
  int t = lua_getfield(L, idx, "profile");
  if (t == LUA_TSTRING) {
    const char *path = lua_tostring(L, -1);
    jsl_check_read(L, fn, path);
    GError *err = NULL;
    Profile *p = profile_load(path, &err);
    if (p == NULL)
      return (jsl_raise_gerror(L, fn, err), NULL);
    lua_pop(L, 1);
    push_profile(L, p);
    return p;
  }
  if (t == LUA_TNIL)
    luaL_error(L, "%s: argument 'profile' is required (a path or a profile "
                  "from js.profile.load)",
               fn);
  return check_profile(L, lua_gettop(L), fn);
}

Profile *jsl_check_profile(lua_State *L, int idx, const char *fn)
{
  return arg_profile(L, idx, fn);
}

/* ---------------------------------------------------------------------- */
/* Lua: js.validate                                                        */

static void push_err(lua_State *L, const char *k, const FitErr *e)
{
  lua_createtable(L, 0, 7);
  jsl_set_int(L, "n", e->n);
  jsl_set_num(L, "time_mape", e->time_mape);
  jsl_set_num(L, "time_max", e->time_max);
  jsl_set_num(L, "time_bias", e->time_bias);
  jsl_set_num(L, "energy_mape", e->energy_mape);
  jsl_set_num(L, "energy_max", e->energy_max);
  jsl_set_num(L, "energy_bias", e->energy_bias);
  lua_setfield(L, -2, k);
}

static void push_summary(lua_State *L, const FitSummary *s)
{
  lua_createtable(L, 0, 16);
  set_str(L, "name", s->name);
  push_err(L, "oob", &s->oob);
  push_err(L, "fit", &s->fit);
  push_err(L, "oob_all", &s->oob_all);
  jsl_set_int(L, "min_sm_meas", s->min_sm_meas);
  jsl_set_int(L, "min_mem_meas", s->min_mem_meas);
  jsl_set_int(L, "min_sm_oob", s->min_sm_oob);
  jsl_set_int(L, "min_sm_fit", s->min_sm_fit);
  jsl_set_num(L, "saving_meas", s->saving_meas);
  jsl_set_num(L, "saving_oob", s->saving_oob);
  jsl_set_num(L, "saving_fit", s->saving_fit);
  jsl_set_num(L, "regret_oob", s->regret_oob);
  jsl_set_num(L, "regret_fit", s->regret_fit);
}

static void push_model(lua_State *L, const FitModel *m, const Profile *p)
{
  lua_createtable(L, 0, 10);
  set_str(L, "fit", fit_mode_name(m->mode));
  jsl_set_num(L, "p_const_w", m->p_const_w);
  jsl_set_num(L, "p_leak_w", m->p_leak_w);
  jsl_set_num(L, "v_ratio", m->v_ratio);
  jsl_set_num(L, "f_knee_mhz", m->f_knee_mhz);
  jsl_set_num(L, "dyn_scale", m->dyn_scale);
  jsl_set_num(L, "rms_time", m->rms_rel_time);
  jsl_set_num(L, "rms_energy", m->rms_rel_energy);
  lua_createtable(L, (int)m->n_ops, 0);
  for (guint i = 0; i < m->n_ops; i++) {
    const FitOpModel *om = &m->ops[i];
    lua_createtable(L, 0, 8);
    set_str(L, "name",
            ((const ProfileOp *)g_ptr_array_index(p->ops, i))->name);
    jsl_set_num(L, "t0_s", om->t0_s);
    jsl_set_num(L, "a_c", om->a_c);
    jsl_set_num(L, "a_m", om->a_m);
    jsl_set_num(L, "a_o", om->a_o);
    jsl_set_num(L, "sat_mhz", om->sat_mhz);
    jsl_set_num(L, "dyn_j", om->dyn_j);
    jsl_set_num(L, "mem_j", om->mem_j);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "ops");
}

static const char *const validate_keys[] = {
  "profile", "gpu", "holdout", "folds", "fit", "seed", "power_limit_w",
  "out", "save_gpu", "save_gpu_file", "points", NULL};

/* js.validate{ profile =, gpu =, holdout =, folds =, fit =, seed =,
 *              power_limit_w =, out =, save_gpu =, save_gpu_file = } */
static int l_validate(lua_State *L)
{
  const char *fn = "js.validate";
  JsSession *s = jsl_session(L);
  luaL_checktype(L, 1, LUA_TTABLE);
  jsl_check_keys(L, 1, fn, validate_keys);
  JsValidateCfg cfg = {0};
  cfg.gpu = jsl_opt_str(L, 1, fn, "gpu", NULL);
  if (cfg.gpu == NULL)
    return luaL_error(L, "%s: argument 'gpu' is required (a catalogue name)",
                      fn);
  cfg.holdout = jsl_opt_num(L, 1, fn, "holdout", 0.25, 1e-9, 1 - 1e-9);
  cfg.folds = (guint)jsl_opt_int(L, 1, fn, "folds", 0, 0, 1000);
  if (cfg.folds == 1)
    return luaL_error(L, "%s: argument 'folds' must be 0 (holdout) or >= 2",
                      fn);
  cfg.mode = (FitMode)jsl_opt_choice(L, 1, fn, "fit", FIT_ALL,
                                     (const char *const[]){"none", "time",
                                                           "power", "all",
                                                           NULL});
  cfg.seed = jsl_opt_seed(L, 1, fn, "seed");
  cfg.power_limit_w = jsl_opt_num(L, 1, fn, "power_limit_w", 0, 0, 1e5);
  cfg.out = jsl_opt_str(L, 1, fn, "out", NULL);
  cfg.save_gpu = jsl_opt_str(L, 1, fn, "save_gpu", NULL);
  const char *save_file = jsl_opt_str(L, 1, fn, "save_gpu_file", NULL);
  gboolean points = jsl_opt_bool(L, 1, fn, "points", FALSE);
  if (save_file != NULL && cfg.save_gpu == NULL)
    return luaL_error(L, "%s: argument 'save_gpu_file' needs 'save_gpu' (the "
                         "entry's name)",
                      fn);
  if (cfg.out != NULL)
    jsl_check_write(L, fn, cfg.out, JS_FILE_RESULTS);
  if (save_file != NULL)
    jsl_check_write(L, fn, save_file, JS_FILE_GPU);
  Profile *p = arg_profile(L, 1, fn);  /* anchored on the stack */

  /* The report's owner first: building the result may raise (memory)
   * and must not leak it. */
  gpointer *owner = jsl_push_owner(L, (GDestroyNotify)fit_report_free);
  GError *err = NULL;
  const GpuSpec *g = NULL;
  FitReport *r = *owner = js_validate_run(s->catalogue, p, &cfg, &g, &err);
  if (r == NULL)
    return jsl_raise_gerror(L, fn, err);
  gboolean ok = TRUE;
  if (cfg.out != NULL)
    ok = js_validate_write(p, g, &cfg, r, &err);
  if (ok && cfg.save_gpu != NULL) {
    GpuSpec *spec = js_validate_fitted_spec(r, p, cfg.save_gpu, &err);
    ok = spec != NULL && gpu_catalogue_define(s->catalogue, spec, &err) &&
         (save_file == NULL || gpu_spec_save_keyfile(spec, save_file, &err));
    gpu_spec_free(spec);
    g = NULL; /* the catalogue may have moved; not used below */
  }
  if (!ok)
    return jsl_raise_gerror(L, fn, err);
  const GpuSpec *gg = gpu_catalogue_lookup(s->catalogue, cfg.gpu, NULL);
  GString *text = g_string_new(NULL);
  js_validate_report(p, gg, &cfg, r, points, text);
  lua_createtable(L, 0, 12);
  lua_pushlstring(L, text->str, text->len);
  g_string_free(text, TRUE);
  lua_setfield(L, -2, "text");
  set_str(L, "gpu", cfg.gpu);
  set_str(L, "fit", fit_mode_name(r->mode));
  set_str(L, "profile", p->path);
  jsl_set_num(L, "power_limit_w", r->oob->power_limit_w);
  jsl_set_int(L, "n_clocks", r->n_clocks);
  jsl_set_int(L, "heldout_clocks", r->n_heldout_clocks);
  jsl_set_int(L, "folds", r->folds);
  lua_createtable(L, (int)r->summary->len - 1, 0);
  for (guint i = 0; i + 1 < r->summary->len; i++) {
    push_summary(L, &g_array_index(r->summary, FitSummary, i));
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "ops");
  push_summary(L, &g_array_index(r->summary, FitSummary, r->summary->len - 1));
  lua_setfield(L, -2, "overall");
  push_model(L, r->fitted_all != NULL ? r->fitted_all : r->oob, p);
  lua_setfield(L, -2, "model");
  lua_createtable(L, (int)r->rows->len, 0);
  for (guint k = 0; k < r->rows->len; k++) {
    const FitRow *w = &g_array_index(r->rows, FitRow, k);
    lua_createtable(L, 0, 11);
    set_str(L, "op", ((const ProfileOp *)g_ptr_array_index(p->ops, w->op))->name);
    jsl_set_int(L, "sm_mhz", w->sm_mhz);
    jsl_set_int(L, "mem_mhz", w->mem_mhz);
    lua_pushboolean(L, w->heldout);
    lua_setfield(L, -2, "heldout");
    jsl_set_num(L, "time_s", w->time_s);
    jsl_set_num(L, "energy_j", w->energy_j);
    jsl_set_num(L, "oob_time_s", w->oob_time_s);
    jsl_set_num(L, "oob_energy_j", w->oob_energy_j);
    jsl_set_num(L, "fit_time_s", w->fit_time_s);
    jsl_set_num(L, "fit_energy_j", w->fit_energy_j);
    lua_rawseti(L, -2, k + 1);
  }
  lua_setfield(L, -2, "points");
  g_clear_pointer(owner, fit_report_free); /* now, not at collection */
  return 1;
}

/* ---------------------------------------------------------------------- */
/* Lua: js.validate_interval (bootstrap)                                   */

/* The model handed to the what-if function; valid during the call only. */
typedef struct {
  const FitModel *m;
  const Profile *p;
  const char *gpu_name;
} LFitModel;

static LFitModel *check_fitmodel(lua_State *L, int idx, const char *fn)
{
  LFitModel *u = luaL_checkudata(L, idx, FITMODEL_MT);
  if (u->m == NULL)
    luaL_error(L, "%s: this model was only valid inside the function it was "
                  "passed to",
               fn);
  return u;
}

/* m:predict(op_name, sm_mhz[, mem_mhz]) -> time_s, energy_j */
static int fitmodel_predict(lua_State *L)
{
  const char *fn = "model:predict";
  LFitModel *u = check_fitmodel(L, 1, fn);
  const char *name = luaL_checkstring(L, 2);
  lua_Integer sm = luaL_checkinteger(L, 3);
  lua_Integer mem = luaL_optinteger(L, 4, 0);
  const GpuSpec *g = u->m->gpu;
  if (sm < g->sm_min_mhz.v || sm > g->sm_max_mhz.v || mem < 0 || mem > 100000)
    return luaL_error(L, "%s: SM clock %d MHz outside %s's %.0f-%.0f MHz", fn,
                      (int)sm, g->name, g->sm_min_mhz.v, g->sm_max_mhz.v);
  for (guint i = 0; i < u->p->ops->len; i++)
    if (strcmp(((const ProfileOp *)g_ptr_array_index(u->p->ops, i))->name,
               name) == 0) {
      double t, e;
      fit_model_predict(u->m, i, (guint)sm, (guint)mem, &t, &e, NULL);
      lua_pushnumber(L, t);
      lua_pushnumber(L, e);
      return 2;
    }
  return luaL_error(L, "%s: no op '%s' in the profile", fn, name);
}

static int fitmodel_index(lua_State *L)
{
  LFitModel *u = check_fitmodel(L, 1, "model");
  const char *k = luaL_checkstring(L, 2);
  if (strcmp(k, "predict") == 0)
    lua_pushcfunction(L, fitmodel_predict);
  else if (strcmp(k, "gpu") == 0)
    lua_pushstring(L, u->gpu_name);
  else if (strcmp(k, "p_const_w") == 0)
    lua_pushnumber(L, u->m->p_const_w);
  else if (strcmp(k, "p_leak_w") == 0)
    lua_pushnumber(L, u->m->p_leak_w);
  else if (strcmp(k, "v_ratio") == 0)
    lua_pushnumber(L, u->m->v_ratio);
  else if (strcmp(k, "f_knee_mhz") == 0)
    lua_pushnumber(L, u->m->f_knee_mhz);
  else if (strcmp(k, "dyn_scale") == 0)
    lua_pushnumber(L, u->m->dyn_scale);
  else
    lua_pushnil(L);
  return 1;
}

typedef struct {
  lua_State *L;
  int fn_idx;     /* the Lua function */
  int ud_idx;     /* the LFitModel userdata */
  JsSession *s;
  const char *gpu_name;
  const char *source;
} BootCtx;

/* FitWhatIf: defines the fitted GPU as ctx->gpu_name in the session
 * catalogue, then calls the Lua function under lua_pcall. */
static gboolean boot_eval(const FitModel *m, gpointer data, double *value,
                          GError **error)
{
  BootCtx *c = data;
  lua_State *L = c->L;
  GpuSpec *spec = fit_model_to_gpu(m, c->gpu_name, c->source);
  gboolean ok = gpu_catalogue_define(c->s->catalogue, spec, error);
  gpu_spec_free(spec);
  if (!ok)
    return FALSE;
  LFitModel *u = lua_touserdata(L, c->ud_idx);
  u->m = m;
  lua_pushvalue(L, c->fn_idx);
  lua_pushvalue(L, c->ud_idx);
  int rc = lua_pcall(L, 1, 1, 0);
  u->m = NULL;
  if (rc != LUA_OK) {
    g_set_error(error, FIT_ERROR, FIT_ERROR_INVALID, "fn: %s",
                lua_tostring(L, -1) != NULL ? lua_tostring(L, -1)
                                            : "(error object)");
    lua_pop(L, 1);
    return FALSE;
  }
  int isnum = 0;
  double v = lua_tonumberx(L, -1, &isnum);
  lua_pop(L, 1);
  if (!isnum || !isfinite(v)) {
    g_set_error(error, FIT_ERROR, FIT_ERROR_INVALID,
                "fn must return a finite number");
    return FALSE;
  }
  *value = v;
  return TRUE;
}

static const char *const interval_keys[] = {
  "profile", "gpu", "fit", "samples", "level", "seed", "power_limit_w",
  "fn", "gpu_name", NULL};

/* js.validate_interval{ profile =, gpu =, fn = function(model) -> number,
 *   fit = "all", samples = 200, level = 0.9, seed =, power_limit_w =,
 *   gpu_name = "<gpu>~fit" } -> { estimate, lo, hi, mean, sd, samples } */
static int l_validate_interval(lua_State *L)
{
  const char *fn = "js.validate_interval";
  JsSession *s = jsl_session(L);
  luaL_checktype(L, 1, LUA_TTABLE);
  jsl_check_keys(L, 1, fn, interval_keys);
  const char *gpu = jsl_opt_str(L, 1, fn, "gpu", NULL);
  if (gpu == NULL)
    return luaL_error(L, "%s: argument 'gpu' is required", fn);
  int mode = jsl_opt_choice(L, 1, fn, "fit", FIT_ALL,
                            (const char *const[]){"none", "time", "power",
                                                  "all", NULL});
  if (mode == FIT_NONE)
    return luaL_error(L, "%s: argument 'fit' must fit something (time, power "
                         "or all) for an interval",
                      fn);
  guint samples = (guint)jsl_opt_int(L, 1, fn, "samples", 200, 2, 100000);
  double level = jsl_opt_num(L, 1, fn, "level", 0.9, 1e-6, 1 - 1e-6);
  guint64 seed = jsl_opt_seed(L, 1, fn, "seed");
  double limit = jsl_opt_num(L, 1, fn, "power_limit_w", 0, 0, 1e5);
  if (lua_getfield(L, 1, "fn") != LUA_TFUNCTION)
    return luaL_error(L, "%s: argument 'fn' must be a function(model) "
                         "returning a number (got %s)",
                      fn, luaL_typename(L, -1));
  int fn_idx = lua_gettop(L);
  lua_pushfstring(L, "%s~fit", gpu);
  const char *gpu_name = jsl_opt_str(L, 1, fn, "gpu_name", lua_tostring(L, -1));
  Profile *p = arg_profile(L, 1, fn);
  LFitModel *u = lua_newuserdatauv(L, sizeof *u, 0);
  u->m = NULL;
  u->p = p;
  u->gpu_name = gpu_name;
  luaL_setmetatable(L, FITMODEL_MT);
  int ud_idx = lua_gettop(L);

  GError *err = NULL;
  const GpuSpec *g = gpu_catalogue_lookup(s->catalogue, gpu, &err);
  if (g == NULL || !profile_check_power(p, g, limit, &err))
    return jsl_raise_gerror(L, fn, err);
  /* The fitted entries replace gpu_name; the base must survive that. */
  if (strcmp(gpu_name, gpu) == 0)
    return luaL_error(L, "%s: argument 'gpu_name' must differ from 'gpu'", fn);
  char *base = g_path_get_basename(p->path);
  char *src = g_strdup_printf("bootstrap fit to %s", base);
  g_free(base);
  GpuSpec *gcopy = gpu_spec_copy(g);
  JsFitInput in = {0};
  js_fit_input_from_profile(p, &in);
  BootCtx ctx = {L, fn_idx, ud_idx, s, gpu_name, src};
  FitInterval iv;
  FitBootstrapOptions bopt = {(FitMode)mode, limit, samples, level, seed};
  gboolean ok = fit_bootstrap(gcopy, in.ops, in.n, &bopt, 1, boot_eval, &ctx,
                              &iv, &err);
  js_fit_input_clear(&in);
  gpu_spec_free(gcopy);
  g_free(src);
  if (!ok)
    return jsl_raise_gerror(L, fn, err);
  lua_createtable(L, 0, 7);
  jsl_set_num(L, "estimate", iv.estimate);
  jsl_set_num(L, "lo", iv.lo);
  jsl_set_num(L, "hi", iv.hi);
  jsl_set_num(L, "mean", iv.mean);
  jsl_set_num(L, "sd", iv.sd);
  jsl_set_num(L, "level", level);
  jsl_set_int(L, "samples", iv.samples);
  return 1;
}

/* ---------------------------------------------------------------------- */
/* Lua: js.validate_run (whole-run validation)                             */

/* Reads number field k of the table at idx; raises when absent. */
static double field_num(lua_State *L, int idx, const char *k, const char *fn)
{
  lua_getfield(L, idx, k);
  int isnum = 0;
  double v = lua_tonumberx(L, -1, &isnum);
  lua_pop(L, 1);
  if (!isnum)
    luaL_error(L, "%s: the result has no number '%s' (pass a table from "
                  "js.simulate)",
               fn, k);
  return v;
}

static const char *const run_keys[] = {"measured", "result", NULL};

/* js.validate_run{ measured = "iteration.csv", result = r } compares a
 * measured iteration (rank,time_s,energy_j) with a js.simulate result of
 * the same plan: per rank, time = the simulated iteration time and energy
 * = the GPU's energy per simulated iteration. */
static int l_validate_run(lua_State *L)
{
  const char *fn = "js.validate_run";
  luaL_checktype(L, 1, LUA_TTABLE);
  jsl_check_keys(L, 1, fn, run_keys);
  const char *path = jsl_opt_str(L, 1, fn, "measured", NULL);
  if (path == NULL)
    return luaL_error(L, "%s: argument 'measured' is required (a CSV "
                         "rank,time_s,energy_j)",
                      fn);
  if (lua_getfield(L, 1, "result") != LUA_TTABLE)
    return luaL_error(L, "%s: argument 'result' must be a table from "
                         "js.simulate (got %s)",
                      fn, luaL_typename(L, -1));
  int res = lua_gettop(L);
  double iter_t = field_num(L, res, "iteration_time_s", fn);
  lua_getfield(L, res, "iterations");
  lua_Integer n_iter = lua_istable(L, -1) ? luaL_len(L, -1) : 0;
  lua_pop(L, 1);
  if (n_iter < 1)
    return luaL_error(L, "%s: the result has no iterations", fn);
  if (lua_getfield(L, res, "per_gpu") != LUA_TTABLE)
    return luaL_error(L, "%s: the result has no per_gpu table", fn);
  int per = lua_gettop(L);
  lua_Integer n_gpu = luaL_len(L, per);

  jsl_check_read(L, fn, path);
  GError *err = NULL;
  GArray *ranks = profile_load_run(path, &err);
  if (ranks == NULL)
    return jsl_raise_gerror(L, fn, err);
  if ((lua_Integer)ranks->len != n_gpu) {
    guint n = ranks->len;
    g_array_unref(ranks);
    return luaL_error(L, "%s: %s has %d ranks, the simulation %d GPUs", fn,
                      path, (int)n, (int)n_gpu);
  }
  /* Copy into Lua memory, so no C allocation is live while Lua may raise
   * (the per_gpu entries are the caller's tables). */
  guint n = ranks->len;
  ProfileRank *rk = lua_newuserdatauv(L, n * sizeof(ProfileRank), 0);
  memcpy(rk, ranks->data, n * sizeof(ProfileRank));
  g_array_unref(ranks);
  lua_createtable(L, 0, 10);
  int out = lua_gettop(L);
  lua_createtable(L, (int)n, 0);
  double st = 0, se = 0, mt = 0, me = 0, sum_meas = 0, sum_sim = 0;
  double tmax_meas = 0;
  for (guint i = 0; i < n; i++) {
    ProfileRank pr = rk[i];
    lua_rawgeti(L, per, (lua_Integer)i + 1);
    lua_getfield(L, -1, "energy_j");
    double e_sim = lua_tonumber(L, -1) / (double)n_iter;
    lua_pop(L, 2);
    double et = iter_t / pr.time_s - 1, ee = e_sim / pr.energy_j - 1;
    st += fabs(et);
    se += fabs(ee);
    mt = MAX(mt, fabs(et));
    me = MAX(me, fabs(ee));
    sum_meas += pr.energy_j;
    sum_sim += e_sim;
    tmax_meas = MAX(tmax_meas, pr.time_s);
    lua_createtable(L, 0, 7);
    jsl_set_int(L, "rank", pr.rank);
    jsl_set_num(L, "time_s", pr.time_s);
    jsl_set_num(L, "energy_j", pr.energy_j);
    jsl_set_num(L, "sim_time_s", iter_t);
    jsl_set_num(L, "sim_energy_j", e_sim);
    jsl_set_num(L, "time_err", et);
    jsl_set_num(L, "energy_err", ee);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, out, "ranks");
  lua_pushvalue(L, out);
  jsl_set_num(L, "time_mape", st / n);
  jsl_set_num(L, "time_max", mt);
  jsl_set_num(L, "energy_mape", se / n);
  jsl_set_num(L, "energy_max", me);
  jsl_set_num(L, "iteration_time_s", tmax_meas);
  jsl_set_num(L, "sim_iteration_time_s", iter_t);
  jsl_set_num(L, "iteration_time_err", iter_t / tmax_meas - 1);
  jsl_set_num(L, "energy_j", sum_meas);
  jsl_set_num(L, "sim_energy_j", sum_sim);
  jsl_set_num(L, "energy_err", sum_sim / sum_meas - 1);
  char *text = g_strdup_printf(
      "measured %s vs simulated (%u ranks): iteration time %.4f s vs %.4f s "
      "(%+.2f%%), energy %.1f J vs %.1f J (%+.2f%%); per rank MAPE time "
      "%.2f%%, energy %.2f%% (max %.2f%%)",
      path, n, tmax_meas, iter_t, 100 * (iter_t / tmax_meas - 1), sum_meas,
      sum_sim, 100 * (sum_sim / sum_meas - 1), 100 * st / n, 100 * se / n,
      100 * me);
  lua_pushstring(L, text);
  g_free(text);
  lua_setfield(L, -2, "text");
  return 1;
}

/* ---------------------------------------------------------------------- */
/* Registration                                                            */

void jsl_register_profile(lua_State *L)
{
  if (luaL_newmetatable(L, PROFILE_MT)) {
    lua_pushcfunction(L, profile_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, profile_index);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, profile_tostring);
    lua_setfield(L, -2, "__tostring");
  }
  lua_pop(L, 1);
  if (luaL_newmetatable(L, FITMODEL_MT)) {
    lua_pushcfunction(L, fitmodel_index);
    lua_setfield(L, -2, "__index");
  }
  lua_pop(L, 1);
  lua_createtable(L, 0, 2);
  lua_pushcfunction(L, l_profile_load);
  lua_setfield(L, -2, "load");
  lua_pushcfunction(L, l_profile_load_nvml);
  lua_setfield(L, -2, "load_nvml");
  lua_setfield(L, -2, "profile");
  lua_pushcfunction(L, l_validate);
  lua_setfield(L, -2, "validate");
  lua_pushcfunction(L, l_validate_interval);
  lua_setfield(L, -2, "validate_interval");
  lua_pushcfunction(L, l_validate_run);
  lua_setfield(L, -2, "validate_run");
}

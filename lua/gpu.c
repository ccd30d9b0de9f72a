/* lua/gpu.c -- js.gpu: read and extend the GPU catalogue from Lua.
 *
 *   js.gpu(name)            -> table of the model's main parameters
 *   js.gpu.define{ name = "MY-A100", base = "A100-SXM4-80GB",
 *                  source = "my lab, 2026-11", power_limit_w = 350,
 *                  eff_compute = { gemm = 0.8 }, ["activity.softmax"] = 0.4,
 *                  mem_mhz = { 1215, 1593 } }
 *                          -> the new entry's table; usable by js.cluster
 *
 *   js.gpu.price{ gpu = "A100-SXM4-80GB", class = "gemm", flops = 1e12,
 *                 bytes = 4e8, math = "bf16", sm_mhz = 1200, mem_mhz = 0,
 *                 power_limit_w = 400, cap = true }
 *                          -> { time_s, power_w, energy_j, sm_mhz, mem_mhz,
 *                               capped, util_compute, util_memory }
 *     one kernel priced by the GPU model (models/gpu.c): requested clocks
 *     (0 = auto; snapped to the part's steps, an error outside its range,
 *     as in js.simulate), the per-kernel power cap unless cap = false.
 *
 * js.gpu is a table with a __call metamethod, so both forms work.  Defined
 * entries live in the session's catalogue (not on disk; `joulesim validate
 * --save-gpu` and JOULESIM_GPU_PATH persist fitted entries).
 */
#include "lua/luautil.h"

#include <lauxlib.h>
#include <string.h>

/* js.gpu(name) is implemented in lua/bind.c (l_gpu); the table form runs
 * it with the name moved to argument 1, in this frame: through lua_call
 * its errors would point at this C function instead of the script line
 * (found by fuzzing, tests/fuzz/fuzz-lua-args.c). */
static int gpu_call(lua_State *L)
{
  lua_CFunction f = lua_tocfunction(L, lua_upvalueindex(1));
  lua_remove(L, 1); /* the js.gpu table itself */
  return f(L);
}

/* Sets parameter `field` of spec s from the number at the top of the stack
 * (borrowed strings: the Lua error path leaks nothing because s is owned by
 * a userdata with __gc, see l_define). */
static void set_param(lua_State *L, GpuSpec *s, const char *field,
                      const char *source, const char *base)
{
  const char *fn = "js.gpu.define";
  GpuParam *p = gpu_spec_param(s, field);
  if (p == NULL)
    luaL_error(L, "%s: unknown GPU parameter '%s' (`joulesim gpus %s` lists "
                  "the parameter names)", fn, field, base);
  if (lua_type(L, -1) != LUA_TNUMBER)
    luaL_error(L, "%s: parameter '%s' must be a number (got %s)", fn, field,
               luaL_typename(L, -1));
  p->v = lua_tonumber(L, -1);
  p->source = source;
}

static int l_define(lua_State *L)
{
  const char *fn = "js.gpu.define";
  JsSession *s = jsl_session(L);
  luaL_checktype(L, 1, LUA_TTABLE);
  const char *name = jsl_opt_str(L, 1, fn, "name", NULL);
  if (name == NULL || *name == '\0')
    luaL_error(L, "%s: argument 'name' (a non-empty string) is required", fn);
  const char *base = jsl_opt_str(L, 1, fn, "base", "A100-SXM4-80GB");
  const char *source = jsl_opt_str(L, 1, fn, "source", "js.gpu.define");
  const char *desc = jsl_opt_str(L, 1, fn, "description", NULL);
  GError *err = NULL;
  const GpuSpec *b = gpu_catalogue_lookup(s->catalogue, base, &err);
  if (b == NULL)
    return jsl_raise_gerror(L, fn, err);
  /* The copy is held by an owner (the catalogue keeps its own copy), so
   * a Lua error below cannot leak it. */
  gpointer *owner = jsl_push_owner(L, (GDestroyNotify)gpu_spec_free);
  GpuSpec *spec = *owner = gpu_spec_copy(b);
  g_free(spec->name);
  spec->name = g_strdup(name);
  if (desc != NULL) {
    g_free(spec->description);
    spec->description = g_strdup(desc);
  }
  source = g_intern_string(source);
  lua_pushnil(L);
  while (lua_next(L, 1) != 0) {
    if (lua_type(L, -2) != LUA_TSTRING)
      luaL_error(L, "%s: arguments must be named", fn);
    const char *k = lua_tostring(L, -2);
    if (strcmp(k, "name") == 0 || strcmp(k, "base") == 0 ||
        strcmp(k, "source") == 0 || strcmp(k, "description") == 0) {
      lua_pop(L, 1);
      continue;
    }
    if (strcmp(k, "mem_mhz") == 0) {
      if (!lua_istable(L, -1))
        luaL_error(L, "%s: 'mem_mhz' must be a list of clocks (MHz)", fn);
      lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
      if (n < 1 || n > GPU_MAX_MEM_CLOCKS)
        luaL_error(L, "%s: 'mem_mhz' must list 1..%d clocks", fn,
                   GPU_MAX_MEM_CLOCKS);
      spec->n_mem_clocks = (guint)n;
      for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, -1, i);
        char buf[32];
        g_snprintf(buf, sizeof buf, "mem_mhz.%d", (int)(i - 1));
        set_param(L, spec, buf, source, base);
        lua_pop(L, 1);
      }
    } else if (lua_istable(L, -1)) {
      /* eff_compute = { gemm = 0.8 } -> "eff_compute.gemm" */
      lua_pushnil(L);
      while (lua_next(L, -2) != 0) {
        if (lua_type(L, -2) != LUA_TSTRING)
          luaL_error(L, "%s: '%s' must map names to numbers", fn, k);
        lua_pushfstring(L, "%s.%s", k, lua_tostring(L, -2));
        lua_insert(L, -2);
        set_param(L, spec, lua_tostring(L, -2), source, base);
        lua_pop(L, 2);
      }
    } else {
      set_param(L, spec, k, source, base);
    }
    lua_pop(L, 1);
  }
  if (!gpu_spec_validate(spec, &err) ||
      !gpu_catalogue_define(s->catalogue, spec, &err))
    return jsl_raise_gerror(L, fn, err);
  /* Return js.gpu(name) of the new entry. */
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_pushstring(L, name);
  lua_call(L, 1, 1);
  return 1;
}

/* js.gpu.price{...}: one kernel through gpu_kernel_cost. */
static int l_price(lua_State *L)
{
  const char *fn = "js.gpu.price";
  JsSession *s = jsl_session(L);
  luaL_checktype(L, 1, LUA_TTABLE);
  static const char *const keys[] = {"gpu", "class", "flops", "bytes",
                                     "math", "sm_mhz", "mem_mhz",
                                     "power_limit_w", "cap", NULL};
  jsl_check_keys(L, 1, fn, keys);
  const char *name = jsl_opt_str(L, 1, fn, "gpu", "A100-SXM4-80GB");
  GError *err = NULL;
  const GpuSpec *g = gpu_catalogue_lookup(s->catalogue, name, &err);
  if (g == NULL)
    return jsl_raise_gerror(L, fn, err);
  const char *cls = jsl_opt_str(L, 1, fn, "class", "gemm");
  int c = sim_class_from_name(cls);
  if (c < 0 || c >= SIM_CLASS_COUNT)
    luaL_error(L, "%s: unknown class '%s' (gemm, attention, elementwise, "
                  "norm, softmax, reduction, embedding, optimizer, memcpy, "
                  "comm, other)", fn, cls);
  static const char *const maths[] = {"bf16", "fp16", "tf32", "fp32", "fp8",
                                      NULL};
  static const guint math_unit[] = {SIM_MATH_TENSOR, SIM_MATH_TENSOR,
                                    SIM_MATH_TF32, SIM_MATH_VECTOR,
                                    SIM_MATH_FP8};
  int m = jsl_opt_choice(L, 1, fn, "math", 0, maths);
  GpuKernel k = {
    .klass = (SimOpClass)c,
    .flops = jsl_opt_num(L, 1, fn, "flops", 0, 0, 1e21),
    .bytes = jsl_opt_num(L, 1, fn, "bytes", 0, 0, 1e21),
    .tensor = math_unit[m],
  };
  lua_Integer sm = jsl_opt_int(L, 1, fn, "sm_mhz", 0, 0, 100000);
  lua_Integer mem = jsl_opt_int(L, 1, fn, "mem_mhz", 0, 0, 1000000);
  /* Clocks outside the part's range are refused as js.simulate refuses
   * them (gpu_kernel_cost would clamp them silently: 1980 MHz on an A100
   * priced at 1410). */
  if (!dvfs_check_sm(g, "sm_mhz", (guint)sm, &err) ||
      !dvfs_check_mem(g, "mem_mhz", (guint)mem, &err))
    return jsl_raise_gerror(L, fn, err);
  double limit = jsl_opt_num(L, 1, fn, "power_limit_w", g->power_limit_w.v,
                             1, 1e5);
  if (!jsl_opt_bool(L, 1, fn, "cap", TRUE))
    limit = GPU_POWER_UNCAPPED;
  GpuCost cost;
  /* Snapped here, where the request enters: the model prices supported
   * clocks only. */
  gpu_kernel_cost(g, &k, sm != 0 ? gpu_snap_sm(g, (guint)sm) : 0,
                  mem != 0 ? gpu_snap_mem(g, (guint)mem) : 0, limit, &cost);
  lua_createtable(L, 0, 8);
  jsl_set_num(L, "time_s", cost.time_s);
  jsl_set_num(L, "power_w", cost.power_w);
  jsl_set_num(L, "energy_j", cost.power_w * cost.time_s);
  jsl_set_int(L, "sm_mhz", cost.sm_mhz);
  jsl_set_int(L, "mem_mhz", cost.mem_mhz);
  lua_pushboolean(L, cost.capped);
  lua_setfield(L, -2, "capped");
  jsl_set_num(L, "util_compute", cost.util_compute);
  jsl_set_num(L, "util_memory", cost.util_memory);
  return 1;
}

void jsl_register_gpu(lua_State *L)
{
  /* module table at -1; its "gpu" field is the C function js.gpu(name) */
  int mod = lua_gettop(L);
  lua_getfield(L, mod, "gpu");
  lua_createtable(L, 0, 1);          /* the js.gpu table */
  lua_pushvalue(L, -2);              /* define returns js.gpu(name) */
  lua_pushcclosure(L, l_define, 1);
  lua_setfield(L, -2, "define");
  lua_pushcfunction(L, l_price);
  lua_setfield(L, -2, "price");
  lua_createtable(L, 0, 1);          /* its metatable */
  lua_pushvalue(L, -3);              /* the C js.gpu function */
  lua_pushcclosure(L, gpu_call, 1);
  lua_setfield(L, -2, "__call");
  lua_setmetatable(L, -2);
  lua_setfield(L, mod, "gpu");
  lua_pop(L, 1);                     /* the C function */
}

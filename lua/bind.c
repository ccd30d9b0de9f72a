/* lua/bind.c -- the `joulesim` Lua module (C primitives) and script runner.
 * js.simulate is lua/simulate.c; the other feature files register
 * themselves through lua/luautil.h's jsl_register_* hooks.
 *
 * Conventions
 * -----------
 * - Every public function takes one table of named arguments (or a string)
 *   and checks it completely before doing anything: unknown keys (with a
 *   "did you mean"), wrong types and out-of-range values raise an error that
 *   names the function, the argument, what is allowed and (through
 *   luaL_error's position) the script line that made the call.
 * - Objects with C state are userdata with a named metatable
 *   ("joulesim.Cluster", "joulesim.Workload", "joulesim.Results"); each owns
 *   its C object and frees it in __gc.
 * - Results of simulations are plain Lua tables.
 * - The session (seed, catalogue, scenario) is a light userdata in the
 *   registry: no global C state.
 */
#include "lua/bind.h"
#include "lua/luautil.h"
#include "run/memory.h"
#include "io/results.h"
#include "io/fault.h"
#include "io/input.h"
#include "sim/pcg.h"
#include "traces/gpt.h"

#include <gio/gio.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

G_DEFINE_QUARK(js-error-quark, js_error)


GResource *js_res_get_resource(void);

/* ---- userdata -------------------------------------------------------------- */

static int cluster_gc(lua_State *L)
{
  LCluster *u = luaL_checkudata(L, 1, CLUSTER_MT);
  cluster_free(u->c);
  u->c = NULL;
  return 0;
}

static int cluster_index(lua_State *L)
{
  Cluster *c = jsl_check_cluster(L, 1, "cluster");
  const char *k = luaL_checkstring(L, 2);
  if (strcmp(k, "n_gpus") == 0 || strcmp(k, "gpus") == 0)
    lua_pushinteger(L, c->n_gpus);
  else if (strcmp(k, "gpus_per_node") == 0)
    lua_pushinteger(L, c->gpus_per_node);
  else if (strcmp(k, "nodes") == 0)
    lua_pushinteger(L, (c->n_gpus + c->gpus_per_node - 1) / c->gpus_per_node);
  else if (strcmp(k, "gpu") == 0)
    lua_pushstring(L, c->gpu->name);
  else if (strcmp(k, "network") == 0)
    lua_pushstring(L, c->net->name);
  else if (strcmp(k, "node") == 0)
    lua_pushstring(L, c->node.name);
  else if (strcmp(k, "pue") == 0)
    lua_pushnumber(L, c->pue);
  else if (strcmp(k, "power_limit_w") == 0)
    lua_pushnumber(L, c->power_limit_w > 0 ? c->power_limit_w
                                           : c->gpu->power_limit_w.v);
  else
    lua_pushnil(L);
  return 1;
}

static int cluster_tostring(lua_State *L)
{
  Cluster *c = jsl_check_cluster(L, 1, "cluster");
  lua_pushfstring(L, "cluster(%d x %s, %d per node, %s)", (int)c->n_gpus,
                  c->gpu->name, (int)c->gpus_per_node, c->net->name);
  return 1;
}

static int workload_gc(lua_State *L)
{
  LWorkload *u = luaL_checkudata(L, 1, WORKLOAD_MT);
  sim_workload_free(u->w);
  g_free(u->label);
  gpt_memory_free(u->gpu_memory);
  u->w = NULL;
  u->label = NULL;
  u->gpu_memory = NULL;
  return 0;
}

/* Ops the workload stands for: every rank's, a folded rank counting its
 * representative's (sim_workload_n_ops() counts the ops held). */
static guint64 represented_ops(const SimWorkload *w)
{
  if (w->fold_rep == NULL)
    return sim_workload_n_ops(w);
  guint64 n = 0;
  for (guint r = 0; r < w->n_ranks; r++)
    n += w->ranks[w->fold_rep[r]].n_ops;
  return n;
}

/* { stage, params, weights_gb, grads_gb, optimizer_gb, activations_gb,
 * allowance_gb, total_gb, in_flight }: stage p's GPU memory (GB = 1e9
 * bytes; stage counted from 0). */
static void push_stage_memory(lua_State *L, const GptStageMemory *m,
                              guint p)
{
  lua_createtable(L, 0, 9);
  jsl_set_int(L, "stage", p);
  jsl_set_num(L, "params", m->params);
  jsl_set_num(L, "weights_gb", m->weights_bytes / 1e9);
  jsl_set_num(L, "grads_gb", m->grads_bytes / 1e9);
  jsl_set_num(L, "optimizer_gb", m->optimizer_bytes / 1e9);
  jsl_set_num(L, "activations_gb", m->activations_bytes / 1e9);
  jsl_set_num(L, "allowance_gb", m->allowance_bytes / 1e9);
  jsl_set_num(L, "total_gb", m->total_bytes / 1e9);
  jsl_set_num(L, "in_flight", m->in_flight);
}

/* w.memory_by_stage: a list, stage 0 first. */
static void push_memory_by_stage(lua_State *L, const GptMemory *m)
{
  guint n = gpt_memory_n_stages(m);
  lua_createtable(L, (int)n, 0);
  for (guint p = 0; p < n; p++) {
    push_stage_memory(L, gpt_memory_stage(m, p), p);
    lua_rawseti(L, -2, p + 1);
  }
}

static int workload_index(lua_State *L)
{
  LWorkload *u = jsl_check_workload(L, 1, "workload");
  const SimWorkload *w = u->w;
  const char *k = luaL_checkstring(L, 2);
  if (strcmp(k, "ranks") == 0)
    lua_pushinteger(L, w->n_ranks);
  else if (strcmp(k, "ops") == 0)
    lua_pushinteger(L, (lua_Integer)represented_ops(w));
  else if (strcmp(k, "ops_replayed") == 0)
    lua_pushinteger(L, (lua_Integer)sim_workload_n_ops(w));
  else if (strcmp(k, "folded") == 0)
    lua_pushboolean(L, w->fold_rep != NULL);
  else if (strcmp(k, "tp") == 0)
    lua_pushinteger(L, w->tp);
  else if (strcmp(k, "pp") == 0)
    lua_pushinteger(L, w->pp);
  else if (strcmp(k, "dp") == 0)
    lua_pushinteger(L, w->dp);
  else if (strcmp(k, "microbatches") == 0)
    lua_pushinteger(L, w->microbatches);
  else if (strcmp(k, "label") == 0)
    lua_pushstring(L, u->label);
  else if (strcmp(k, "tokens") == 0)
    lua_pushnumber(L, w->tokens_per_iteration);
  else if (strcmp(k, "params") == 0 && u->params > 0)
    lua_pushnumber(L, u->params);
  else if (strcmp(k, "model_flops") == 0 && u->model_flops > 0)
    lua_pushnumber(L, u->model_flops);
  else if (strcmp(k, "memory_by_stage") == 0 && u->gpu_memory != NULL)
    push_memory_by_stage(L, u->gpu_memory);
  else if (strcmp(k, "memory") == 0 && u->gpu_memory != NULL) {
    guint p = gpt_memory_peak_stage(u->gpu_memory);
    push_stage_memory(L, gpt_memory_stage(u->gpu_memory, p), p);
  } else
    lua_pushnil(L);
  return 1;
}

static int workload_tostring(lua_State *L)
{
  LWorkload *u = jsl_check_workload(L, 1, "workload");
  lua_pushfstring(L, "workload(%s, %d ranks, %I ops)", u->label,
                  (int)u->w->n_ranks, (lua_Integer)represented_ops(u->w));
  return 1;
}

/* ---- js.cluster -------------------------------------------------------------- */

static const char *const cluster_keys[] = {
  "gpu", "nodes", "gpus_per_node", "gpus", "network", "power_limit_w",
  "idle_power_w", "blocking_power_w", "comm_power_w", "switch_latency_ms",
  "variability", "boost", "node", "pue", NULL};

static const char *const node_keys[] = {
  "preset", "cpu_idle_w", "cpu_active_w", "cpu_load", "dram_idle_w",
  "dram_active_w", "nic_idle_w", "nic_active_w", "nvswitch_idle_w",
  "nvswitch_active_w", "other_w", "psu_efficiency", NULL};

/* A node: nil ("none"), "PRESET" or { preset = "PRESET", FIELD = value,
 * ... } (fields over the preset, "none" when absent), the value at index
 * v, into *n.  fn names the caller in errors. */
static void check_node(lua_State *L, int v, const char *fn, NodeSpec *n)
{
  const char *tfn = lua_pushfstring(L, "%s{node}", fn); /* popped below */
  int t = lua_type(L, v);
  const char *name = "none";
  if (t == LUA_TSTRING)
    name = lua_tostring(L, v);
  else if (t == LUA_TTABLE)
    name = jsl_opt_str(L, v, tfn, "preset", "none");
  else if (t != LUA_TNIL)
    luaL_error(L, "%s: argument 'node' must be a preset name or a table "
                  "(got %s)", fn, luaL_typename(L, v));
  GError *err = NULL;
  if (!node_preset(name, n, &err)) {
    g_prefix_error(&err, "argument 'node': ");
    jsl_raise_gerror(L, fn, err);
  }
  if (t == LUA_TTABLE) {
    jsl_check_keys(L, v, tfn, node_keys);
    struct { const char *key; double *v; double hi; } f[] = {
      {"cpu_idle_w", &n->cpu_idle_w, 1e5},
      {"cpu_active_w", &n->cpu_active_w, 1e5},
      {"cpu_load", &n->cpu_load, 1},
      {"dram_idle_w", &n->dram_idle_w, 1e5},
      {"dram_active_w", &n->dram_active_w, 1e5},
      {"nic_idle_w", &n->nic_idle_w, 1e5},
      {"nic_active_w", &n->nic_active_w, 1e5},
      {"nvswitch_idle_w", &n->nvswitch_idle_w, 1e5},
      {"nvswitch_active_w", &n->nvswitch_active_w, 1e5},
      {"other_w", &n->other_w, 1e5},
    };
    for (guint i = 0; i < G_N_ELEMENTS(f); i++)
      *f[i].v = jsl_opt_num(L, v, tfn, f[i].key, *f[i].v, 0, f[i].hi);
    n->psu_efficiency = jsl_opt_num(L, v, tfn, "psu_efficiency",
                                    n->psu_efficiency, 0.01, 1);
    n->name = "custom";
  }
  if (!node_validate(n, &err))
    jsl_raise_gerror(L, fn, err);
  lua_pop(L, 1);
}

/* js.node_power(node, gpu_w [, nic [, nvswitch]]) -> the wall power of one
 * node whose GPUs draw gpu_w in all, its NICs and NVSwitches busy the
 * given fractions of the time (0 when absent). */
static int l_node_power(lua_State *L)
{
  const char *fn = "js.node_power";
  NodeSpec n;
  check_node(L, 1, fn, &n);
  double gpu_w = luaL_checknumber(L, 2);
  double nic = luaL_optnumber(L, 3, 0), nvs = luaL_optnumber(L, 4, 0);
  if (!(gpu_w >= 0 && gpu_w <= 1e6))
    luaL_error(L, "%s: argument 'gpu_w' must be a power in [0, 1e6] W "
                  "(got %f)", fn, gpu_w);
  if (!(nic >= 0 && nic <= 1 && nvs >= 0 && nvs <= 1))
    luaL_error(L, "%s: the NIC and NVSwitch utilisations must be in [0, 1] "
                  "(got %f, %f)", fn, nic, nvs);
  lua_pushnumber(L, node_energy_j(&n, 1, 1.0, gpu_w, nic, nvs));
  return 1;
}

/* js.node(node) -> the node's figures as js.cluster takes them, its name,
 * and sources = { part = text }: what each part of a preset rests on
 * (models/node.h, node_part_source; empty for "none" and a table). */
static int l_node(lua_State *L)
{
  NodeSpec n;
  lua_settop(L, 1); /* js.node(): "none" */
  check_node(L, 1, "js.node", &n);
  lua_createtable(L, 0, 14);
  lua_pushstring(L, n.name);
  lua_setfield(L, -2, "name");
  const struct { const char *key; double v; } f[] = {
    {"cpu_idle_w", n.cpu_idle_w}, {"cpu_active_w", n.cpu_active_w},
    {"cpu_load", n.cpu_load}, {"dram_idle_w", n.dram_idle_w},
    {"dram_active_w", n.dram_active_w}, {"nic_idle_w", n.nic_idle_w},
    {"nic_active_w", n.nic_active_w}, {"nvswitch_idle_w", n.nvswitch_idle_w},
    {"nvswitch_active_w", n.nvswitch_active_w}, {"other_w", n.other_w},
    {"psu_efficiency", n.psu_efficiency},
  };
  for (guint i = 0; i < G_N_ELEMENTS(f); i++)
    jsl_set_num(L, f[i].key, f[i].v);
  lua_newtable(L);
  const char *part, *src;
  for (guint i = 0; (part = node_part_source(&n, i, &src)) != NULL; i++)
    if (src != NULL) {
      lua_pushstring(L, src);
      lua_setfield(L, -2, part);
    }
  lua_setfield(L, -2, "sources");
  return 1;
}

static int l_cluster(lua_State *L)
{
  const char *fn = "js.cluster";
  JsSession *s = jsl_session(L);
  jsl_check_keys(L, 1, fn, cluster_keys);
  GError *err = NULL;
  const char *gpu_name = jsl_opt_str(L, 1, fn, "gpu", "A100-SXM4-80GB");
  const GpuSpec *gpu = gpu_catalogue_lookup(s->catalogue, gpu_name, &err);
  if (gpu == NULL) {
    g_prefix_error(&err, "argument 'gpu': ");
    return jsl_raise_gerror(L, fn, err);
  }
  lua_Integer gpn = jsl_opt_int(L, 1, fn, "gpus_per_node", 0, 1, 64);
  lua_Integer nodes = jsl_opt_int(L, 1, fn, "nodes", 0, 1, 1 << 17);
  lua_Integer gpus = jsl_opt_int(L, 1, fn, "gpus", 0, 1, 1 << 20);
  if (gpus == 0 && nodes == 0)
    luaL_error(L, "%s: give 'gpus' (number of GPUs) or 'nodes'", fn);
  if (gpn == 0)
    gpn = (gpus > 0 && gpus < 8 && nodes == 0) ? gpus : 8;
  if (gpus == 0)
    gpus = nodes * gpn;
  else if (nodes != 0 && nodes * gpn != gpus)
    luaL_error(L, "%s: nodes * gpus_per_node = %I but gpus = %I", fn,
               nodes * gpn, gpus);
  if (gpus > (1 << 20))
    luaL_error(L, "%s: %I GPUs is more than the 1,048,576 supported", fn,
               gpus);
  const char *net_name = jsl_opt_str(L, 1, fn, "network",
                                     net_default_preset(gpu->name));
  /* The userdata owns the cluster from its making on, so a later
   * argument error (a longjmp) cannot leak it; it comes before the
   * network preset too, whose allocation would not survive a memory
   * error in making it. */
  LCluster *u = lua_newuserdatauv(L, sizeof *u, 0);
  u->c = NULL;
  luaL_setmetatable(L, CLUSTER_MT);
  NetSpec *net = net_preset(net_name, &err);
  if (net == NULL) {
    g_prefix_error(&err, "argument 'network': ");
    return jsl_raise_gerror(L, fn, err);
  }
  Cluster *c = cluster_new(gpu, net, (guint)gpus, (guint)gpn, &err);
  net_spec_free(net);
  if (c == NULL)
    return jsl_raise_gerror(L, fn, err);
  u->c = c;
  c->power_limit_w = jsl_opt_num(L, 1, fn, "power_limit_w", -1, 1, 5000);
  c->idle_power_w = jsl_opt_num(L, 1, fn, "idle_power_w", -1, 0, 5000);
  c->blocked_power_w = jsl_opt_num(L, 1, fn, "blocking_power_w", -1, 0, 5000);
  c->comm_power_w = jsl_opt_num(L, 1, fn, "comm_power_w", -1, 0, 5000);
  c->switch_latency_ms = jsl_opt_num(L, 1, fn, "switch_latency_ms", -1, 0, 1e6);
  static const char *const boosts[] = {"per-kernel", "controller", NULL};
  c->boost = (ClusterBoost)jsl_opt_choice(L, 1, fn, "boost",
                                          CLUSTER_BOOST_PER_KERNEL, boosts);
  if (lua_getfield(L, 1, "variability") != LUA_TNIL) {
    static const char *const vkeys[] = {"perf", "power", NULL};
    jsl_check_keys(L, lua_gettop(L), "js.cluster{variability}", vkeys);
    c->perf_spread = jsl_opt_num(L, -1, "js.cluster{variability}", "perf", 0, 0,
                             0.5);
    c->power_spread = jsl_opt_num(L, -1, "js.cluster{variability}", "power", 0,
                              0, 0.5);
  }
  lua_pop(L, 1);
  lua_getfield(L, 1, "node");
  check_node(L, lua_gettop(L), fn, &c->node);
  lua_pop(L, 1);
  c->pue = jsl_opt_num(L, 1, fn, "pue", 1, 1, 10);
  if (!cluster_validate(c, &err))
    return jsl_raise_gerror(L, fn, err);
  return 1;
}

/* ---- js.gpt ------------------------------------------------------------------ */

static const char *const gpt_keys[] = {
  "model", "layers", "hidden", "heads", "vocab", "seq_len",
  "microbatch_size", "microbatches", "tp", "pp", "dp", "schedule",
  "recompute", "gpu", "dp_bucket_mb", "dp_overlap", "chunks", "fold",
  "stage_layers", "precision", "arch", "impl", "efficiency", "attention",
  "sequence_parallel", "tp_comm_overlap", "zero", "global_batch_size", "kv_heads", "ffn_hidden",
  "zero_group", "gpus_per_node", "context_parallel", NULL};
static const char *const archs[] = {"gpt", "bloom", "llama", NULL};
static const char *const impls[] = {"megatron", "hf", NULL};
static const char *const eff_keys[] = {"gemm", "attention", "memory", NULL};
static const char *const precisions[] = {"bf16", "fp16", "tf32", "fp32", "fp8",
                                         NULL};
static const char *const attentions[] = {"unfused", "flash", NULL};
static const char *const zero_groups[] = {"all", "node", NULL};

/* js.gpt's stage_layers = { n1, ..., npp }: pp integers in 1..255, in a
 * userdata left on the stack (collected with it); NULL when absent. */
static const guint *opt_stage_layers(lua_State *L, int idx, const char *fn,
                                     guint pp)
{
  int t = lua_getfield(L, idx, "stage_layers");
  if (t == LUA_TNIL) {
    lua_pop(L, 1);
    return NULL;
  }
  if (t != LUA_TTABLE)
    luaL_error(L, "%s: argument 'stage_layers' must be a list of layer "
                  "counts, one per pipeline stage (got %s)", fn,
               luaL_typename(L, -1));
  int list = lua_gettop(L);
  lua_Integer n = (lua_Integer)lua_rawlen(L, list);
  if (n != (lua_Integer)pp)
    luaL_error(L, "%s: argument 'stage_layers' has %I entries, pp = %d: "
                  "give one layer count per pipeline stage", fn, n, (int)pp);
  guint *out = lua_newuserdatauv(L, sizeof(guint) * (size_t)pp, 0);
  for (lua_Integer i = 1; i <= n; i++) {
    int isnum = 0;
    lua_rawgeti(L, list, i);
    lua_Integer v = lua_tointegerx(L, -1, &isnum);
    if (!isnum || v < 1 || v > 255)
      luaL_error(L, "%s: argument 'stage_layers'[%I] must be an integer in "
                    "1..255 (got %s)", fn, i, luaL_tolstring(L, -1, NULL));
    out[i - 1] = (guint)v;
    lua_pop(L, 1);
  }
  return out;
}

static int l_gpt(lua_State *L)
{
  const char *fn = "js.gpt";
  JsSession *s = jsl_session(L);
  if (lua_isnoneornil(L, 1))
    lua_newtable(L);
  jsl_check_keys(L, 1, fn, gpt_keys);
  GError *err = NULL;
  GptConfig cfg;
  gpt_config_init(&cfg);
  const char *model = jsl_opt_str(L, 1, fn, "model", NULL);
  if (model != NULL && !gpt_config_set_model(&cfg, model, &err))
    return jsl_raise_gerror(L, fn, err);
  const lua_Integer big = 1 << 20;
  cfg.layers = (guint)jsl_opt_int(L, 1, fn, "layers", cfg.layers, 1, 4096);
  cfg.hidden = (guint)jsl_opt_int(L, 1, fn, "hidden", cfg.hidden, 1, big);
  cfg.heads = (guint)jsl_opt_int(L, 1, fn, "heads", cfg.heads, 1, 65536);
  cfg.vocab = (guint)jsl_opt_int(L, 1, fn, "vocab", cfg.vocab, 1, 1 << 24);
  cfg.seq_len = (guint)jsl_opt_int(L, 1, fn, "seq_len", cfg.seq_len, 1, big);
  cfg.microbatch_size = (guint)jsl_opt_int(L, 1, fn, "microbatch_size",
                                       cfg.microbatch_size, 1, 65536);
  cfg.microbatches = (guint)jsl_opt_int(L, 1, fn, "microbatches",
                                    cfg.microbatches, 1, 100000);
  cfg.tp = (guint)jsl_opt_int(L, 1, fn, "tp", cfg.tp, 1, 1024);
  cfg.pp = (guint)jsl_opt_int(L, 1, fn, "pp", cfg.pp, 1, 4096);
  cfg.dp = (guint)jsl_opt_int(L, 1, fn, "dp", cfg.dp, 1, big);
  cfg.schedule = (PipelineSchedule)jsl_opt_choice(L, 1, fn, "schedule", cfg.schedule,
                                         schedule_names);
  /* chunks absent: 0, the schedule's default (2 for interleaved, else 1). */
  cfg.chunks = (guint)jsl_opt_int(L, 1, fn, "chunks", cfg.chunks, 1, 255);
  cfg.recompute = jsl_opt_bool(L, 1, fn, "recompute", cfg.recompute);
  cfg.dp_bucket_mb = jsl_opt_num(L, 1, fn, "dp_bucket_mb", cfg.dp_bucket_mb, 0,
                             1e6);
  cfg.dp_overlap = jsl_opt_bool(L, 1, fn, "dp_overlap", cfg.dp_overlap);
  cfg.fold = jsl_opt_bool(L, 1, fn, "fold", cfg.fold);
  cfg.stage_layers = opt_stage_layers(L, 1, fn, cfg.pp);
  cfg.precision = (GptPrecision)jsl_opt_choice(L, 1, fn, "precision",
                                               GPT_PRECISION_BF16, precisions);
  cfg.arch = (GptArch)jsl_opt_choice(L, 1, fn, "arch", cfg.arch, archs);
  cfg.kv_heads = (guint)jsl_opt_int(L, 1, fn, "kv_heads", cfg.kv_heads, 1,
                                    65536);
  cfg.ffn_hidden = (guint)jsl_opt_int(L, 1, fn, "ffn_hidden", cfg.ffn_hidden,
                                      1, big);
  cfg.impl = (GptImpl)jsl_opt_choice(L, 1, fn, "impl", GPT_IMPL_MEGATRON,
                                     impls);
  cfg.attention = (GptAttention)jsl_opt_choice(L, 1, fn, "attention",
                                               GPT_ATTENTION_UNFUSED,
                                               attentions);
  cfg.sequence_parallel = jsl_opt_bool(L, 1, fn, "sequence_parallel", FALSE);
  cfg.tp_comm_overlap = jsl_opt_bool(L, 1, fn, "tp_comm_overlap", FALSE);
  cfg.zero = (guint)jsl_opt_int(L, 1, fn, "zero", 0, 0, 3);
  cfg.zero_group = (GptZeroGroup)jsl_opt_choice(L, 1, fn, "zero_group",
                                                GPT_ZERO_GROUP_ALL,
                                                zero_groups);
  cfg.gpus_per_node = (guint)jsl_opt_int(L, 1, fn, "gpus_per_node",
                                         cfg.gpus_per_node, 1, big);
  cfg.cp = (guint)jsl_opt_int(L, 1, fn, "context_parallel", 1, 1, 1024);
  /* global_batch_size sets microbatches (Megatron's rule); giving both
   * is fine when they agree. */
  guint m_given = cfg.microbatches;
  gboolean m_set = lua_getfield(L, 1, "microbatches") != LUA_TNIL;
  lua_pop(L, 1);
  cfg.global_batch_size = (guint)jsl_opt_int(L, 1, fn, "global_batch_size",
                                             0, 1, 1 << 30);
  if (!gpt_config_resolve_batch(&cfg, &err))
    return jsl_raise_gerror(L, fn, err);
  if (m_set && cfg.microbatches != m_given)
    luaL_error(L, "%s: microbatches = %d but global_batch_size = %d / "
                  "(microbatch_size %d * dp %d) = %d: give one of them", fn,
               (int)m_given, (int)cfg.global_batch_size,
               (int)cfg.microbatch_size, (int)cfg.dp, (int)cfg.microbatches);
  /* efficiency = { gemm =, attention =, memory = }: the factors on the
   * catalogue's roofline efficiencies, for fitting (scenarios/
   * fit_impl.lua); absent ones keep the implementation's fitted value. */
  if (lua_getfield(L, 1, "efficiency") != LUA_TNIL) {
    const char *efn = "js.gpt{efficiency}";
    if (!lua_istable(L, -1))
      luaL_error(L, "%s: argument 'efficiency' must be a table { gemm =, "
                    "attention =, memory = } (got %s)", fn,
                 luaL_typename(L, -1));
    int et = lua_gettop(L);
    jsl_check_keys(L, et, efn, eff_keys);
    cfg.eff.gemm = jsl_opt_num(L, et, efn, "gemm", 0, 1e-3, 2);
    cfg.eff.attention = jsl_opt_num(L, et, efn, "attention", 0, 1e-3, 2);
    cfg.eff.memory = jsl_opt_num(L, et, efn, "memory", 0, 1e-3, 2);
  }
  lua_pop(L, 1);
  guint64 n_ranks = (guint64)cfg.tp * cfg.cp * cfg.pp * cfg.dp;
  if (n_ranks > (1u << 20))
    luaL_error(L, "%s: tp*%spp*dp = %I ranks is more than the 1,048,576 "
                  "supported", fn, cfg.cp > 1 ? "cp*" : "",
               (lua_Integer)n_ranks);
  const char *ref_name = jsl_opt_str(L, 1, fn, "gpu", "A100-SXM4-80GB");
  const GpuSpec *ref = gpu_catalogue_lookup(s->catalogue, ref_name, &err);
  if (ref == NULL) {
    g_prefix_error(&err, "argument 'gpu': ");
    return jsl_raise_gerror(L, fn, err);
  }
  if (!gpt_config_validate(&cfg, &err))
    return jsl_raise_gerror(L, fn, err);
  {
    char what[160];
    g_snprintf(what, sizeof what, "%s tp%u pp%u dp%u (%" G_GUINT64_FORMAT
               " GPUs, %" G_GUINT64_FORMAT " ops%s)", model ? model : "gpt",
               cfg.tp, cfg.pp, cfg.dp, n_ranks,
               gpt_stored_ops(&cfg), cfg.fold ? " held, folded" : "");
    if (!js_memory_check(s->max_memory, gpt_estimate_bytes(&cfg), what, &err))
      return jsl_raise_gerror(L, fn, err);
  }
  gboolean defaulted = lua_getfield(L, 1, "gpu") == LUA_TNIL;
  lua_pop(L, 1);
  LWorkload *u = jsl_new_workload(L);
  u->w = gpt_generate(&cfg, ref, &err);
  if (u->w == NULL)
    return jsl_raise_gerror(L, fn, err);
  u->label = g_strdup_printf("%s tp%u pp%u dp%u mb%u%s",
                             model ? model : "gpt", cfg.tp, cfg.pp, cfg.dp,
                             cfg.microbatches, cfg.fold ? " folded" : "");
  u->ref_defaulted = defaulted;
  GptMemoryRecipe recipe = gpt_memory_recipe_from_config(&cfg);
  u->gpu_memory = gpt_memory_new(&cfg, &recipe);
  u->params = gpt_n_params(&cfg);
  u->model_flops = gpt_megatron_flops(&cfg);
  return 1;
}

/* ---- js.gpu / js.gpus ------------------------------------------------------------ */

static void set_param(lua_State *L, const char *k, const GpuParam *p)
{
  jsl_set_num(L, k, p->v);
}

static int l_gpu(lua_State *L)
{
  const char *fn = "js.gpu";
  JsSession *s = jsl_session(L);
  const char *name = luaL_checkstring(L, 1);
  GError *err = NULL;
  const GpuSpec *g = gpu_catalogue_lookup(s->catalogue, name, &err);
  if (g == NULL)
    return jsl_raise_gerror(L, fn, err);
  lua_createtable(L, 0, 24);
  lua_pushstring(L, g->name);
  lua_setfield(L, -2, "name");
  set_param(L, "sm_min_mhz", &g->sm_min_mhz);
  set_param(L, "sm_max_mhz", &g->sm_max_mhz);
  set_param(L, "sm_step_mhz", &g->sm_step_mhz);
  set_param(L, "sm_default_mhz", &g->sm_default_mhz);
  lua_createtable(L, (int)g->n_mem_clocks, 0);
  for (guint i = 0; i < g->n_mem_clocks; i++) {
    lua_pushnumber(L, g->mem_mhz[i].v);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "mem_mhz");
  set_param(L, "n_sm", &g->n_sm);
  set_param(L, "mem_bw_gbps", &g->mem_bw_gbps);
  set_param(L, "power_limit_w", &g->power_limit_w);
  set_param(L, "power_min_w", &g->power_min_w);
  set_param(L, "power_max_w", &g->power_max_w);
  set_param(L, "idle_power_w", &g->idle_power_w);
  set_param(L, "blocking_power_w", &g->blocked_power_w);
  set_param(L, "comm_power_w", &g->comm_power_w);
  set_param(L, "switch_latency_ms", &g->switch_latency_ms);
  jsl_set_num(L, "peak_tflops", gpu_peak_tensor_flops(g, g->sm_max_mhz.v) * 1e-12);
  jsl_set_num(L, "mfu_peak_tflops", gpu_mfu_peak_flops(g, NULL) * 1e-12);
  GString *d = g_string_new(NULL);
  gpu_spec_describe(g, d);
  lua_pushstring(L, d->str);
  g_string_free(d, TRUE);
  lua_setfield(L, -2, "description");
  return 1;
}

static int l_gpus(lua_State *L)
{
  JsSession *s = jsl_session(L);
  g_autoptr(GPtrArray) names = gpu_catalogue_names(s->catalogue);
  lua_createtable(L, (int)names->len, 0);
  for (guint i = 0; i < names->len; i++) {
    lua_pushstring(L, g_ptr_array_index(names, i));
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* ---- js.results -------------------------------------------------------------- */

static int results_gc(lua_State *L)
{
  LResults *u = luaL_checkudata(L, 1, RESULTS_MT);
  if (u->t != NULL)
    res_table_free(u->t);
  u->t = NULL;
  return 0;
}

static int compare_names(const void *a, const void *b)
{
  return strcmp(((const ResValue *)a)->name, ((const ResValue *)b)->name);
}

/* results:append(row): row is a table of column = value (number, integer,
 * boolean or string); columns are stored in name order. */
static int results_append(lua_State *L)
{
  const char *fn = "results:append";
  LResults *u = luaL_checkudata(L, 1, RESULTS_MT);
  if (u->t == NULL)
    luaL_error(L, "%s: the results table is closed", fn);
  luaL_checktype(L, 2, LUA_TTABLE);
  /* The row array lives in Lua memory (a userdata), so raising an error
   * halfway through leaks nothing. */
  guint n = 0;
  lua_pushnil(L);
  while (lua_next(L, 2) != 0) {
    lua_pop(L, 1);
    n++;
  }
  if (n == 0)
    luaL_error(L, "%s: the row has no columns", fn);
  ResValue *row = lua_newuserdatauv(L, sizeof(ResValue) * n, 0);
  memset(row, 0, sizeof(ResValue) * n);
  guint k = 0;
  lua_pushnil(L);
  while (lua_next(L, 2) != 0) {
    if (lua_type(L, -2) != LUA_TSTRING)
      luaL_error(L, "%s: column names must be strings", fn);
    ResValue *v = &row[k++];
    if (!jsl_value_from_top(L, lua_tostring(L, -2), v))
      luaL_error(L, "%s: column '%s' has a %s value; allowed: number, "
                    "integer, boolean, string", fn, v->name,
                 luaL_typename(L, -1));
    lua_pop(L, 1);
  }
  qsort(row, n, sizeof(ResValue), compare_names);
  GError *err = NULL;
  if (!res_table_append(u->t, row, n, &err))
    return jsl_raise_gerror(L, fn, err);
  return 0;
}

static int results_close(lua_State *L)
{
  LResults *u = luaL_checkudata(L, 1, RESULTS_MT);
  if (u->t == NULL)
    return 0;
  GError *err = NULL;
  ResTable *t = u->t;
  u->t = NULL;
  if (!res_table_close(t, &err))
    return jsl_raise_gerror(L, "results:close", err);
  return 0;
}

static int results_rows(lua_State *L)
{
  LResults *u = luaL_checkudata(L, 1, RESULTS_MT);
  lua_pushinteger(L, u->t ? (lua_Integer)res_table_rows(u->t) : 0);
  return 1;
}

static int l_results(lua_State *L)
{
  const char *fn = "js.results";
  JsSession *s = jsl_session(L);
  /* Strings only: luaL_checkstring would turn js.results(5) into a file
   * named "5". */
  if (lua_type(L, 1) != LUA_TSTRING)
    luaL_error(L, "%s: argument 1 must be the results file name (got %s)", fn,
               luaL_typename(L, 1));
  if (!lua_isnoneornil(L, 2) && lua_type(L, 2) != LUA_TSTRING)
    luaL_error(L, "%s: argument 2 must be the table name (got %s)", fn,
               luaL_typename(L, 2));
  const char *path = lua_tostring(L, 1);
  const char *table = luaL_optstring(L, 2, "results");
  ResMode mode = RES_MODE_APPEND;
  if (!lua_isnoneornil(L, 3)) {
    static const char *const keys[] = {"mode", NULL};
    static const char *const modes[] = {"append", "replace", NULL};
    jsl_check_keys(L, 3, fn, keys);
    mode = (ResMode)jsl_opt_choice(L, 3, fn, "mode", RES_MODE_APPEND, modes);
  }
  if (*table == '\0' || strchr(table, '/') != NULL)
    luaL_error(L, "%s: table name '%s' must be non-empty and contain no '/'",
               fn, table);
  jsl_check_write(L, fn, path, JS_FILE_RESULTS);
  ResMeta meta = {JOULESIM_VERSION, s->scenario_path, s->scenario_source,
                  s->seed, s->run_id, s->run_started};
  /* The owner first: an open table must belong to something the GC
   * frees before anything can raise (a memory error included), or it
   * would leak and leave its temporary file behind. */
  LResults *u = lua_newuserdatauv(L, sizeof *u, 0);
  u->t = NULL;
  luaL_setmetatable(L, RESULTS_MT);
  GError *err = NULL;
  u->t = res_table_open(path, table, mode, &meta, &err);
  if (u->t == NULL)
    return jsl_raise_gerror(L, fn, err);
  return 1;
}

/* ---- math.random on PCG ------------------------------------------------------- */

/* The registry key of the script's generator (math.random's state). */
#define SCRIPT_RNG_KEY "joulesim.script_rng"

static SimPcg *script_rng(lua_State *L)
{
  return luaL_checkudata(L, lua_upvalueindex(1), RNG_MT);
}

/* math.random([m [, n]]) with Lua's semantics, drawn from a PCG stream. */
static int l_random(lua_State *L)
{
  SimPcg *rng = script_rng(L);
  lua_Integer lo, hi;
  switch (lua_gettop(L)) {
  case 0:
    lua_pushnumber(L, sim_pcg_double(rng));
    return 1;
  case 1:
    lo = 1;
    hi = luaL_checkinteger(L, 1);
    if (hi == 0) { /* Lua 5.4: random(0) is a random integer */
      guint64 v = (guint64)sim_pcg_next(rng) << 32 | sim_pcg_next(rng);
      lua_pushinteger(L, (lua_Integer)v);
      return 1;
    }
    break;
  case 2:
    lo = luaL_checkinteger(L, 1);
    hi = luaL_checkinteger(L, 2);
    break;
  default:
    return luaL_error(L, "math.random: wrong number of arguments");
  }
  luaL_argcheck(L, lo <= hi, 1, "interval is empty");
  guint64 span = (guint64)hi - (guint64)lo;
  guint64 v;
  if (span < G_MAXUINT32) {
    v = sim_pcg_bounded(rng, (guint32)(span + 1));
  } else {
    /* 64-bit rejection sampling from two draws. */
    guint64 lim = span == G_MAXUINT64 ? G_MAXUINT64
                                      : G_MAXUINT64 - (G_MAXUINT64 % (span + 1)) - 1;
    do
      v = (guint64)sim_pcg_next(rng) << 32 | sim_pcg_next(rng);
    while (span != G_MAXUINT64 && v > lim);
    if (span != G_MAXUINT64)
      v %= span + 1;
  }
  lua_pushinteger(L, (lua_Integer)((guint64)lo + v));
  return 1;
}

static int l_randomseed(lua_State *L)
{
  SimPcg *rng = script_rng(L);
  gboolean given = !lua_isnoneornil(L, 1);
  guint64 n = given ? (guint64)luaL_checkinteger(L, 1) : 0;
  sim_pcg_for_entity(rng, js_session_seed(jsl_session(L), given, n),
                     SIM_PCG_SCRIPT, 0);
  return 0;
}

void jsl_reseed_script(lua_State *L, guint64 seed)
{
  if (lua_getfield(L, LUA_REGISTRYINDEX, SCRIPT_RNG_KEY) == LUA_TUSERDATA)
    sim_pcg_for_entity(lua_touserdata(L, -1), seed, SIM_PCG_SCRIPT, 0);
  lua_pop(L, 1);
}

static void install_random(lua_State *L, guint64 seed)
{
  lua_getglobal(L, "math");
  if (!lua_istable(L, -1)) {
    lua_pop(L, 1);
    return;
  }
  SimPcg *rng = lua_newuserdatauv(L, sizeof *rng, 0);
  luaL_newmetatable(L, RNG_MT);
  lua_setmetatable(L, -2);
  sim_pcg_for_entity(rng, seed, SIM_PCG_SCRIPT, 0);
  /* Reachable from C too (jsl_reseed_script), whatever the script does
   * to math. */
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, SCRIPT_RNG_KEY);
  lua_pushvalue(L, -1);
  lua_pushcclosure(L, l_random, 1);
  lua_setfield(L, -3, "random");
  lua_pushcclosure(L, l_randomseed, 1);
  lua_setfield(L, -2, "randomseed");
  lua_pop(L, 1);
}

/* ---- module ----------------------------------------------------------------- */

static const luaL_Reg module_funcs[] = {
  {"cluster", l_cluster}, {"gpt", l_gpt},         {"gpu", l_gpu},
  {"gpus", l_gpus},       {"results", l_results}, {"node_power", l_node_power},
  {"node", l_node},
  {NULL, NULL}};

static void new_metatable(lua_State *L, const char *name, lua_CFunction gc,
                          lua_CFunction index, lua_CFunction tostr)
{
  luaL_newmetatable(L, name);
  lua_pushcfunction(L, gc);
  lua_setfield(L, -2, "__gc");
  if (index != NULL) {
    lua_pushcfunction(L, index);
    lua_setfield(L, -2, "__index");
  }
  if (tostr != NULL) {
    lua_pushcfunction(L, tostr);
    lua_setfield(L, -2, "__tostring");
  }
  lua_pop(L, 1);
}

/* Loads an embedded Lua file of lua/ from the GResource bundle. */
static int load_resource(lua_State *L, const char *name)
{
  g_autofree char *path = g_strconcat("/joulesim/", name, NULL);
  g_autoptr(GBytes) b = g_resource_lookup_data(
      js_res_get_resource(), path, G_RESOURCE_LOOKUP_FLAGS_NONE, NULL);
  g_assert(b != NULL); /* embedded at build time */
  gsize n;
  const char *src = g_bytes_get_data(b, &n);
  g_autofree char *chunk = g_strconcat("=[joulesim ", name, "]", NULL);
  return luaL_loadbuffer(L, src, n, chunk);
}

/* js.classes: the names of the op classes in SimOpClass order, from
 * sim/workload.c's one table of them (js.summary lists by_class in it). */
static void push_classes(lua_State *L)
{
  lua_createtable(L, SIM_CLASS_COUNT, 0);
  for (int k = 0; k < SIM_CLASS_COUNT; k++) {
    lua_pushstring(L, sim_class_name((SimOpClass)k));
    lua_rawseti(L, -2, k + 1);
  }
}

/* require "joulesim": builds the module table, then runs the prelude with
 * it as argument. */
static int open_joulesim(lua_State *L)
{
  luaL_newlib(L, module_funcs);
  lua_pushstring(L, JOULESIM_VERSION);
  lua_setfield(L, -2, "version");
  push_classes(L);
  lua_setfield(L, -2, "classes");
  jsl_register_owner(L);
  jsl_register_simulate(L);
  jsl_register_policy(L);
  jsl_register_gpu(L);
  jsl_register_trace(L);
  jsl_register_profile(L);
  jsl_register_pipeline(L);
  jsl_register_sweep(L);
  jsl_register_csv(L);
  jsl_register_numeric(L);
  jsl_protect_metatables(L);
  if (load_resource(L, "prelude.lua") != LUA_OK)
    return lua_error(L);
  lua_pushvalue(L, -2);
  lua_call(L, 1, 0);
  return 1;
}

static void open_state(lua_State *L, JsSession *s)
{
  if (s->sandbox)
    jsl_open_sandbox(L); /* lua/sandbox.c: the allow-list */
  else
    luaL_openlibs(L);
  jsl_open_print(L);
  jsl_open_guards(L);
  new_metatable(L, CLUSTER_MT, cluster_gc, cluster_index, cluster_tostring);
  new_metatable(L, WORKLOAD_MT, workload_gc, workload_index,
                workload_tostring);
  luaL_newmetatable(L, RESULTS_MT);
  lua_pushcfunction(L, results_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, results_gc);
  lua_setfield(L, -2, "__close");
  lua_newtable(L);
  lua_pushcfunction(L, results_append);
  lua_setfield(L, -2, "append");
  lua_pushcfunction(L, results_close);
  lua_setfield(L, -2, "close");
  lua_pushcfunction(L, results_rows);
  lua_setfield(L, -2, "rows");
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  install_random(L, s->seed);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, open_joulesim);
  lua_setfield(L, -2, "joulesim");
  lua_pop(L, 1);
  jsl_protect_metatables(L);
}

static int traceback(lua_State *L)
{
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
      return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)",
                          luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

/* Runs the function on top of the stack with a traceback handler, under
 * the session's limits. */
static gboolean pcall_top(lua_State *L, JsSession *s, int nargs,
                          GError **error)
{
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, traceback);
  lua_insert(L, base);
  jsl_limits_begin(L, s);
  int rc = lua_pcall(L, nargs, 0, base);
  jsl_limits_end(L, s);
  lua_remove(L, base);
  if (rc != LUA_OK) {
    const char *msg = lua_tostring(L, -1) ? lua_tostring(L, -1) : "error";
    g_autofree char *why = jsl_limits_explain(s, msg);
    g_set_error(error, JS_ERROR, JS_ERROR_SCRIPT, "%s",
                why != NULL ? why : msg);
    lua_pop(L, 1);
    return FALSE;
  }
  return TRUE;
}

/* A state for s with the joulesim module, or NULL with an error. */
static lua_State *new_state(JsSession *s, GError **error)
{
  lua_State *L = jsl_state_new(s);
  if (L == NULL) {
    g_set_error(error, JS_ERROR, JS_ERROR_SCRIPT, "out of memory");
    return NULL;
  }
  open_state(L, s);
  return L;
}

/* Runs the chunk src[0..len) named `chunk` (arg[0] = path, arg[-1] = the
 * binary) with script arguments argv[0..argc), recording path and source in s (results files
 * store them). */
static gboolean run_chunk(JsSession *s, const char *path, const char *chunk,
                          const char *src, gsize len, int argc, char **argv,
                          GError **error)
{
  g_free(s->scenario_path);
  s->scenario_path = g_strdup(path);
  g_free(s->scenario_source);
  s->scenario_source = g_strndup(src, len);
  lua_State *L = new_state(s, error);
  if (L == NULL)
    return FALSE;
  lua_createtable(L, argc, 2);
  lua_pushstring(L, path);
  lua_rawseti(L, -2, 0);
  /* arg[-1]: the running binary, where lua.c puts the interpreter, so a
   * script or an embedded program finds what was built or installed with
   * it wherever it is run from (tools/fidelity.lua's data).  Absent where
   * /proc/self/exe cannot be read. */
  g_autofree char *exe = g_file_read_link("/proc/self/exe", NULL);
  if (exe != NULL) {
    lua_pushstring(L, exe);
    lua_rawseti(L, -2, -1);
  }
  for (int i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setglobal(L, "arg");
  gboolean ok;
  if (luaL_loadbufferx(L, src, len, chunk, "t") != LUA_OK) {
    /* Syntax errors start with "path:line:"; others (a binary chunk) get
     * the path here. */
    const char *msg = lua_tostring(L, -1);
    gboolean located = g_str_has_prefix(msg, path) &&
                       msg[strlen(path)] == ':';
    g_set_error(error, JS_ERROR, JS_ERROR_SCRIPT, "%s%s%s",
                located ? "" : path, located ? "" : ": ", msg);
    ok = FALSE;
  } else {
    for (int i = 0; i < argc; i++)
      lua_pushstring(L, argv[i]);
    ok = pcall_top(L, s, argc, error);
  }
  lua_close(L);
  return ok;
}

gboolean js_run_script(JsSession *s, const char *path, int argc,
                       char **argv, GError **error)
{
  g_autofree char *src = NULL;
  gsize len = 0;
  /* Opened once (io/input.h: a FIFO is refused, never waited on), and a
   * script over 256 MiB is refused from its size before it is read. */
  IoInput in;
  if (!io_input_open(&in, path, "lua: scenario", JS_ERROR, JS_ERROR_IO,
                     error))
    return FALSE;
  gboolean read = io_input_read_all(&in, path, 256u << 20, "a script",
                                    "lua: scenario read", JS_ERROR,
                                    JS_ERROR_IO, &src, &len, error);
  io_input_close(&in);
  if (!read)
    return FALSE;
  g_autofree char *chunk = g_strconcat("@", path, NULL);
  return run_chunk(s, path, chunk, src, len, argc, argv, error);
}

gboolean js_run_string(JsSession *s, const char *chunkname, const char *src,
                       GError **error)
{
  lua_State *L = new_state(s, error);
  if (L == NULL)
    return FALSE;
  gboolean ok;
  if (luaL_loadbufferx(L, src, strlen(src), chunkname, "t") != LUA_OK) {
    g_set_error(error, JS_ERROR, JS_ERROR_SCRIPT, "%s", lua_tostring(L, -1));
    ok = FALSE;
  } else {
    ok = pcall_top(L, s, 0, error);
  }
  lua_close(L);
  return ok;
}

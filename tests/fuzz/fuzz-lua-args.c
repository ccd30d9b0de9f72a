/* tests/fuzz/fuzz-lua-args.c -- libFuzzer target: the argument checks of
 * the Lua binding (the C files of lua/, lua/luautil.c, lua/prelude.lua).
 *
 * The input is a small program in bytes that this file turns into a Lua
 * script calling the js.* functions -- js.cluster, js.gpt, js.simulate,
 * the js.policy constructors, js.gpu(.define), js.results and its methods,
 * js.trace.*, js.profile.* and profile methods, js.validate*, js.pipeline,
 * js.perseus_frontier (and fr:plan), js.pipeline_run, js.compare,
 * js.summary, js.sweep, math.random -- with argument tables built from the
 * input: mostly the function's own argument names with values of the
 * expected kind (so calls get past the first check and reach the deep
 * ones), and sometimes anything: wrong types, unknown and misspelt keys,
 * integer keys, NaN and infinities, integer boundaries, huge and empty
 * strings, nested tables, Lua functions that return garbage, raise string
 * or table errors or loop forever, userdata of the wrong kind, and results
 * of earlier calls.  FUZZ_VERBOSE=1 prints the generated script.
 *
 * The script runs through js_run_string in the session that
 * `joulesim run --sandbox --max-instructions FUZZ_LUA_BUDGET` builds
 * (lua/sandbox.c): the allow-listed globals only, files confined to the
 * working directory, and once the budget is spent every instruction
 * raises "--max-instructions ... reached".  Every call runs as
 * `CK(pcall(function() local r = CALL; return r end))`; CK requires a
 * failure to be a clean Lua error: a string that starts with the script
 * position "fuzz:LINE:" (errors carry the script line), or the table
 * errors the generated functions raise themselves, or the budget.
 * Anything else -- a crash, a sanitizer report, a leak after lua_close,
 * an error without position, a script that dies outside CK -- is a
 * finding.
 *
 * Files: the process works in work/ of the scratch directory during
 * each input, and that is the sandbox's one writable directory.  The
 * generated file names are mostly plain names there (strings never
 * contain '/'), and one in eight an escape attempt (escape_paths: "..",
 * links pointing out, /etc/passwd).  The scratch directory around work/
 * is the canary: after every input it must hold victim.txt, unchanged,
 * and nothing else, or the input is a finding.  work/ also holds small
 * inputs the script may name: p.csv (a Perseus profile), k.csv (per-kernel
 * profile), m.csv (a measured iteration), s.csv and w.csv (NVML samples
 * and windows), k.json (a Kineto trace).  Sizes stay small: the integer
 * values given to size-like arguments (GPUs, layers, microbatches,
 * samples, ...) are small or out of range, never huge-but-valid, so every
 * input runs in milliseconds; the point is the checks, not big runs.
 */
#include "tests/fuzz/fuzz.h"
#include "lua/bind.h"
#include "run/session.h"

#include <fcntl.h>
#include <unistd.h>

#define FUZZ_LUA_BUDGET 2000000
/* Known, reported (docs/fuzzing.md "Open findings"): js.compare and
 * js.summary (lua/prelude.lua) compute on the fields of their arguments
 * without checking them, so a table that merely looks like a result fails
 * inside the prelude ("[joulesim prelude.lua]:64: attempt to perform
 * arithmetic on a nil value"), not at the script line.  Tolerated until
 * the prelude is fixed; set to 0 then. */
#ifndef FUZZ_LUA_ALLOW_PRELUDE_POSITION
#define FUZZ_LUA_ALLOW_PRELUDE_POSITION 1
#endif
#define FUZZ_LUA_MAX_STMTS 6
#define FUZZ_LUA_MAX_DEPTH 3
#define FUZZ_LUA_MAX_NODES 200

/* ---- vocabulary ---------------------------------------------------------- */

typedef enum {
  H_ANY = 0, H_INT, H_COST, H_NUM, H_FRAC, H_BOOL, H_GPU, H_MODEL, H_SCHED,
  H_NET, H_GRAN, H_FIT, H_MODE, H_POLNAME, H_CLUSTER, H_WORKLOAD, H_PROFILE,
  H_POLICY, H_FUNC, H_PATH, H_VARIAB, H_STRAGGLERS, H_UNCERT, H_TIMELINE,
  H_RESULT, H_GRID, H_POINTS, H_RANGE2, H_STR, H_GPUS, H_WINDOW, H_CLASS
} Hint;

typedef struct {
  const char *key;
  Hint hint;
} KeyHint;

/* What each argument name usually holds.  Size-like names are H_COST. */
static const KeyHint key_hints[] = {
  {"gpu", H_GPU}, {"nodes", H_COST}, {"gpus_per_node", H_COST},
  {"gpus", H_COST}, {"network", H_NET}, {"power_limit_w", H_NUM},
  {"idle_power_w", H_NUM}, {"blocking_power_w", H_NUM},
  {"comm_power_w", H_NUM}, {"switch_latency_ms", H_NUM},
  {"variability", H_VARIAB}, {"perf", H_FRAC}, {"power", H_FRAC},
  {"model", H_MODEL}, {"layers", H_COST}, {"hidden", H_COST},
  {"heads", H_COST}, {"vocab", H_COST}, {"seq_len", H_COST},
  {"microbatch_size", H_COST}, {"microbatches", H_COST}, {"tp", H_COST},
  {"pp", H_COST}, {"dp", H_COST}, {"schedule", H_SCHED},
  {"recompute", H_BOOL}, {"dp_bucket_mb", H_NUM}, {"dp_overlap", H_BOOL},
  {"chunks", H_COST}, {"fold", H_BOOL}, {"cluster", H_CLUSTER},
  {"workload", H_WORKLOAD}, {"policy", H_POLICY}, {"iterations", H_COST},
  {"seed", H_INT}, {"stragglers", H_STRAGGLERS}, {"timeline", H_TIMELINE},
  {"uncertainty", H_UNCERT}, {"profile", H_PROFILE}, {"samples", H_COST},
  {"level", H_FRAC}, {"fit", H_FIT}, {"path", H_PATH}, {"window", H_WINDOW},
  {"mode", H_MODE}, {"name", H_POLNAME}, {"sm", H_INT}, {"mem", H_INT},
  {"watts", H_NUM}, {"slowdown", H_FRAC}, {"granularity", H_GRAN},
  {"min_segment_ms", H_NUM}, {"fn", H_FUNC}, {"straggler_aware", H_BOOL},
  {"lag", H_COST}, {"resolution", H_FRAC}, {"kernel", H_BOOL},
  {"eta", H_FRAC}, {"step_w", H_NUM}, {"stages", H_COST},
  {"activation_bytes", H_NUM}, {"grad_bytes", H_NUM}, {"exact", H_BOOL},
  {"pipeline", H_COST}, {"from_iteration", H_COST},
  {"to_iteration", H_COST}, {"rate", H_FRAC}, {"duration", H_RANGE2},
  {"holdout", H_FRAC}, {"folds", H_COST}, {"out", H_PATH},
  {"save_gpu", H_STR}, {"save_gpu_file", H_PATH}, {"points", H_POINTS},
  {"gpu_name", H_GPU}, {"measured", H_PATH}, {"result", H_RESULT},
  {"grid", H_GRID}, {"run", H_FUNC}, {"table", H_STR}, {"jobs", H_COST},
  {"retry_failed", H_BOOL}, {"progress", H_BOOL}, {"base", H_GPU},
  {"source", H_STR}, {"description", H_STR}, {"mem_mhz", H_ANY},
  {"sm_max_mhz", H_NUM}, {"sm_min_mhz", H_NUM}, {"sm_step_mhz", H_NUM},
  {"n_sm", H_COST}, {"eff_compute", H_ANY}, {"activity.softmax", H_FRAC},
  {"peak_tflops", H_NUM}, {"iteration", H_ANY}, {"comm_recorded", H_BOOL},
  {"class", H_CLASS},
};

static const char *const kv_cluster[] = {
  "gpu", "nodes", "gpus_per_node", "gpus", "network", "power_limit_w",
  "idle_power_w", "blocking_power_w", "comm_power_w", "switch_latency_ms",
  "variability", NULL};
static const char *const kv_gpt[] = {
  "model", "layers", "hidden", "heads", "vocab", "seq_len",
  "microbatch_size", "microbatches", "tp", "pp", "dp", "schedule",
  "recompute", "gpu", "dp_bucket_mb", "dp_overlap", "chunks", "fold", NULL};
static const char *const kv_simulate[] = {
  "cluster", "workload", "policy", "iterations", "seed", "stragglers",
  "variability", "switch_latency_ms", "timeline", "uncertainty", NULL};
static const char *const kv_policy[] = {
  "name", "sm", "mem", "watts", "slowdown", "switch_latency_ms",
  "granularity", "min_segment_ms", "fn", "straggler_aware", "lag",
  "resolution", "kernel", "eta", "step_w", NULL};
static const char *const kv_define[] = {
  "name", "base", "source", "description", "power_limit_w", "idle_power_w",
  "blocking_power_w", "sm_max_mhz", "sm_min_mhz", "sm_step_mhz", "mem_mhz",
  "n_sm", "eff_compute", "activity.softmax", "peak_tflops", NULL};
static const char *const kv_import[] = {"gpu", "iteration", "comm_recorded",
                                        NULL};
static const char *const kv_validate[] = {
  "profile", "gpu", "holdout", "folds", "fit", "seed", "power_limit_w",
  "out", "save_gpu", "save_gpu_file", "points", NULL};
static const char *const kv_interval[] = {
  "profile", "gpu", "fit", "samples", "level", "seed", "power_limit_w",
  "fn", "gpu_name", NULL};
static const char *const kv_vrun[] = {"measured", "result", NULL};
static const char *const kv_pipeline[] = {
  "profile", "microbatches", "schedule", "stages", "dp", "activation_bytes",
  "grad_bytes", NULL};
static const char *const kv_frontier[] = {"cluster", "workload",
                                          "resolution", "exact", NULL};
static const char *const kv_prun[] = {
  "cluster", "workload", "policy", "slowdown", "straggler_aware", "lag",
  "eta", "step_w", "stragglers", "iterations", "seed", "switch_latency_ms",
  "resolution", NULL};
static const char *const kv_sweep[] = {
  "grid", "points", "run", "out", "table", "jobs", "mode", "retry_failed",
  "progress", NULL};
static const char *const kv_uncert[] = {"profile", "samples", "level", "fit",
                                        "seed", "power_limit_w", NULL};
static const char *const kv_timeline[] = {"path", "gpus", "window", NULL};
static const char *const kv_variab[] = {"perf", "power", NULL};
static const char *const kv_straggler[] = {
  "gpu", "pipeline", "slowdown", "from_iteration", "to_iteration", "rate",
  "duration", NULL};
static const char *const kv_result[] = {
  "time_s", "energy_j", "iteration_time_s", "energy_per_iteration_j",
  "avg_power_w", "policy", "gpu", "n_gpus", "iterations", "by_class",
  "per_gpu", "tokens_per_s", NULL};

static const char *const gpu_names[] = {
  "A100-SXM4-40GB", "A100-SXM4-80GB", "A100-PCIE-80GB", "H100-SXM5-80GB",
  "H100-PCIE-80GB", "A40", "RTX-3080-Ti", "a100-sxm4-80gb", "NOPE", "",
  "FUZZ-GPU"};
static const char *const model_names[] = {
  "gpt3-125m", "gpt3-350m", "gpt3-760m", "gpt3-1.3b", "gpt3-2.7b",
  "gpt3-125", "llama"};
static const char *const sched_names[] = {"1f1b", "gpipe", "interleaved",
                                          "1F1B", ""};
static const char *const net_names[] = {"dgx-a100", "dgx-h100", "pcie",
                                        "infiniband"};
static const char *const gran_names[] = {"name", "op", "kernel"};
static const char *const fit_names[] = {"none", "time", "power", "all",
                                        "both"};
static const char *const mode_names[] = {"append", "replace", "overwrite"};
static const char *const policy_names[] = {
  "max", "auto", "fixed", "powercap", "iteration", "pass", "kernel",
  "custom", "perseus", "envpipe", "zeus", "maxx"};
static const char *const path_names[] = {
  "p.csv", "k.csv", "m.csv", "s.csv", "w.csv", "k.json", "t.h5", "out.h5",
  "x.json", "nosuch.csv", "", ".", "..", "p.csv.h5"};
/* Paths that try to leave the sandbox (the only strings with '/'): out
 * of the working directory into the canary (see fuzz_lua_args_one),
 * through links to it, and to system files. */
static const char *const escape_paths[] = {
  "../x.h5", "../victim.txt", "up/x.h5", "up/victim.txt", "up-file",
  "up-dangling", "/etc/passwd", "../work/../x.json", "up/sub/x.h5"};
static const char *const class_names[] = {"gemm", "attention", "norm",
                                          "comm", "other", "nope"};
static const char *const misc_strings[] = {
  "0,4-7", "0-3", "10ms:20ms", "1:0", "all", "ProfilerStep#1", "%s%n",
  "stage0.forward", "forward", "backward", "gemm", "n_gpus", "time_s",
  "sweep", ".hidden", "a,b", "\xff\xfe", "\xe2\x82\xac"};

/* Policy constructors callable as values. */
static const char *const policy_ctors[] = {
  "max", "auto", "fixed", "powercap", "iteration", "pass", "kernel",
  "custom", "perseus", "envpipe", "zeus"};

/* Prebuilt objects (declared in the preamble only when used). */
enum {
  O_C = 1 << 0,    /* 4-GPU cluster */
  O_C2 = 1 << 1,   /* 2-GPU cluster */
  O_W = 1 << 2,    /* js.gpt workload, 4 ranks (tp2 pp2) */
  O_P = 1 << 3,    /* Perseus profile p.csv */
  O_PK = 1 << 4,   /* per-kernel profile k.csv */
  O_PW = 1 << 5,   /* js.pipeline workload of P, 2 stages */
  O_RES = 1 << 6,  /* results table */
  O_R = 1 << 7,    /* js.simulate result of W on C */
  O_FR = 1 << 8,   /* Perseus frontier of PW on C2 */
};

static const struct {
  guint bit, needs;
  const char *name, *decl;
} objects[] = {
  {O_C, 0, "C", "js.cluster{gpus = 4, gpus_per_node = 4}"},
  {O_C2, 0, "C2", "js.cluster{gpus = 2, gpus_per_node = 2}"},
  {O_W, 0, "W", "js.gpt{model = \"gpt3-125m\", layers = 2, tp = 2, pp = 2, "
                "microbatches = 2, seq_len = 128}"},
  {O_P, 0, "P", "js.profile.load(\"p.csv\")"},
  {O_PK, 0, "PK", "js.profile.load(\"k.csv\")"},
  {O_PW, O_P, "PW", "js.pipeline{profile = P, microbatches = 2}"},
  {O_RES, 0, "RES", "js.results(\"res.h5\", \"t\")"},
  {O_R, O_C | O_W, "R", "js.simulate{cluster = C, workload = W}"},
  {O_FR, O_C2 | O_PW, "FR", "js.perseus_frontier{cluster = C2, workload = "
                            "PW}"},
};

/* ---- the generator -------------------------------------------------------- */

typedef struct {
  FuzzIn in;
  GString *out;
  guint used;       /* O_* bits */
  guint depth;
  guint nodes;      /* values emitted (bounded) */
  guint stmt;       /* statements so far (V[1..stmt] exist) */
} Gen;

static void gen_value(Gen *g, Hint h);

#define PICK(g, arr) ((arr)[fuzz_u8(&(g)->in) % G_N_ELEMENTS(arr)])

/* A Lua string literal; '/' never appears (see the top of the file). */
static void emit_str(Gen *g, const char *s, size_t len)
{
  g_string_append_c(g->out, '"');
  for (size_t i = 0; i < len; i++) {
    guchar c = (guchar)s[i];
    if (c == '/')
      c = '_';
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
      g_string_append_c(g->out, (char)c);
    else
      g_string_append_printf(g->out, "\\%03u", c);
  }
  g_string_append_c(g->out, '"');
}

static void emit_cstr(Gen *g, const char *s)
{
  emit_str(g, s, strlen(s));
}

/* A file name: mostly the scratch inputs and outputs, one in eight an
 * escape attempt (values below 224 pick as before the sandbox was
 * fuzzed, so older corpus inputs keep their meaning). */
static void gen_path(Gen *g)
{
  guint8 b = fuzz_u8(&g->in);
  if (b >= 224)
    g_string_append_printf(g->out, "\"%s\"",
                           escape_paths[b % G_N_ELEMENTS(escape_paths)]);
  else
    emit_cstr(g, path_names[b % G_N_ELEMENTS(path_names)]);
}

static void use(Gen *g, guint bit, const char *name)
{
  g->used |= bit;
  g_string_append(g->out, name);
}

static void gen_int(Gen *g)
{
  static const char *const special[] = {
    "-1", "65536", "2147483647", "2147483648", "4294967295", "4294967296",
    "9007199254740993", "math.maxinteger", "math.mininteger",
    "-2147483648", "1000000", "-0"};
  guint8 t = fuzz_u8(&g->in);
  if (t < 160)
    g_string_append_printf(g->out, "%u", t % 17);
  else if (t < 230)
    g_string_append(g->out, special[t % G_N_ELEMENTS(special)]);
  else
    g_string_append_printf(g->out, "%" G_GINT64_FORMAT, fuzz_int(&g->in));
}

/* Sizes: small, or invalid (negative, zero, fractional, out of any
 * range), never huge-but-valid (see the top of the file). */
static void gen_cost(Gen *g)
{
  static const char *const bad[] = {
    "-1", "0", "1.5", "(0/0)", "(1/0)", "2147483648", "4294967297",
    "math.maxinteger", "math.mininteger", "1e300", "-0.0", "\"4\""};
  guint8 t = fuzz_u8(&g->in);
  if (t < 200)
    g_string_append_printf(g->out, "%u", 1 + t % 4);
  else
    g_string_append(g->out, bad[t % G_N_ELEMENTS(bad)]);
}

static void gen_num(Gen *g, gboolean frac)
{
  static const char *const special[] = {
    "0.5", "1.5", "-1", "0.0", "-0.0", "1e308", "-1e308", "(1/0)",
    "(-1/0)", "(0/0)", "1e-300", "0.01", "0.99", "100.0", "250", "400",
    "1e6", "1e15", "math.pi", "2^53", "-(2^63)", "1", "10", "0.1"};
  guint8 t = fuzz_u8(&g->in);
  if (frac && t < 128)
    g_string_append_printf(g->out, "%.3g", (t % 101) / 100.0);
  else if (t < 200)
    g_string_append(g->out, special[t % G_N_ELEMENTS(special)]);
  else
    gen_int(g);
}

static void gen_string(Gen *g)
{
  guint8 t = fuzz_u8(&g->in);
  switch (t % 8) {
  case 0: emit_cstr(g, PICK(g, gpu_names)); break;
  case 1: gen_path(g); break;
  case 2: emit_cstr(g, PICK(g, misc_strings)); break;
  case 3: emit_cstr(g, PICK(g, policy_names)); break;
  case 4: emit_cstr(g, PICK(g, model_names)); break;
  case 5:
    g_string_append(g->out, "string.rep(\"x\", 5000)");
    break;
  default: {
    g_autofree char *s = fuzz_str(&g->in, 64);
    emit_cstr(g, s);
    break;
  }
  }
}

static void gen_object(Gen *g)
{
  guint k = fuzz_u8(&g->in) % (G_N_ELEMENTS(objects) + 1);
  if (k == G_N_ELEMENTS(objects)) {
    /* An earlier statement's result (nil when it failed). */
    if (g->stmt == 0)
      g_string_append(g->out, "(nil)"); /* `nil[k]` would not parse */
    else
      g_string_append_printf(g->out, "V[%u]",
                             1 + fuzz_u8(&g->in) % g->stmt);
    return;
  }
  use(g, objects[k].bit, objects[k].name);
}

static void gen_function(Gen *g)
{
  guint8 t = fuzz_u8(&g->in);
  switch (t % 8) {
  case 0:
    g_string_append(g->out, "function(...) return ");
    gen_value(g, H_ANY);
    g_string_append(g->out, " end");
    break;
  case 1:
    g_string_append(g->out, "function() error(\"fuzz boom\") end");
    break;
  case 2:
    g_string_append(g->out, "function() error({fuzz_obj = true}) end");
    break;
  case 3:
    g_string_append(g->out, "function(...) return ... end");
    break;
  case 4:
    g_string_append(g->out, "function() while true do end end");
    break;
  case 5:
    g_string_append(g->out, "function(...) collectgarbage() return ");
    gen_value(g, H_ANY);
    g_string_append(g->out, ", ");
    gen_value(g, H_ANY);
    g_string_append(g->out, " end");
    break;
  case 6:
    /* A plausible policy function / sweep run / interval fn: a table or a
     * number. */
    g_string_append(g->out, "function(x) return ");
    if (t & 8)
      g_string_append(g->out, "{sm = 1410, mem = 1593, time_s = 1, "
                              "energy_j = 2, x = 1}");
    else
      gen_num(g, FALSE);
    g_string_append(g->out, " end");
    break;
  default:
    g_string_append(g->out, "function() coroutine.yield() end");
    break;
  }
}

/* A call of a policy constructor (js.policy.NAME{...}). */
static void gen_policy_call(Gen *g)
{
  g_string_append_printf(g->out, "js.policy.%s", PICK(g, policy_ctors));
  g_string_append_c(g->out, '(');
  gen_value(g, H_ANY);
  g_string_append_c(g->out, ')');
}

static Hint hint_of(const char *key)
{
  for (guint i = 0; i < G_N_ELEMENTS(key_hints); i++)
    if (strcmp(key_hints[i].key, key) == 0)
      return key_hints[i].hint;
  return H_ANY;
}

/* The entries of a table of named arguments ("k = v, " each): keys
 * mostly from `keys`. */
static void gen_entries(Gen *g, const char *const *keys)
{
  guint nk = 0;
  while (keys[nk] != NULL)
    nk++;
  guint n = fuzz_u8(&g->in) % 7;
  for (guint i = 0; i < n && g->nodes < FUZZ_LUA_MAX_NODES; i++) {
    guint8 t = fuzz_u8(&g->in);
    const char *key = NULL;
    if (t < 200 && nk > 0) {
      key = keys[t % nk];
    } else if (t < 225) {
      key = key_hints[t % G_N_ELEMENTS(key_hints)].key;
    } else if (t < 240) {
      /* A misspelt or unknown key. */
      g_autofree char *s = fuzz_str(&g->in, 24);
      g_string_append_c(g->out, '[');
      emit_cstr(g, s);
      g_string_append(g->out, "] = ");
      gen_value(g, H_ANY);
      g_string_append(g->out, ", ");
      continue;
    } else {
      /* A positional value. */
      gen_value(g, H_ANY);
      g_string_append(g->out, ", ");
      continue;
    }
    g_string_append_c(g->out, '[');
    emit_cstr(g, key);
    g_string_append(g->out, "] = ");
    /* Mostly the kind of value the key wants. */
    gen_value(g, (fuzz_u8(&g->in) < 210) ? hint_of(key) : H_ANY);
    g_string_append(g->out, ", ");
  }
}

/* A table of named arguments. */
static void gen_named(Gen *g, const char *const *keys)
{
  g_string_append_c(g->out, '{');
  gen_entries(g, keys);
  g_string_append_c(g->out, '}');
}

/* A list of n values of hint h. */
static void gen_list(Gen *g, Hint h, guint max)
{
  guint n = fuzz_u8(&g->in) % (max + 1);
  g_string_append_c(g->out, '{');
  for (guint i = 0; i < n && g->nodes < FUZZ_LUA_MAX_NODES; i++) {
    gen_value(g, h);
    g_string_append(g->out, ", ");
  }
  g_string_append_c(g->out, '}');
}

static void gen_value(Gen *g, Hint h)
{
  g->nodes++;
  if (g->depth >= FUZZ_LUA_MAX_DEPTH || g->nodes >= FUZZ_LUA_MAX_NODES) {
    /* Deep enough: scalars only. */
    if (h == H_COST)
      gen_cost(g);
    else
      gen_int(g);
    return;
  }
  g->depth++;
  switch (h) {
  case H_INT: gen_int(g); break;
  case H_COST: gen_cost(g); break;
  case H_NUM: gen_num(g, FALSE); break;
  case H_FRAC: gen_num(g, TRUE); break;
  case H_BOOL:
    g_string_append(g->out, fuzz_u8(&g->in) & 1 ? "true" : "false");
    break;
  case H_GPU: emit_cstr(g, PICK(g, gpu_names)); break;
  case H_MODEL: emit_cstr(g, PICK(g, model_names)); break;
  case H_SCHED: emit_cstr(g, PICK(g, sched_names)); break;
  case H_NET: emit_cstr(g, PICK(g, net_names)); break;
  case H_GRAN: emit_cstr(g, PICK(g, gran_names)); break;
  case H_FIT: emit_cstr(g, PICK(g, fit_names)); break;
  case H_MODE: emit_cstr(g, PICK(g, mode_names)); break;
  case H_POLNAME: emit_cstr(g, PICK(g, policy_names)); break;
  case H_CLASS: emit_cstr(g, PICK(g, class_names)); break;
  case H_CLUSTER: {
    guint8 t = fuzz_u8(&g->in);
    if (t < 150)
      use(g, O_C, "C");
    else if (t < 220)
      use(g, O_C2, "C2");
    else
      gen_object(g);
    break;
  }
  case H_WORKLOAD: {
    guint8 t = fuzz_u8(&g->in);
    if (t < 150)
      use(g, O_W, "W");
    else if (t < 220)
      use(g, O_PW, "PW");
    else
      gen_object(g);
    break;
  }
  case H_PROFILE: {
    guint8 t = fuzz_u8(&g->in);
    if (t < 100)
      use(g, O_P, "P");
    else if (t < 160)
      use(g, O_PK, "PK");
    else if (t < 230)
      emit_cstr(g, t & 1 ? "p.csv" : "k.csv");
    else
      gen_value(g, H_ANY);
    break;
  }
  case H_POLICY: {
    guint8 t = fuzz_u8(&g->in);
    if (t < 170)
      gen_policy_call(g);
    else if (t < 200)
      gen_named(g, kv_policy);
    else if (t < 230)
      emit_cstr(g, PICK(g, policy_names));
    else
      gen_value(g, H_ANY);
    break;
  }
  case H_FUNC: gen_function(g); break;
  case H_PATH: gen_path(g); break;
  case H_VARIAB: gen_named(g, kv_variab); break;
  case H_STRAGGLERS: {
    guint8 t = fuzz_u8(&g->in);
    if (t < 100) {
      g_string_append_c(g->out, '{');
      guint n = 1 + t % 3;
      for (guint i = 0; i < n; i++) {
        gen_named(g, kv_straggler);
        g_string_append(g->out, ", ");
      }
      g_string_append_c(g->out, '}');
    } else {
      gen_named(g, kv_straggler);
    }
    break;
  }
  case H_UNCERT: gen_named(g, kv_uncert); break;
  case H_TIMELINE: {
    guint8 t = fuzz_u8(&g->in);
    if (t < 80)
      emit_cstr(g, "x.json");
    else if (t < 120)
      g_string_append(g->out, t & 1 ? "true" : "false");
    else
      gen_named(g, kv_timeline);
    break;
  }
  case H_RESULT:
    if (fuzz_u8(&g->in) < 180)
      use(g, O_R, "R");
    else
      gen_named(g, kv_result);
    break;
  case H_GRID: {
    /* { key = {values}, ... } */
    guint n = fuzz_u8(&g->in) % 4;
    g_string_append_c(g->out, '{');
    for (guint i = 0; i < n; i++) {
      g_string_append_c(g->out, '[');
      if (fuzz_u8(&g->in) < 200)
        emit_cstr(g, PICK(g, misc_strings));
      else
        gen_int(g);
      g_string_append(g->out, "] = ");
      gen_list(g, H_ANY, 3);
      g_string_append(g->out, ", ");
    }
    g_string_append_c(g->out, '}');
    break;
  }
  case H_POINTS: gen_list(g, H_ANY, 3); break;
  case H_RANGE2:
    g_string_append_c(g->out, '{');
    gen_num(g, FALSE);
    g_string_append(g->out, ", ");
    gen_num(g, FALSE);
    g_string_append_c(g->out, '}');
    break;
  case H_STR: gen_string(g); break;
  case H_GPUS: emit_cstr(g, PICK(g, misc_strings)); break;
  case H_WINDOW: emit_cstr(g, PICK(g, misc_strings)); break;
  case H_ANY:
  default: {
    guint8 t = fuzz_u8(&g->in);
    switch (t % 12) {
    case 0: g_string_append(g->out, "nil"); break;
    case 1: g_string_append(g->out, t & 16 ? "true" : "false"); break;
    case 2: gen_int(g); break;
    case 3: gen_num(g, FALSE); break;
    case 4: gen_string(g); break;
    case 5: gen_list(g, H_ANY, 4); break;
    case 6: gen_named(g, kv_simulate); break;
    case 7: gen_function(g); break;
    case 8: gen_object(g); break;
    case 9: gen_policy_call(g); break;
    case 10: gen_named(g, kv_straggler); break;
    default: gen_value(g, (Hint)(t % (H_CLASS + 1))); break;
    }
    break;
  }
  }
  g->depth--;
}

/* One call expression. */
static void gen_call(Gen *g)
{
  guint8 c = fuzz_u8(&g->in);
  switch (c % 34) {
  case 0: g_string_append(g->out, "js.cluster"); gen_named(g, kv_cluster); break;
  case 1: g_string_append(g->out, "js.gpt"); gen_named(g, kv_gpt); break;
  case 2: case 3:
    g_string_append(g->out, "js.simulate");
    gen_named(g, kv_simulate);
    break;
  case 4:
    g_string_append(g->out, "js.gpu(");
    gen_value(g, c & 64 ? H_ANY : H_GPU);
    g_string_append_c(g->out, ')');
    break;
  case 5: g_string_append(g->out, "js.gpu.define"); gen_named(g, kv_define); break;
  case 6: g_string_append(g->out, "js.gpus()"); break;
  case 7:
    g_string_append(g->out, "js.results(");
    gen_value(g, c & 64 ? H_ANY : H_PATH);
    g_string_append(g->out, ", ");
    gen_value(g, c & 128 ? H_ANY : H_STR);
    if (c & 32) {
      g_string_append(g->out, ", ");
      gen_named(g, (const char *const[]){"mode", NULL});
    }
    g_string_append_c(g->out, ')');
    break;
  case 8: case 9: gen_policy_call(g); break;
  case 10:
    g_string_append(g->out, "js.trace.load(");
    gen_value(g, c & 64 ? H_ANY : H_PATH);
    g_string_append_c(g->out, ')');
    break;
  case 11:
    g_string_append(g->out, "js.trace.import");
    if (c & 64) {
      g_string_append_c(g->out, '(');
      gen_value(g, H_PATH);
      g_string_append_c(g->out, ')');
    } else {
      /* The file list (positional entries) and the options. */
      g_string_append_c(g->out, '{');
      gen_value(g, H_PATH);
      g_string_append(g->out, ", ");
      gen_entries(g, kv_import);
      g_string_append_c(g->out, '}');
    }
    break;
  case 12:
    g_string_append(g->out, "js.trace.save(");
    gen_value(g, c & 64 ? H_ANY : H_WORKLOAD);
    g_string_append(g->out, ", ");
    gen_value(g, c & 128 ? H_ANY : H_PATH);
    g_string_append_c(g->out, ')');
    break;
  case 13:
    g_string_append(g->out, "js.trace.info(");
    gen_value(g, c & 64 ? H_ANY : H_WORKLOAD);
    g_string_append_c(g->out, ')');
    break;
  case 14:
    g_string_append(g->out, "js.profile.load(");
    gen_value(g, c & 64 ? H_ANY : H_PATH);
    g_string_append_c(g->out, ')');
    break;
  case 15:
    g_string_append(g->out, "js.profile.load_nvml(");
    if (c & 64) {
      gen_value(g, H_PATH);
      g_string_append(g->out, ", ");
      gen_value(g, H_PATH);
    } else {
      g_string_append(g->out, "\"s.csv\", \"w.csv\"");
    }
    g_string_append_c(g->out, ')');
    break;
  case 16: g_string_append(g->out, "js.validate"); gen_named(g, kv_validate); break;
  case 17:
    g_string_append(g->out, "js.validate_interval");
    gen_named(g, kv_interval);
    break;
  case 18: g_string_append(g->out, "js.validate_run"); gen_named(g, kv_vrun); break;
  case 19: g_string_append(g->out, "js.pipeline"); gen_named(g, kv_pipeline); break;
  case 20:
    g_string_append(g->out, "js.perseus_frontier");
    gen_named(g, kv_frontier);
    break;
  case 21: g_string_append(g->out, "js.pipeline_run"); gen_named(g, kv_prun); break;
  case 22:
    g_string_append(g->out, "tostring(js.compare(");
    gen_value(g, c & 64 ? H_ANY : H_RESULT);
    g_string_append(g->out, ", ");
    gen_value(g, c & 128 ? H_ANY : H_RESULT);
    g_string_append(g->out, "))");
    break;
  case 23:
    g_string_append(g->out, "js.summary(");
    gen_value(g, c & 64 ? H_ANY : H_RESULT);
    g_string_append_c(g->out, ')');
    break;
  case 24: g_string_append(g->out, "js.sweep"); gen_named(g, kv_sweep); break;
  case 25:
    /* results:append / :rows / :close */
    use(g, O_RES, "RES");
    if (c & 64) {
      g_string_append(g->out, ":append(");
      gen_value(g, H_ANY);
      g_string_append_c(g->out, ')');
    } else {
      g_string_append(g->out, c & 128 ? ":rows()" : ":close()");
    }
    break;
  case 26:
    /* profile:at(op, sm[, mem]) / profile:op(name) */
    use(g, c & 32 ? O_PK : O_P, c & 32 ? "PK" : "P");
    if (c & 64) {
      g_string_append(g->out, ":at(");
      gen_value(g, c & 128 ? H_ANY : H_STR);
      g_string_append(g->out, ", ");
      gen_num(g, FALSE);
      g_string_append(g->out, ", ");
      gen_value(g, H_ANY);
      g_string_append_c(g->out, ')');
    } else {
      g_string_append(g->out, ":op(");
      gen_value(g, H_STR);
      g_string_append_c(g->out, ')');
    }
    break;
  case 27:
    use(g, O_FR, "FR");
    g_string_append(g->out, ":plan(");
    gen_value(g, c & 64 ? H_ANY : H_INT);
    g_string_append_c(g->out, ')');
    break;
  case 28:
    /* Fields of userdata and tables: __index with any key. */
    gen_object(g);
    g_string_append_c(g->out, '[');
    gen_value(g, H_ANY);
    g_string_append_c(g->out, ']');
    break;
  case 29:
    g_string_append(g->out, "tostring(");
    gen_object(g);
    g_string_append_c(g->out, ')');
    break;
  case 30:
    g_string_append(g->out, "math.random(");
    gen_value(g, H_ANY);
    g_string_append(g->out, ", ");
    gen_value(g, H_ANY);
    g_string_append_c(g->out, ')');
    break;
  case 31:
    g_string_append(g->out, "math.randomseed(");
    gen_value(g, H_ANY);
    g_string_append_c(g->out, ')');
    break;
  case 32:
    /* A method of an object called on another (wrong self). */
    g_string_append(g->out, "getmetatable(");
    gen_object(g);
    g_string_append(g->out, ") and getmetatable(");
    gen_object(g);
    g_string_append(g->out, ").__index(");
    gen_value(g, H_ANY);
    g_string_append(g->out, ", ");
    gen_value(g, H_ANY);
    g_string_append_c(g->out, ')');
    break;
  default:
    /* A policy value as a bare call argument. */
    g_string_append(g->out, "js.simulate{cluster = ");
    use(g, O_C, "C");
    g_string_append(g->out, ", workload = ");
    use(g, O_W, "W");
    g_string_append(g->out, ", policy = ");
    gen_value(g, H_POLICY);
    g_string_append(g->out, ", iterations = ");
    gen_cost(g);
    g_string_append(g->out, "}");
    break;
  }
}

/* The script: preamble (hook, sandbox, CK, prebuilt objects), body. */
static char *gen_script(const guint8 *data, size_t size)
{
  Gen g = {{data, size}, g_string_new(NULL), 0, 0, 0, 0};
  guint n = 1 + fuzz_u8(&g.in) % FUZZ_LUA_MAX_STMTS;
  for (guint i = 0; i < n; i++) {
    g.nodes = 0;
    /* Not `return CALL`: a tail call would drop the frame that error
     * positions point at. */
    g_string_append_printf(g.out, "V[%u] = CK(pcall(function() local r = ",
                           i + 1);
    gen_call(&g);
    g_string_append(g.out, "; return r end))\n");
    g.stmt = i + 1;
  }
  /* Objects needed by the used ones come first. */
  for (int k = (int)G_N_ELEMENTS(objects) - 1; k >= 0; k--)
    if (g.used & objects[k].bit)
      g.used |= objects[k].needs;
  GString *s = g_string_new(NULL);
  g_string_append(
      s,
      "local js = require \"joulesim\"\n"
      "local V = {}\n"
      "local function CK(ok, e)\n"
      "  if ok then return e end\n"
      "  if type(e) == \"table\" and rawget(e, \"fuzz_obj\") then return nil "
      "end\n"
      "  if type(e) ~= \"string\" then\n"
      "    error(\"FUZZ-VIOLATION: error value of type \" .. type(e), 0)\n"
      "  end\n"
      "  if e:find(\"--max-instructions\", 1, true) then return nil end\n"
#if FUZZ_LUA_ALLOW_PRELUDE_POSITION
      "  if e:find(\"^%[joulesim prelude%.lua%]:%d+: attempt to \") then\n"
      "    return nil\n"
      "  end\n"
#endif
      "  if not e:find(\"^fuzz:%d+: \") then\n"
      "    error(\"FUZZ-VIOLATION: error without the script line: \" .. e, "
      "0)\n"
      "  end\n"
      "  return nil\n"
      "end\n");
  for (guint k = 0; k < G_N_ELEMENTS(objects); k++)
    if (g.used & objects[k].bit)
      g_string_append_printf(s, "local %s = %s\n", objects[k].name,
                             objects[k].decl);
  g_string_append(s, g.out->str);
  g_string_free(g.out, TRUE);
  return g_string_free(s, FALSE);
}

/* ---- inputs the scripts may name ---------------------------------------- */

static const char *work_dir(void);

static void write_inputs(void)
{
  static const struct {
    const char *name, *text;
  } files[] = {
    {"p.csv",
     "stage,instruction,frequency,time,energy\n"
     "0,forward,1410,0.050,23.8\n0,backward,1410,0.093,44.6\n"
     "0,forward,1200,0.056,21.0\n0,backward,1200,0.104,40.1\n"
     "0,forward,1005,0.064,19.2\n0,backward,1005,0.119,36.9\n"
     "1,forward,1410,0.052,24.1\n1,backward,1410,0.095,45.0\n"
     "1,forward,1200,0.058,21.4\n1,backward,1200,0.106,40.6\n"
     "1,forward,1005,0.066,19.5\n1,backward,1005,0.121,37.3\n"},
    {"k.csv",
     "kernel,sm_mhz,mem_mhz,time_s,energy_j,count,class\n"
     "gemm,1410,1593,0.002,0.8,12,gemm\ngemm,1200,1593,0.0023,0.72,12,gemm\n"
     "gemm,1005,1593,0.0027,0.66,12,gemm\n"
     "norm,1410,1593,0.001,0.2,24,norm\nnorm,1005,1593,0.0011,0.19,24,norm\n"},
    {"m.csv", "rank,time_s,energy_j\n0,0.5,150\n1,0.5,151\n2,0.51,149\n"
              "3,0.5,150\n"},
    {"s.csv",
     "timestamp,clocks.sm,power.draw\n0,1410,200\n0.5,1410,210\n"
     "1,1410,220\n1.5,1005,150\n2,1005,150\n2.5,1005,160\n3,1005,150\n"},
    {"w.csv", "kernel,start,end,count\ngemm,0.1,0.9,4\ngemm,1.6,2.9,4\n"},
    {"k.json",
     "[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ampere_sgemm\",\"pid\":0,"
     "\"tid\":7,\"ts\":10,\"dur\":5,\"args\":{\"device\":0,\"stream\":7}},"
     "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"softmax_warp_forward\","
     "\"pid\":0,\"tid\":7,\"ts\":16,\"dur\":2,\"args\":{\"device\":0,"
     "\"stream\":7}}]"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(files); i++) {
    g_autofree char *p = g_build_filename(work_dir(), files[i].name, NULL);
    fuzz_write(p, files[i].text, strlen(files[i].text));
  }
}

/* The canary: the scratch directory holds victim.txt and work/, the
 * sandbox's working (hence only writable) directory; work/ holds the
 * inputs and links pointing back out (up -> .., up-file -> ../victim.txt,
 * up-dangling -> ../gone.h5).  After every input the scratch directory
 * must hold exactly victim.txt, unchanged, and work/. */
#define CANARY_TEXT "victim: the sandbox must never touch this file\n"

static const char *work_dir(void)
{
  static char *dir;
  if (dir == NULL)
    dir = g_build_filename(fuzz_tmpdir(), "work", NULL);
  return dir;
}

static void make_canary(void)
{
  FUZZ_CHECK(g_mkdir_with_parents(work_dir(), 0700) == 0, "mkdir work");
  g_autofree char *victim = fuzz_path("victim.txt");
  fuzz_write(victim, CANARY_TEXT, strlen(CANARY_TEXT));
  static const char *const links[][2] = {
    {"up", ".."}, {"up-file", "../victim.txt"}, {"up-dangling", "../gone.h5"}};
  for (guint i = 0; i < G_N_ELEMENTS(links); i++) {
    g_autofree char *l = g_build_filename(work_dir(), links[i][0], NULL);
    FUZZ_CHECK(symlink(links[i][1], l) == 0, "symlink %s", l);
  }
}

static void check_canary(const char *script)
{
  GDir *d = g_dir_open(fuzz_tmpdir(), 0, NULL);
  FUZZ_CHECK(d != NULL, "cannot list the scratch directory");
  const char *n;
  while ((n = g_dir_read_name(d)) != NULL)
    if (strcmp(n, "work") != 0 && strcmp(n, "victim.txt") != 0)
      FUZZ_FAIL("the sandbox let the script create %s outside its "
                "directory\n---- script ----\n%s", n, script);
  g_dir_close(d);
  g_autofree char *victim = fuzz_path("victim.txt");
  g_autofree char *text = NULL;
  FUZZ_CHECK(g_file_get_contents(victim, &text, NULL, NULL) &&
                 strcmp(text, CANARY_TEXT) == 0,
             "the sandbox let the script change or remove victim.txt\n"
             "---- script ----\n%s", script);
}

/* Empties work/ (files only; fuzz_clean_dir cleans the scratch level). */
static void clean_work(void)
{
  GDir *d = g_dir_open(work_dir(), 0, NULL);
  if (d == NULL)
    return;
  const char *n;
  while ((n = g_dir_read_name(d)) != NULL) {
    g_autofree char *p = g_build_filename(work_dir(), n, NULL);
    g_unlink(p);
  }
  g_dir_close(d);
}

static int fuzz_lua_args_one(const guint8 *data, size_t size)
{
  g_autofree char *script = gen_script(data, size);
  if (fuzz_verbose())
    fprintf(stderr, "---- script ----\n%s----\n", script);
  static int home = -1;
  if (home < 0) {
    home = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    FUZZ_CHECK(home >= 0, "cannot open the working directory");
    g_unsetenv("JOULESIM_GPU_PATH");
  }
  make_canary();
  write_inputs();
  FUZZ_CHECK(g_chdir(work_dir()) == 0, "chdir to the scratch directory");
  /* The session `joulesim run --sandbox --max-instructions N` builds. */
  g_autoptr(JsSession) s = js_session_new(1);
  s->quiet = TRUE;
  s->jobs = 2;
  s->limits.max_instructions = FUZZ_LUA_BUDGET;
  GError *err = NULL;
  FUZZ_CHECK(js_session_sandbox(s, NULL, &err), "sandbox: %s",
             err != NULL ? err->message : "?");
  gboolean ok = js_run_string(s, "=fuzz", script, &err);
  FUZZ_CHECK(fchdir(home) == 0, "chdir back");
  if (!ok) {
    FUZZ_CHECK(err != NULL && err->domain == JS_ERROR,
               "js_run_string failed without a JS_ERROR");
    /* Only the budget may end the script early: every call is checked. */
    if (strstr(err->message, "--max-instructions") == NULL)
      FUZZ_FAIL("%s\n---- script ----\n%s", err->message, script);
  }
  g_clear_error(&err);
  check_canary(script);
  clean_work();
  fuzz_clean_dir();
  return 0;
}

FUZZ_TARGET(fuzz_lua_args_one)

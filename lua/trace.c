/* lua/trace.c -- js.trace (load, import, save, info) and `joulesim trace`
 * (gen, import, info, export).
 *
 * Inputs: a native trace file (HDF5, traces/native.h) is recognised by its
 * HDF5 signature; anything else goes to the profiler importers
 * (traces/import.h: Kineto JSON, Nsight Systems SQLite, Chakra).
 *
 * CLI conventions (DESIGN section 8): every subcommand has --help; exit
 * status 2 for usage errors (unknown option, missing argument, malformed
 * number), 1 for user errors (unreadable or invalid file, values the
 * models refuse), with a message that names the file or the option.
 * Output files are written durably (temporary file + rename), so an error
 * never leaves a partial file behind.
 */
#include "cli/commands.h"
#include "lua/luautil.h"
#include "run/memory.h"
#include "models/net.h"
#include "traces/gpt.h"
#include "traces/import.h"
#include "traces/info.h"
#include "traces/native.h"
#include "traces/timeline.h"

#include <errno.h>
#include <lauxlib.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_USER 1
#define EXIT_USAGE 2

/* ---- shared: reading inputs ----------------------------------------------- */

/* Loads a workload from a native trace (one HDF5 file) or imports profiler
 * traces (all other cases).  `gpu` is the GPU to assume for devices not in
 * the catalogue (NULL: the importer's default); warnings (owned strings)
 * are added to `warnings` when given.  Caller owns the result. */
static SimWorkload *load_inputs_opt(JsSession *s, const char *const *paths,
                                    guint n, const char *gpu,
                                    const TraceImportOptions *how,
                                    GPtrArray *warnings, GError **error)
{
  g_return_val_if_fail(n > 0, NULL);
  /* HDF5 content, or an .h5/.hdf5 name, means a native trace (so that a
   * damaged native file gets the native loader's diagnosis). */
  for (guint i = 0; i < n; i++) {
    gboolean native = trace_native_probe(paths[i]) ||
                      g_str_has_suffix(paths[i], ".h5") ||
                      g_str_has_suffix(paths[i], ".hdf5");
    if (native && n == 1)
      return trace_native_load(paths[0], error);
    if (native) {
      g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                  "%s: a native trace (HDF5) cannot be combined with other "
                  "files; give it alone", paths[i]);
      return NULL;
    }
  }
  TraceImportOptions opt;
  memset(&opt, 0, sizeof opt);
  if (how != NULL) {
    opt.step = how->step;
    opt.step_number = how->step_number;
    opt.gpu_only = how->gpu_only;
  }
  opt.catalogue = s->catalogue;
  opt.gpu = gpu;
  opt.warnings = warnings;
  return trace_import(paths, n, &opt, error);
}

static SimWorkload *load_inputs(JsSession *s, const char *const *paths,
                                guint n, const char *gpu,
                                GPtrArray *warnings, GError **error)
{
  return load_inputs_opt(s, paths, n, gpu, NULL, warnings, error);
}

/* A label for a workload read from paths: the first file's base name (and
 * "+N" when there are more). */
static char *inputs_label(const char *const *paths, guint n)
{
  g_autofree char *base = g_path_get_basename(paths[0]);
  if (n > 1)
    return g_strdup_printf("%s+%u", base, n - 1);
  return g_steal_pointer(&base);
}

/* ---- Lua: js.trace ----------------------------------------------------------- */

/* js.trace.load(path) -> workload */
static int l_trace_load(lua_State *L)
{
  const char *fn = "js.trace.load";
  const char *path = luaL_checkstring(L, 1);
  if (lua_gettop(L) > 1)
    luaL_error(L, "%s: takes one argument, the trace file (got %d)", fn,
               lua_gettop(L));
  jsl_check_read(L, fn, path);
  GError *err = NULL;
  SimWorkload *w = trace_native_load(path, &err);
  if (w == NULL)
    return jsl_raise_gerror(L, fn, err);
  g_autofree char *label = g_path_get_basename(path);
  jsl_push_workload(L, w, label);
  return 1;
}

/* js.trace.import(path, ...) or js.trace.import{ path, ..., gpu = NAME }
 * -> workload, warnings (a list of strings) */
static int l_trace_import(lua_State *L)
{
  const char *fn = "js.trace.import";
  JsSession *s = jsl_session(L);
  const char *gpu = NULL;
  TraceImportOptions how;
  memset(&how, 0, sizeof how);
  /* Every check that can raise comes before the first allocation (a Lua
   * error longjmps past any free).  The file names stay on the Lua stack,
   * at first..first+n-1, and are only borrowed below. */
  int first = 1, n = lua_gettop(L);
  if (lua_type(L, 1) == LUA_TTABLE) {
    if (lua_gettop(L) > 1)
      luaL_error(L, "%s: give either file names or one table", fn);
    lua_Integer len = (lua_Integer)lua_rawlen(L, 1);
    lua_pushnil(L);
    while (lua_next(L, 1) != 0) {
      lua_pop(L, 1);
      if (lua_type(L, -1) == LUA_TSTRING) {
        const char *k = lua_tostring(L, -1);
        if (strcmp(k, "gpu") != 0 && strcmp(k, "step") != 0 &&
            strcmp(k, "gpu_only") != 0) {
          static const char *const keys[] = {"gpu", "step", "gpu_only", NULL};
          const char *near = jsl_closest(k, keys);
          luaL_error(L, "%s: unknown argument '%s'%s%s%s; allowed: the "
                        "file names (a list), gpu, step and gpu_only", fn, k,
                     near ? " (did you mean '" : "", near ? near : "",
                     near ? "'?)" : "");
        }
      } else if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 ||
                 lua_tointeger(L, -1) > len) {
        luaL_error(L, "%s: the table must hold a list of file names and "
                      "named options (got a %s key)", fn,
                   luaL_typename(L, -1));
      }
    }
    if (len > G_MAXINT || !lua_checkstack(L, (int)len))
      luaL_error(L, "%s: too many files (%I)", fn, len);
    first = lua_gettop(L) + 1;
    n = (int)len;
    for (lua_Integer i = 1; i <= len; i++) {
      if (lua_rawgeti(L, 1, i) != LUA_TSTRING)
        luaL_error(L, "%s: file %d must be a string (got %s)", fn, (int)i,
                   luaL_typename(L, -1));
    }
    gpu = jsl_opt_str(L, 1, fn, "gpu", NULL);
    /* step = "first" | "median" | "all" | a step number */
    lua_getfield(L, 1, "step");
    if (lua_isinteger(L, -1)) {
      lua_Integer v = lua_tointeger(L, -1);
      if (v < 0)
        luaL_error(L, "%s: argument 'step' must be a step number >= 0, "
                      "\"first\", \"median\" or \"all\" (got %I)", fn, v);
      how.step = TRACE_STEP_NUMBER;
      how.step_number = (gint64)v;
    } else if (lua_type(L, -1) == LUA_TSTRING) {
      const char *v = lua_tostring(L, -1);
      if (strcmp(v, "first") == 0)
        how.step = TRACE_STEP_FIRST;
      else if (strcmp(v, "median") == 0)
        how.step = TRACE_STEP_MEDIAN;
      else if (strcmp(v, "all") == 0)
        how.step = TRACE_STEP_ALL;
      else
        luaL_error(L, "%s: argument 'step' must be \"first\", \"median\", "
                      "\"all\" or a step number (got \"%s\")", fn, v);
    } else if (!lua_isnil(L, -1)) {
      luaL_error(L, "%s: argument 'step' must be \"first\", \"median\", "
                    "\"all\" or a step number (got %s)", fn,
                 luaL_typename(L, -1));
    }
    lua_pop(L, 1);
    lua_getfield(L, 1, "gpu_only");
    if (!lua_isnil(L, -1) && !lua_isboolean(L, -1))
      luaL_error(L, "%s: argument 'gpu_only' must be a boolean (got %s)", fn,
                 luaL_typename(L, -1));
    how.gpu_only = lua_toboolean(L, -1);
    lua_pop(L, 1);
  } else {
    for (int i = 1; i <= n; i++) {
      if (lua_type(L, i) != LUA_TSTRING)
        luaL_error(L, "%s: argument %d must be a file name (got %s)", fn, i,
                   luaL_typename(L, i));
    }
  }
  if (n == 0)
    luaL_error(L, "%s: give at least one trace file", fn);
  for (int i = 0; i < n; i++)
    jsl_check_read(L, fn, lua_tostring(L, first + i));
  GError *err = NULL;
  if (gpu != NULL && gpu_catalogue_lookup(s->catalogue, gpu, &err) == NULL) {
    g_prefix_error(&err, "argument 'gpu': ");
    return jsl_raise_gerror(L, fn, err);
  }
  const char **paths = g_new(const char *, n);
  for (int i = 0; i < n; i++)
    paths[i] = lua_tostring(L, first + i);
  GPtrArray *warnings = g_ptr_array_new_with_free_func(g_free);
  SimWorkload *w = load_inputs_opt(s, paths, (guint)n, gpu, &how, warnings,
                                   &err);
  char *label = w != NULL ? inputs_label(paths, (guint)n) : NULL;
  g_free(paths);
  if (w == NULL) {
    g_ptr_array_unref(warnings);
    return jsl_raise_gerror(L, fn, err);
  }
  jsl_push_workload(L, w, label);
  g_free(label);
  lua_createtable(L, (int)warnings->len, 0);
  for (guint i = 0; i < warnings->len; i++) {
    lua_pushstring(L, g_ptr_array_index(warnings, i));
    lua_rawseti(L, -2, i + 1);
  }
  g_ptr_array_unref(warnings);
  return 2;
}

/* js.trace.save(workload, path) */
static int l_trace_save(lua_State *L)
{
  const char *fn = "js.trace.save";
  LWorkload *u = jsl_check_workload(L, 1, fn);
  if (lua_type(L, 2) != LUA_TSTRING)
    luaL_error(L, "%s: argument 2 must be the output file name (got %s)", fn,
               luaL_typename(L, 2));
  const char *path = lua_tostring(L, 2);
  jsl_check_write(L, fn, path, JS_FILE_TRACE);
  GError *err = NULL;
  if (!trace_native_save(u->w, path, &err))
    return jsl_raise_gerror(L, fn, err);
  return 0;
}

static void set_str(lua_State *L, const char *k, const char *v)
{
  if (v == NULL)
    return;
  lua_pushstring(L, v);
  lua_setfield(L, -2, k);
}

/* js.trace.info(workload) -> table (see docs/trace-files.md) */
static int l_trace_info(lua_State *L)
{
  const char *fn = "js.trace.info";
  LWorkload *u = jsl_check_workload(L, 1, fn);
  const SimWorkload *w = u->w;
  TraceStats st;
  trace_stats_compute(w, &st);
  lua_createtable(L, 0, 24);
  set_str(L, "label", u->label);
  jsl_set_int(L, "ranks", st.n_ranks);
  jsl_set_int(L, "ops", (lua_Integer)st.n_ops);
  jsl_set_int(L, "shapes", st.n_shapes);
  jsl_set_int(L, "names", st.n_names);
  jsl_set_int(L, "groups", st.n_groups);
  lua_createtable(L, 0, 3);
  jsl_set_int(L, "min", st.streams_min);
  jsl_set_int(L, "max", st.streams_max);
  jsl_set_int(L, "total", (lua_Integer)st.streams_total);
  lua_setfield(L, -2, "streams");
  lua_createtable(L, 0, SIM_CLASS_COUNT);
  for (int c = 0; c < SIM_CLASS_COUNT; c++)
    jsl_set_int(L, sim_class_name((SimOpClass)c), (lua_Integer)st.by_class[c]);
  lua_setfield(L, -2, "by_class");
  lua_createtable(L, 0, SIM_OP_KIND_COUNT);
  for (int k = 0; k < SIM_OP_KIND_COUNT; k++)
    jsl_set_int(L, sim_kind_name((SimOpKind)k), (lua_Integer)st.by_kind[k]);
  lua_setfield(L, -2, "by_kind");
  lua_createtable(L, (int)st.n_ranks, 0);
  for (guint r = 0; r < st.n_ranks; r++) {
    lua_pushnumber(L, (double)st.busy_ns[r] * 1e-9);
    lua_rawseti(L, -2, r + 1);
  }
  lua_setfield(L, -2, "busy_s");
  lua_createtable(L, (int)st.n_ranks, 0);
  for (guint r = 0; r < st.n_ranks; r++) {
    lua_createtable(L, 0, SIM_PHASE_COUNT);
    for (int k = 0; k < SIM_PHASE_COUNT; k++)
      jsl_set_num(L, sim_phase_name((SimPhase)k),
                  (double)st.busy_phase_ns[(gsize)r * SIM_PHASE_COUNT + k] *
                      1e-9);
    lua_rawseti(L, -2, r + 1);
  }
  lua_setfield(L, -2, "busy_by_phase_s");
  jsl_set_num(L, "busy_min_s", (double)st.busy_min_ns * 1e-9);
  jsl_set_num(L, "busy_max_s", (double)st.busy_max_ns * 1e-9);
  jsl_set_num(L, "host_ops", (double)st.host_ops);
  jsl_set_num(L, "host_streams", (double)st.host_streams);
  jsl_set_num(L, "step_s", (double)st.step_ns * 1e-9);
  jsl_set_num(L, "host_bound", st.host_bound);
  jsl_set_num(L, "busy_mean_s", st.busy_mean_ns * 1e-9);
  lua_createtable(L, 0, (int)st.groups->len);
  for (guint k = 0; k < st.groups->len; k++) {
    const TraceGroupStats *gs = &g_array_index(st.groups, TraceGroupStats, k);
    lua_createtable(L, 0, 4);
    jsl_set_int(L, "groups", gs->n_groups);
    jsl_set_int(L, "calls", (lua_Integer)gs->calls);
    jsl_set_int(L, "ops", (lua_Integer)gs->ops);
    jsl_set_num(L, "bytes", gs->bytes);
    lua_setfield(L, -2, gs->label);
  }
  lua_setfield(L, -2, "collectives");
  lua_createtable(L, 0, SIM_COLL_COUNT);
  for (int t = 0; t < SIM_COLL_COUNT; t++) {
    if (st.coll_by_type[t] == 0)
      continue;
    lua_createtable(L, 0, 2);
    jsl_set_int(L, "ops", (lua_Integer)st.coll_by_type[t]);
    jsl_set_num(L, "bytes", st.coll_bytes_by_type[t]);
    lua_setfield(L, -2, sim_coll_name((SimCollType)t));
  }
  lua_setfield(L, -2, "by_collective");
  lua_createtable(L, 0, 2);
  jsl_set_int(L, "sends", (lua_Integer)st.p2p_sends);
  jsl_set_num(L, "bytes", st.p2p_bytes);
  lua_setfield(L, -2, "p2p");
  jsl_set_num(L, "kernel_flops", st.kernel_flops);
  jsl_set_num(L, "kernel_bytes", st.kernel_bytes);
  jsl_set_num(L, "comm_bytes", st.comm_bytes);
  lua_createtable(L, 0, 7);
  jsl_set_int(L, "tp", w->tp);
  jsl_set_int(L, "pp", w->pp);
  jsl_set_int(L, "dp", w->dp);
  jsl_set_int(L, "microbatches", w->microbatches);
  jsl_set_num(L, "tokens_per_iteration", w->tokens_per_iteration);
  set_str(L, "schedule", w->schedule);
  set_str(L, "ref_gpu", w->ref_gpu);
  lua_setfield(L, -2, "layout");
  lua_createtable(L, 0, (int)g_hash_table_size(w->provenance));
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init(&it, w->provenance);
  while (g_hash_table_iter_next(&it, &k, &v))
    set_str(L, k, v);
  lua_setfield(L, -2, "provenance");
  GString *text = g_string_new(NULL);
  trace_info(w, text);
  lua_pushlstring(L, text->str, text->len);
  lua_setfield(L, -2, "text");
  g_string_free(text, TRUE);
  trace_stats_clear(&st);
  return 1;
}

static const luaL_Reg trace_funcs[] = {
  {"load", l_trace_load},
  {"import", l_trace_import},
  {"save", l_trace_save},
  {"info", l_trace_info},
  {NULL, NULL}};

void jsl_register_trace(lua_State *L)
{
  luaL_newlib(L, trace_funcs);
  lua_setfield(L, -2, "trace");
}

/* ---- CLI helpers ---------------------------------------------------------------- */

static int fail_user(const char *cmd, GError *err)
{
  fprintf(stderr, "joulesim trace %s: %s\n", cmd, err->message);
  g_error_free(err);
  return EXIT_USER;
}

/* fail_user for a value the models refuse, naming its option. */
static int fail_option(const char *cmd, const char *option, GError *err)
{
  g_prefix_error(&err, "%s: ", option);
  return fail_user(cmd, err);
}

G_GNUC_PRINTF(3, 4)
static int fail_usage(const char *cmd, const char *usage, const char *fmt,
                      ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  fprintf(stderr, "joulesim trace %s: %s\n%s", cmd, msg, usage);
  return EXIT_USAGE;
}

static gboolean is_help(const char *a)
{
  return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0;
}

/* Command-line scanner: "--name VALUE" and "--name=VALUE" forms. */
typedef struct {
  int argc;
  char **argv;
  int i;              /* current argument */
  const char *value;  /* value of the option just matched */
  gboolean missing;   /* the option just matched had no value */
} Args;

/* TRUE when argv[i] is option `name` taking a value; sets a->value (or
 * a->missing) and consumes the value. */
static gboolean opt_value(Args *a, const char *name)
{
  const char *arg = a->argv[a->i];
  gsize n = strlen(name);
  if (strncmp(arg, name, n) != 0)
    return FALSE;
  a->missing = FALSE;
  if (arg[n] == '=') {
    a->value = arg + n + 1;
    return TRUE;
  }
  if (arg[n] != '\0')
    return FALSE;
  if (a->i + 1 >= a->argc) {
    a->value = NULL;
    a->missing = TRUE;
    return TRUE;
  }
  a->value = a->argv[++a->i];
  return TRUE;
}

/* Parses a decimal integer in [lo, hi]. */
static gboolean parse_count(const char *s, guint64 lo, guint64 hi,
                            guint64 *out)
{
  if (s == NULL || !g_ascii_isdigit(*s))
    return FALSE;
  char *end = NULL;
  errno = 0;
  guint64 v = g_ascii_strtoull(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi)
    return FALSE;
  *out = v;
  return TRUE;
}

/* What every refusal to replace a file says (run/confine.h). */
#define FORCE_HINT "--force replaces it"

/* Writes w to the native file `out` and says so; the exit status. */
static int save_native(const char *cmd, const SimWorkload *w, const char *out)
{
  GError *err = NULL;
  if (!trace_native_save(w, out, &err))
    return fail_user(cmd, err);
  printf("wrote %s: %u ranks, %" G_GUINT64_FORMAT " ops\n", out, w->n_ranks,
         sim_workload_n_ops(w));
  return 0;
}

/* ---- trace gen -------------------------------------------------------------------- */

static const char usage_gen[] =
  "usage: joulesim trace gen [OPTIONS] -o TRACE.h5\n"
  "\n"
  "Generates one training iteration of a GPT-3 model as Megatron-LM runs it\n"
  "(traces/gpt.h) and writes it as a native trace file.\n"
  "  --model M           a preset (below; default gpt3-1.3b)\n"
  "  --arch A            gpt (learned positions) or bloom (ALiBi, embedding\n"
  "                      LayerNorm); the preset's by default\n"
  "  --tp N --pp N --dp N  tensor, pipeline and data parallel sizes (1)\n"
  "  --microbatches N    microbatches per iteration per pipeline (8)\n"
  "  --seq-len N         sequence length (2048)\n"
  "  --mbs N             microbatch size (1)\n"
  "  --schedule S        1f1b (default) or gpipe\n"
  "  --recompute         full activation recomputation\n"
  "  --precision P       bf16 (default), fp16, tf32 (tensor cores) or fp32\n"
  "                      (CUDA cores): GEMM and attention rates, element bytes\n"
  "  --impl I            megatron (default: fused kernels) or hf (Hugging\n"
  "                      Face in eager PyTorch, as Merak runs it; tp 1)\n"
  "  --stage-layers N,N,...\n"
  "                      transformer layers per pipeline stage (--pp entries\n"
  "                      summing to the model's layers; default: uniform)\n"
  "  --gpu NAME          reference GPU for kernel durations (A100-SXM4-80GB)\n"
  "  -o, --output FILE   the trace file to write (required)\n"
  "  --force             replace FILE even when it is not a joulesim trace\n"
  "                      (refused otherwise)\n";

static int cmd_gen(int argc, char **argv)
{
  const char *cmd = "gen";
  GptConfig cfg;
  gpt_config_init(&cfg);
  const char *model = NULL, *schedule = NULL, *out = NULL;
  const char *stage_layers = NULL, *precision = NULL, *arch = NULL;
  const char *impl = NULL;
  g_autofree guint *layers_of = NULL;
  gboolean force = FALSE;
  const char *gpu_name = "A100-SXM4-80GB";
  Args a = {argc, argv, 0, NULL, FALSE};
  struct {
    const char *name;
    guint *field;
    guint64 hi;
  } counts[] = {
    {"--tp", &cfg.tp, 1024},
    {"--pp", &cfg.pp, 4096},
    {"--dp", &cfg.dp, 1u << 20},
    {"--microbatches", &cfg.microbatches, 100000},
    {"--seq-len", &cfg.seq_len, 1u << 20},
    {"--mbs", &cfg.microbatch_size, 65536},
  };
  for (a.i = 0; a.i < argc; a.i++) {
    const char *arg = argv[a.i];
    if (is_help(arg)) {
      fputs(usage_gen, stdout);
      GString *m = g_string_new("\npresets (--model):\n");
      gpt_describe_models(m);
      fputs(m->str, stdout);
      g_string_free(m, TRUE);
      return 0;
    }
    gboolean matched = FALSE;
    for (gsize k = 0; k < G_N_ELEMENTS(counts) && !matched; k++) {
      if (!opt_value(&a, counts[k].name))
        continue;
      matched = TRUE;
      guint64 v = 0;
      if (a.missing || !parse_count(a.value, 1, counts[k].hi, &v))
        return fail_usage(cmd, usage_gen,
                          "%s needs an integer from 1 to %" G_GUINT64_FORMAT
                          " (got '%s')", counts[k].name, counts[k].hi,
                          a.value ? a.value : "nothing");
      *counts[k].field = (guint)v;
    }
    if (matched)
      continue;
    const char **str = NULL;
    const char *sname = NULL;
    if (opt_value(&a, "--model")) {
      str = &model;
      sname = "--model";
    } else if (opt_value(&a, "--schedule")) {
      str = &schedule;
      sname = "--schedule";
    } else if (opt_value(&a, "--gpu")) {
      str = &gpu_name;
      sname = "--gpu";
    } else if (opt_value(&a, "--output") || opt_value(&a, "-o")) {
      str = &out;
      sname = "-o";
    } else if (opt_value(&a, "--stage-layers")) {
      str = &stage_layers;
      sname = "--stage-layers";
    } else if (opt_value(&a, "--precision")) {
      str = &precision;
      sname = "--precision";
    } else if (opt_value(&a, "--arch")) {
      str = &arch;
      sname = "--arch";
    } else if (opt_value(&a, "--impl")) {
      str = &impl;
      sname = "--impl";
    }
    if (str != NULL) {
      if (a.missing)
        return fail_usage(cmd, usage_gen, "%s needs a value", sname);
      *str = a.value;
    } else if (strcmp(arg, "--recompute") == 0) {
      cfg.recompute = TRUE;
    } else if (strcmp(arg, "--force") == 0) {
      force = TRUE;
    } else if (arg[0] == '-') {
      return fail_usage(cmd, usage_gen, "unknown option '%s'", arg);
    } else {
      return fail_usage(cmd, usage_gen, "unexpected argument '%s'", arg);
    }
  }
  if (out == NULL)
    return fail_usage(cmd, usage_gen, "missing -o TRACE.h5");
  GError *err = NULL;
  if (!force && !js_output_check(out, JS_FILE_TRACE, FORCE_HINT, &err))
    return fail_option(cmd, "-o", err);
  /* The model sets only layers, hidden, heads and vocab. */
  if (model != NULL && !gpt_config_set_model(&cfg, model, &err))
    return fail_user(cmd, err);
  if (schedule != NULL && !gpt_schedule_from_name(schedule, &cfg.schedule,
                                                  &err))
    return fail_user(cmd, err);
  if (precision != NULL &&
      !gpt_precision_from_name(precision, &cfg.precision, &err))
    return fail_option(cmd, "--precision", err);
  if (arch != NULL && !gpt_arch_from_name(arch, &cfg.arch, &err))
    return fail_option(cmd, "--arch", err);
  if (impl != NULL && !gpt_impl_from_name(impl, &cfg.impl, &err))
    return fail_option(cmd, "--impl", err);
  if (stage_layers != NULL) {
    g_auto(GStrv) parts = g_strsplit(stage_layers, ",", -1);
    guint n = g_strv_length(parts);
    if (n != cfg.pp) {
      fprintf(stderr, "joulesim trace gen: --stage-layers has %u entries, "
              "--pp is %u: give one layer count per stage\n", n, cfg.pp);
      return EXIT_USER;
    }
    layers_of = g_new(guint, n);
    for (guint i = 0; i < n; i++) {
      guint64 v = 0;
      if (!parse_count(parts[i], 1, 255, &v))
        return fail_usage(cmd, usage_gen, "--stage-layers: entry %u must be "
                          "an integer from 1 to 255 (got '%s')", i + 1,
                          parts[i]);
      layers_of[i] = (guint)v;
    }
    cfg.stage_layers = layers_of;
  }
  if ((guint64)cfg.tp * cfg.pp * cfg.dp > (1u << 20)) {
    fprintf(stderr, "joulesim trace gen: tp*pp*dp = %" G_GUINT64_FORMAT
            " ranks is more than the 1,048,576 supported\n",
            (guint64)cfg.tp * cfg.pp * cfg.dp);
    return EXIT_USER;
  }
  g_autoptr(GpuCatalogue) cat = gpu_catalogue_new();
  const GpuSpec *gpu = gpu_catalogue_lookup(cat, gpu_name, &err);
  if (gpu == NULL)
    return fail_option(cmd, "--gpu", err);
  if (!gpt_config_validate(&cfg, &err))
    return fail_user(cmd, err);
  if (!js_memory_check(0, gpt_estimate_bytes(&cfg), "the workload", &err))
    return fail_user(cmd, err);
  g_autoptr(SimWorkload) w = gpt_generate(&cfg, gpu, &err);
  if (w == NULL)
    return fail_user(cmd, err);
  return save_native(cmd, w, out);
}

/* ---- trace import ------------------------------------------------------------------ */

#define STEP_HELP                                                           \
  "  --step N|first|median|all\n"                                          \
  "                      which profiled step: the one numbered N\n"          \
  "                      (ProfilerStep#N), the first, the one of median\n"   \
  "                      duration (default: the steady state), or all of\n" \
  "                      them as one workload with step markers\n"          \
  "  --gpu-only          leave the CPU out: no host streams, GPU ops in\n"   \
  "                      stream order only (the replay before host\n"       \
  "                      modelling)\n"

static const char usage_import[] =
  "usage: joulesim trace import FILES... -o TRACE.h5 [--gpu NAME]\n"
  "                             [--step N|first|median|all] [--gpu-only]\n"
  "\n"
  "Imports the profiler traces of one job (PyTorch profiler / Kineto JSON,\n"
  ".json or .json.gz, one file per rank; Nsight Systems SQLite exports;\n"
  "Chakra execution traces) and writes them as one native trace file.\n"
  "  --gpu NAME          GPU to assume when a trace's device is not in the\n"
  "                      catalogue (see joulesim gpus)\n"
  STEP_HELP
  "  -o, --output FILE   the trace file to write (required)\n"
  "  --force             replace FILE even when it is not a joulesim trace\n"
  "                      (refused otherwise)\n";

/* Prints the importer's warnings on stderr. */
static void print_warnings(const char *cmd, GPtrArray *warnings)
{
  for (guint i = 0; i < warnings->len; i++)
    fprintf(stderr, "joulesim trace %s: warning: %s\n", cmd,
            (const char *)g_ptr_array_index(warnings, i));
}

static int cmd_import(int argc, char **argv)
{
  const char *cmd = "import";
  const char *out = NULL, *gpu = NULL;
  TraceImportOptions how;
  memset(&how, 0, sizeof how);
  g_autoptr(GPtrArray) files = g_ptr_array_new();
  gboolean force = FALSE;
  Args a = {argc, argv, 0, NULL, FALSE};
  for (a.i = 0; a.i < argc; a.i++) {
    const char *arg = argv[a.i];
    if (is_help(arg)) {
      fputs(usage_import, stdout);
      return 0;
    }
    if (opt_value(&a, "--output") || opt_value(&a, "-o")) {
      if (a.missing)
        return fail_usage(cmd, usage_import, "-o needs a file name");
      out = a.value;
    } else if (opt_value(&a, "--gpu")) {
      if (a.missing)
        return fail_usage(cmd, usage_import, "--gpu needs a GPU name");
      gpu = a.value;
    } else if (opt_value(&a, "--step")) {
      if (a.missing)
        return fail_usage(cmd, usage_import, "--step needs N, first, median or "
                          "all");
      GError *e = NULL;
      if (!trace_parse_step_option(a.value, &how, &e)) {
        int rc = fail_usage(cmd, usage_import, "--step: %s", e->message);
        g_error_free(e);
        return rc;
      }
    } else if (strcmp(arg, "--gpu-only") == 0) {
      how.gpu_only = TRUE;
    } else if (strcmp(arg, "--force") == 0) {
      force = TRUE;
    } else if (arg[0] == '-' && arg[1] != '\0') {
      return fail_usage(cmd, usage_import, "unknown option '%s'", arg);
    } else {
      g_ptr_array_add(files, (gpointer)arg);
    }
  }
  if (files->len == 0)
    return fail_usage(cmd, usage_import, "missing trace FILES");
  if (out == NULL)
    return fail_usage(cmd, usage_import, "missing -o TRACE.h5");
  g_autoptr(JsSession) s = js_session_new(1);
  GError *err = NULL;
  if (!force && !js_output_check(out, JS_FILE_TRACE, FORCE_HINT, &err))
    return fail_option(cmd, "-o", err);
  if (gpu != NULL && gpu_catalogue_lookup(s->catalogue, gpu, &err) == NULL)
    return fail_option(cmd, "--gpu", err);
  g_autoptr(GPtrArray) warnings = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(SimWorkload) w = load_inputs_opt(
    s, (const char *const *)files->pdata, files->len, gpu, &how, warnings,
    &err);
  print_warnings(cmd, warnings);
  if (w == NULL)
    return fail_user(cmd, err);
  return save_native(cmd, w, out);
}

/* ---- trace info ----------------------------------------------------------------------- */

static const char usage_info[] =
  "usage: joulesim trace info FILE... [--gpu NAME] [--step S] [--gpu-only]\n"
  "\n"
  "Summarises a trace: ranks, layout, ops per class and per kind, streams,\n"
  "GPU busy time per rank (sum of kernel durations), collectives per group\n"
  "type, host ops and the host-bound share of the step, bytes and\n"
  "provenance.  FILE is a native trace (.h5) or the profiler traces of one\n"
  "job (imported on the fly).\n"
  "  --gpu NAME          GPU to assume for devices not in the catalogue\n"
  STEP_HELP;

static int cmd_info(int argc, char **argv)
{
  const char *cmd = "info";
  const char *gpu = NULL;
  TraceImportOptions how;
  memset(&how, 0, sizeof how);
  g_autoptr(GPtrArray) files = g_ptr_array_new();
  Args a = {argc, argv, 0, NULL, FALSE};
  for (a.i = 0; a.i < argc; a.i++) {
    const char *arg = argv[a.i];
    if (is_help(arg)) {
      fputs(usage_info, stdout);
      return 0;
    }
    if (opt_value(&a, "--gpu")) {
      if (a.missing)
        return fail_usage(cmd, usage_info, "--gpu needs a GPU name");
      gpu = a.value;
    } else if (opt_value(&a, "--step")) {
      if (a.missing)
        return fail_usage(cmd, usage_info, "--step needs N, first, median or "
                          "all");
      GError *e = NULL;
      if (!trace_parse_step_option(a.value, &how, &e)) {
        int rc = fail_usage(cmd, usage_info, "--step: %s", e->message);
        g_error_free(e);
        return rc;
      }
    } else if (strcmp(arg, "--gpu-only") == 0) {
      how.gpu_only = TRUE;
    } else if (arg[0] == '-' && arg[1] != '\0') {
      return fail_usage(cmd, usage_info, "unknown option '%s'", arg);
    } else {
      g_ptr_array_add(files, (gpointer)arg);
    }
  }
  if (files->len == 0)
    return fail_usage(cmd, usage_info, "missing FILE");
  g_autoptr(JsSession) s = js_session_new(1);
  GError *err = NULL;
  if (gpu != NULL && gpu_catalogue_lookup(s->catalogue, gpu, &err) == NULL)
    return fail_option(cmd, "--gpu", err);
  g_autoptr(GPtrArray) warnings = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(SimWorkload) w = load_inputs_opt(
    s, (const char *const *)files->pdata, files->len, gpu, &how, warnings,
    &err);
  print_warnings(cmd, warnings);
  if (w == NULL)
    return fail_user(cmd, err);
  GString *text = g_string_new(NULL);
  g_autofree char *label = inputs_label((const char *const *)files->pdata,
                                        files->len);
  g_string_append_printf(text, "trace         %s\n", label);
  trace_info(w, text);
  fputs(text->str, stdout);
  g_string_free(text, TRUE);
  return 0;
}

/* ---- trace export ---------------------------------------------------------------------- */

static const char usage_export[] =
  "usage: joulesim trace export --chrome OUT.json [OPTIONS] TRACE.h5|FILES...\n"
  "\n"
  "Simulates the trace on a cluster and writes the replay's timeline as\n"
  "Chrome trace-event JSON (open it in ui.perfetto.dev or chrome://tracing):\n"
  "one process per GPU, one thread per stream, kernels and communication as\n"
  "complete events (class, clocks, power and energy in args), blocked time,\n"
  "and counter tracks for SM clock and power.\n"
  "  --chrome FILE         the JSON file to write (required)\n"
  "  --force               replace FILE even when it is not a joulesim\n"
  "                        timeline (refused otherwise)\n"
  "  --cluster-gpu NAME    GPU model of the cluster (default: the trace's\n"
  "                        reference GPU, else A100-SXM4-80GB)\n"
  "  --network NAME        dgx-a100, dgx-h100 or pcie (default from the GPU)\n"
  "  --gpus-per-node N     GPUs per node (8)\n"
  "  --policy P            max (default), fixed:SM or fixed:SM:MEM (MHz)\n"
  "  --iterations N        iterations to replay (1)\n"
  "  --seed N              seed of the run (1)\n"
  "  --gpus LIST           GPUs to export, e.g. 0,3,8-15 (default all)\n"
  "  --window T0:T1        simulated time to export, e.g. 0.1:0.2 or\n"
  "                        10ms:25ms (units ns, us, ms, s; default s)\n"
  "  --gpu NAME            GPU to assume for imported devices not in the\n"
  "                        catalogue\n";

/* Parses "max", "auto", "fixed:SM" or "fixed:SM:MEM". */
static gboolean parse_policy(const char *s, DvfsPolicy *p)
{
  memset(p, 0, sizeof *p);
  if (strcmp(s, "max") == 0 || strcmp(s, "auto") == 0) {
    p->kind = DVFS_MAX;
    return TRUE;
  }
  if (!g_str_has_prefix(s, "fixed:"))
    return FALSE;
  g_auto(GStrv) parts = g_strsplit(s + 6, ":", -1);
  guint n = g_strv_length(parts);
  guint64 sm = 0, mem = 0;
  if (n < 1 || n > 2 || !parse_count(parts[0], 1, 65535, &sm) ||
      (n == 2 && !parse_count(parts[1], 1, 65535, &mem)))
    return FALSE;
  p->kind = DVFS_FIXED;
  p->sm_mhz = (guint)sm;
  p->mem_mhz = (guint)mem;
  return TRUE;
}

/* The network preset that goes with a GPU (as js.cluster chooses it). */
static const char *default_network(const char *gpu)
{
  if (g_str_has_prefix(gpu, "H100") && strstr(gpu, "SXM") != NULL)
    return "dgx-h100";
  if (g_str_has_prefix(gpu, "A100") && strstr(gpu, "SXM") != NULL)
    return "dgx-a100";
  return "pcie";
}

static int cmd_export(int argc, char **argv)
{
  const char *cmd = "export";
  const char *out = NULL, *cluster_gpu = NULL, *network = NULL;
  const char *gpus_spec = NULL, *window = NULL, *gpu = NULL;
  guint64 iterations = 1, seed = 1, per_node = 8;
  gboolean force = FALSE;
  DvfsPolicy pol;
  parse_policy("max", &pol);
  g_autoptr(GPtrArray) files = g_ptr_array_new();
  Args a = {argc, argv, 0, NULL, FALSE};
  for (a.i = 0; a.i < argc; a.i++) {
    const char *arg = argv[a.i];
    if (is_help(arg)) {
      fputs(usage_export, stdout);
      return 0;
    }
    const char **str = NULL;
    const char *sname = arg;
    if (opt_value(&a, "--chrome")) {
      str = &out;
      sname = "--chrome";
    } else if (opt_value(&a, "--cluster-gpu")) {
      str = &cluster_gpu;
      sname = "--cluster-gpu";
    } else if (opt_value(&a, "--network")) {
      str = &network;
      sname = "--network";
    } else if (opt_value(&a, "--gpus-per-node")) {
      if (a.missing || !parse_count(a.value, 1, 64, &per_node))
        return fail_usage(cmd, usage_export,
                          "--gpus-per-node needs an integer from 1 to 64");
      continue;
    } else if (opt_value(&a, "--gpus")) {
      str = &gpus_spec;
      sname = "--gpus";
    } else if (opt_value(&a, "--window")) {
      str = &window;
      sname = "--window";
    } else if (opt_value(&a, "--gpu")) {
      str = &gpu;
      sname = "--gpu";
    } else if (opt_value(&a, "--policy")) {
      if (a.missing || !parse_policy(a.value, &pol))
        return fail_usage(cmd, usage_export,
                          "--policy must be max, fixed:SM or fixed:SM:MEM "
                          "(got '%s')", a.value ? a.value : "nothing");
      continue;
    } else if (opt_value(&a, "--iterations")) {
      if (a.missing || !parse_count(a.value, 1, 100000, &iterations))
        return fail_usage(cmd, usage_export,
                          "--iterations needs an integer from 1 to 100000");
      continue;
    } else if (opt_value(&a, "--seed")) {
      if (a.missing || !parse_count(a.value, 0, G_MAXINT64, &seed))
        return fail_usage(cmd, usage_export,
                          "--seed needs a non-negative integer");
      continue;
    } else if (strcmp(arg, "--force") == 0) {
      force = TRUE;
      continue;
    }
    if (str != NULL) {
      if (a.missing)
        return fail_usage(cmd, usage_export, "%s needs a value", sname);
      *str = a.value;
    } else if (arg[0] == '-' && arg[1] != '\0') {
      return fail_usage(cmd, usage_export, "unknown option '%s'", arg);
    } else {
      g_ptr_array_add(files, (gpointer)arg);
    }
  }
  if (out == NULL)
    return fail_usage(cmd, usage_export, "missing --chrome OUT.json");
  if (files->len == 0)
    return fail_usage(cmd, usage_export, "missing TRACE.h5 or FILES");
  {
    GError *oerr = NULL;
    if (!force &&
        !js_output_check(out, JS_FILE_TIMELINE, FORCE_HINT, &oerr))
      return fail_option(cmd, "--chrome", oerr);
  }
  gint64 t0 = 0, t1 = -1;
  GError *err = NULL;
  if (window != NULL && !trace_timeline_parse_window(window, &t0, &t1, &err)) {
    fprintf(stderr, "joulesim trace export: --window: %s\n%s", err->message,
            usage_export);
    g_error_free(err);
    return EXIT_USAGE;
  }

  g_autoptr(JsSession) s = js_session_new(seed);
  if (gpu != NULL && gpu_catalogue_lookup(s->catalogue, gpu, &err) == NULL)
    return fail_option(cmd, "--gpu", err);
  g_autoptr(GPtrArray) warnings = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(SimWorkload) w = load_inputs(
    s, (const char *const *)files->pdata, files->len, gpu, warnings, &err);
  print_warnings(cmd, warnings);
  if (w == NULL)
    return fail_user(cmd, err);
  if (w->n_ranks == 0) {
    fprintf(stderr, "joulesim trace export: %s: the trace has no ranks\n",
            (const char *)g_ptr_array_index(files, 0));
    return EXIT_USER;
  }

  /* The cluster: one GPU per rank. */
  if (cluster_gpu == NULL)
    cluster_gpu = w->ref_gpu != NULL &&
                      gpu_catalogue_lookup(s->catalogue, w->ref_gpu, NULL)
                    ? w->ref_gpu
                    : "A100-SXM4-80GB";
  const GpuSpec *spec = gpu_catalogue_lookup(s->catalogue, cluster_gpu, &err);
  if (spec == NULL)
    return fail_option(cmd, "--cluster-gpu", err);
  g_autoptr(NetSpec) net = net_preset(
    network != NULL ? network : default_network(spec->name), &err);
  if (net == NULL)
    return fail_option(cmd, "--network", err);
  guint gpn = (guint)MIN(per_node, (guint64)w->n_ranks);
  g_autoptr(Cluster) c = cluster_new(spec, net, w->n_ranks, gpn, &err);
  if (c == NULL)
    return fail_user(cmd, err);
  if (!dvfs_policy_check(&pol, c, &err))
    return fail_option(cmd, "--policy", err);

  g_autoptr(GArray) sel = NULL;
  if (gpus_spec != NULL) {
    sel = trace_timeline_parse_gpus(gpus_spec, w->n_ranks, &err);
    if (sel == NULL) {
      g_prefix_error(&err, "%s: ",
                     (const char *)g_ptr_array_index(files, 0));
      return fail_user(cmd, err);
    }
  }
  TraceTimelineOptions topt;
  trace_timeline_options_init(&topt);
  if (sel != NULL) {
    topt.gpus = (const guint32 *)(void *)sel->data;
    topt.n_gpus = sel->len;
  }
  topt.t0_ns = t0;
  topt.t1_ns = t1;
  /* The machine's powers (models/cluster.c; no variability here). */
  topt.idle_power_w = c->idle_power_w >= 0 ? c->idle_power_w
                                           : spec->idle_power_w.v;
  topt.blocked_power_w = c->blocked_power_w >= 0 ? c->blocked_power_w
                                                 : spec->blocked_power_w.v;
  g_autofree char *plabel = dvfs_policy_label(&pol);
  g_autofree char *tlabel = inputs_label((const char *const *)files->pdata,
                                         files->len);
  g_autofree char *label = g_strdup_printf("%s on %u x %s, %s, policy %s",
                                           tlabel, w->n_ranks, spec->name,
                                           net->name, plabel);
  topt.label = label;
  g_autoptr(TraceTimeline) tl = trace_timeline_open(out, w, &topt, &err);
  if (tl == NULL)
    return fail_user(cmd, err);

  JsRunOptions ropt;
  memset(&ropt, 0, sizeof ropt);
  ropt.iterations = (guint)iterations;
  ropt.seed = seed;
  ropt.switch_latency_ms = -1;
  ropt.observer = trace_timeline_observe;
  ropt.observer_data = tl;
  g_autoptr(SimResult) r = js_simulate(s, c, w, &pol, &ropt, &err);
  if (r == NULL)
    return fail_user(cmd, err); /* tl is aborted: no file left */
  TraceTimelineCounts n;
  if (!trace_timeline_close(g_steal_pointer(&tl), &n, &err))
    return fail_user(cmd, err);
  double t = (double)r->time_ns * 1e-9;
  printf("wrote %s: %" G_GUINT64_FORMAT " op events, %" G_GUINT64_FORMAT
         " blocked, %" G_GUINT64_FORMAT " markers, %" G_GUINT64_FORMAT
         " counter samples\n"
         "simulated %s: %u GPUs, %u iteration%s, %.6f s, %.3f J, "
         "%.1f W per GPU\n",
         out, n.complete, n.blocked, n.instant, n.counter, label, r->n_gpus,
         r->n_iterations, r->n_iterations == 1 ? "" : "s", t, r->energy_j,
         t > 0 ? r->energy_j / t / r->n_gpus : 0.0);
  return 0;
}

/* ---- dispatch ---------------------------------------------------------------------------- */

static const char usage_trace[] =
  "usage: joulesim trace COMMAND [ARGS...]\n"
  "\n"
  "commands:\n"
  "  gen [OPTIONS] -o TRACE.h5          generate a GPT-3 training iteration\n"
  "  import FILES... -o TRACE.h5        import profiler traces (Kineto JSON,\n"
  "                                     Nsight Systems SQLite, Chakra)\n"
  "  info FILE...                       summarise a trace\n"
  "  export --chrome OUT.json [...] TRACE.h5|FILES...\n"
  "                                     simulate and write a Perfetto timeline\n"
  "\n"
  "Each command has --help.\n";

int js_cmd_trace(int argc, char **argv)
{
  if (argc < 1) {
    fputs(usage_trace, stderr);
    return EXIT_USAGE;
  }
  const char *sub = argv[0];
  if (is_help(sub) || strcmp(sub, "help") == 0) {
    fputs(usage_trace, stdout);
    return 0;
  }
  if (strcmp(sub, "gen") == 0)
    return cmd_gen(argc - 1, argv + 1);
  if (strcmp(sub, "import") == 0)
    return cmd_import(argc - 1, argv + 1);
  if (strcmp(sub, "info") == 0)
    return cmd_info(argc - 1, argv + 1);
  if (strcmp(sub, "export") == 0)
    return cmd_export(argc - 1, argv + 1);
  fprintf(stderr, "joulesim trace: unknown command '%s'\n%s", sub,
          usage_trace);
  return EXIT_USAGE;
}

/* cli/cmd_trace.c -- `joulesim trace gen|import|info|export`.
 *
 * Conventions (DESIGN section 8): every subcommand has --help; options
 * take their value as --opt VALUE or --opt=VALUE (cli/options.h); exit
 * status 2 for usage errors (unknown option, missing argument, malformed
 * number), 1 for user errors (unreadable or invalid file, values the
 * models refuse), with a message that names the file or the option.
 * Output files are written durably (temporary file + rename), so an error
 * never leaves a partial file behind; an existing file that is not
 * joulesim's of that kind is refused unless --force.  Inputs are read
 * through run/inputs.h, as js.trace.import reads them.
 */
#include "cli/commands.h"
#include "cli/options.h"
#include "run/inputs.h"
#include "run/memory.h"
#include "models/net.h"
#include "traces/gpt.h"
#include "traces/gpt_memory.h"
#include "traces/import.h"
#include "traces/info.h"
#include "traces/native.h"
#include "traces/timeline.h"
#include "cli/policy_spec.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers --------------------------------------------------------------- */

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

/* Prints the GPU memory the job of cfg needs per rank (traces/
 * gpt_memory.h) and whether it fits gpu's, when the catalogue knows it. */
static void print_gpu_memory(const GptConfig *cfg, const GpuSpec *gpu)
{
  GptMemoryRecipe recipe = gpt_memory_recipe_from_config(cfg);
  g_autoptr(GptMemory) m = gpt_memory_new(cfg, &recipe);
  g_autoptr(GString) text = g_string_new(NULL);
  gpt_memory_describe(m, text);
  guint p = gpt_memory_peak_stage(m);
  double gb = gpt_memory_stage(m, p)->total_bytes / 1e9;
  if (gpu->memory_gb.v > 0)
    g_string_append_printf(text, "  peak: stage %u, %.1f GB of the %s's "
                           "%.0f GB: %s\n", p, gb, gpu->name,
                           gpu->memory_gb.v,
                           gb <= gpu->memory_gb.v ? "fits" : "does not fit");
  fputs(text->str, stdout);
}

/* Prints the importer's warnings on stderr. */
static void print_warnings(const char *cmd, GPtrArray *warnings)
{
  for (guint i = 0; i < warnings->len; i++)
    fprintf(stderr, "joulesim trace %s: warning: %s\n", cmd,
            (const char *)g_ptr_array_index(warnings, i));
}

/* Loads the command's input files with the session's catalogue, printing
 * the importer's warnings; NULL after printing the error. */
static SimWorkload *load_files(const char *cmd, JsSession *s,
                               GPtrArray *files, const char *gpu,
                               const TraceImportOptions *how)
{
  GError *err = NULL;
  g_autoptr(GPtrArray) warnings = g_ptr_array_new_with_free_func(g_free);
  SimWorkload *w = js_inputs_load(s->catalogue,
                                  (const char *const *)files->pdata,
                                  files->len, gpu, how, s->max_memory,
                                  warnings, &err);
  print_warnings(cmd, warnings);
  if (w == NULL)
    fail_user(cmd, err);
  return w;
}

/* ---- trace gen -------------------------------------------------------------- */

static const char usage_gen[] =
  "usage: joulesim trace gen [OPTIONS] -o TRACE.h5\n"
  "\n"
  "Generates one training iteration of a GPT-3 model as Megatron-LM runs it\n"
  "(traces/gpt.h) and writes it as a native trace file, then prints the GPU\n"
  "memory each pipeline stage's ranks would need and whether it fits the\n"
  "--gpu's memory (docs/gpt-generator.md, \"Memory\").\n"
  "  --model M           a preset (below; default gpt3-1.3b)\n"
  "  --arch A            gpt (learned positions), bloom (ALiBi, embedding\n"
  "                      LayerNorm) or llama (RMSNorm, SwiGLU, rotary, GQA,\n"
  "                      untied head); the preset's by default\n"
  "  --kv-heads N        key/value heads (llama; default: heads)\n"
  "  --ffn-hidden N      FFN width (llama; default 4 x hidden)\n"
  "  --tp N --pp N --dp N  tensor, pipeline and data parallel sizes (1)\n"
  "  --microbatches N    microbatches per iteration per pipeline (8)\n"
  "  --seq-len N         sequence length (2048)\n"
  "  --mbs N             microbatch size (1)\n"
  "  --schedule S        1f1b (default) or gpipe\n"
  "  --recompute         full activation recomputation\n"
  "  --precision P       bf16 (default), fp16, tf32 (tensor cores), fp32\n"
  "                      (CUDA cores): GEMM and attention rates, element bytes;\n"
  "                      or fp8 (Transformer Engine: FP8 GEMM inputs, BF16\n"
  "                      elsewhere; needs an FP8 GPU such as H100-SXM5-80GB)\n"
  "  --attention A       unfused (default: Megatron's softmax kernels) or\n"
  "                      flash (one fused kernel each way, causal)\n"
  "  --sequence-parallel Megatron's sequence parallelism (with --tp > 1)\n"
  "  --tp-comm-overlap   Transformer Engine's overlap of each sequence-\n"
  "                      parallel collective with its GEMM (needs\n"
  "                      --sequence-parallel)\n"
  "  --context-parallel N\n"
  "                      context parallel size (1): the sequence split over\n"
  "                      N ranks, attention as megatron-core's ring passing\n"
  "                      K/V blocks (needs --attention flash; ranks = tp x\n"
  "                      cp x pp x dp; --seq-len a multiple of 2N)\n"
  "  --zero N            0 (default: DDP all-reduce), 1 (Megatron's\n"
  "                      distributed optimizer), 2 (ZeRO-2: gradients\n"
  "                      sharded too; pp 1) or 3 (FSDP: parameters too;\n"
  "                      --impl hf, pp 1)\n"
  "  --zero-group G      all (default: shard over dp) or node (FSDP's\n"
  "                      hybrid sharding: shard within a node, replicate\n"
  "                      across nodes; --zero 2 or 3, --impl hf)\n"
  "  --gpus-per-node N   the node --zero-group node shards within (8)\n"
  "  --global-batch-size N\n"
  "                      sequences per iteration: sets --microbatches to\n"
  "                      N / (--mbs x --dp); --mbs x --dp must divide N\n"
  "  --impl I            megatron (default: fused kernels) or hf (Hugging\n"
  "                      Face in eager PyTorch, as Merak runs it; tp 1)\n"
  "  --stage-layers N,N,...\n"
  "                      transformer layers per pipeline stage (--pp entries\n"
  "                      summing to the model's layers; default: uniform)\n"
  "  --gpu NAME          reference GPU for kernel durations (A100-SXM4-80GB)\n"
  "  -o, --output FILE   the trace file to write (required)\n"
  "  --force             replace FILE even when it is not a joulesim trace\n"
  "                      (refused otherwise)\n";

/* trace gen's options: the counts first (their ids index gen_counts). */
enum {
  GEN_TP, GEN_PP, GEN_DP, GEN_MICROBATCHES, GEN_SEQ_LEN, GEN_MBS, GEN_CP,
  GEN_N_COUNTS,
  GEN_HELP = GEN_N_COUNTS, GEN_MODEL, GEN_SCHEDULE, GEN_GPU, GEN_OUTPUT,
  GEN_STAGE_LAYERS, GEN_PRECISION, GEN_ARCH, GEN_IMPL, GEN_ATTENTION,
  GEN_ZERO, GEN_GBS, GEN_KV_HEADS, GEN_FFN, GEN_ZERO_GROUP, GEN_GPN,
  GEN_RECOMPUTE, GEN_SP, GEN_TP_OVERLAP, GEN_FORCE
};

static const CliOption gen_options[] = {
  {"--tp", GEN_TP, TRUE},
  {"--pp", GEN_PP, TRUE},
  {"--dp", GEN_DP, TRUE},
  {"--microbatches", GEN_MICROBATCHES, TRUE},
  {"--seq-len", GEN_SEQ_LEN, TRUE},
  {"--mbs", GEN_MBS, TRUE},
  {"--context-parallel", GEN_CP, TRUE},
  {"--help", GEN_HELP, FALSE},
  {"-h", GEN_HELP, FALSE},
  {"--model", GEN_MODEL, TRUE},
  {"--schedule", GEN_SCHEDULE, TRUE},
  {"--gpu", GEN_GPU, TRUE},
  {"--output", GEN_OUTPUT, TRUE},
  {"-o", GEN_OUTPUT, TRUE},
  {"--stage-layers", GEN_STAGE_LAYERS, TRUE},
  {"--precision", GEN_PRECISION, TRUE},
  {"--arch", GEN_ARCH, TRUE},
  {"--impl", GEN_IMPL, TRUE},
  {"--attention", GEN_ATTENTION, TRUE},
  {"--zero", GEN_ZERO, TRUE},
  {"--global-batch-size", GEN_GBS, TRUE},
  {"--kv-heads", GEN_KV_HEADS, TRUE},
  {"--ffn-hidden", GEN_FFN, TRUE},
  {"--zero-group", GEN_ZERO_GROUP, TRUE},
  {"--gpus-per-node", GEN_GPN, TRUE},
  {"--recompute", GEN_RECOMPUTE, FALSE},
  {"--sequence-parallel", GEN_SP, FALSE},
  {"--tp-comm-overlap", GEN_TP_OVERLAP, FALSE},
  {"--force", GEN_FORCE, FALSE},
  {NULL, 0, FALSE}};

/* What trace gen's options ask for (strings borrowed from argv). */
typedef struct {
  GptConfig cfg;
  const char *str[GEN_FORCE + 1]; /* by option id: the string options */
  gboolean force;
} GenCfg;

/* Reads trace gen's options.  Returns -1 to go on, else the exit status
 * (help printed, or a usage error reported). */
static int parse_gen(int argc, char **argv, GenCfg *g)
{
  static const guint64 count_hi[GEN_N_COUNTS] = {
    1024, 4096, 1u << 20, 100000, 1u << 20, 65536, 1024};
  guint *count_field[GEN_N_COUNTS] = {
    &g->cfg.tp, &g->cfg.pp, &g->cfg.dp, &g->cfg.microbatches,
    &g->cfg.seq_len, &g->cfg.microbatch_size, &g->cfg.cp};
  const char *cmd = "gen";
  CliArgs a;
  cli_args_init(&a, argc, argv, gen_options, 0);
  for (int id; (id = cli_next(&a)) != CLI_DONE;) {
    if (id == GEN_HELP) {
      fputs(usage_gen, stdout);
      GString *m = g_string_new("\npresets (--model):\n");
      gpt_describe_models(m);
      fputs(m->str, stdout);
      g_string_free(m, TRUE);
      return 0;
    } else if (id >= 0 && id < GEN_N_COUNTS) {
      guint64 v = 0;
      if (!parse_count(a.value, 1, count_hi[id], &v))
        return fail_usage(cmd, usage_gen,
                          "%s needs an integer from 1 to %" G_GUINT64_FORMAT
                          " (got '%s')", a.name, count_hi[id],
                          a.value ? a.value : "nothing");
      *count_field[id] = (guint)v;
    } else if (id == GEN_RECOMPUTE) {
      g->cfg.recompute = TRUE;
    } else if (id == GEN_SP) {
      g->cfg.sequence_parallel = TRUE;
    } else if (id == GEN_TP_OVERLAP) {
      g->cfg.tp_comm_overlap = TRUE;
    } else if (id == GEN_FORCE) {
      g->force = TRUE;
    } else if (id >= 0) {
      if (a.value == NULL)
        return fail_usage(cmd, usage_gen, "%s needs a value",
                          id == GEN_OUTPUT ? "-o" : a.name);
      g->str[id] = a.value;
    } else if (id == CLI_UNKNOWN || a.arg[0] == '-') {
      return fail_usage(cmd, usage_gen, "unknown option '%s'", a.arg);
    } else {
      return fail_usage(cmd, usage_gen, "unexpected argument '%s'", a.arg);
    }
  }
  return -1;
}

/* Applies the string options to g->cfg (layers_of receives the
 * --stage-layers array the config points to).  Returns -1 to go on, else
 * the exit status after printing the error. */
static int gen_apply(GenCfg *g, guint **layers_of)
{
  const char *cmd = "gen";
  GptConfig *cfg = &g->cfg;
  GError *err = NULL;
  /* The model sets only layers, hidden, heads, vocab, arch and (Llama)
   * kv_heads and ffn_hidden. */
  if (g->str[GEN_MODEL] != NULL &&
      !gpt_config_set_model(cfg, g->str[GEN_MODEL], &err))
    return fail_user(cmd, err);
  if (g->str[GEN_SCHEDULE] != NULL &&
      !gpt_schedule_from_name(g->str[GEN_SCHEDULE], &cfg->schedule, &err))
    return fail_user(cmd, err);
  if (g->str[GEN_PRECISION] != NULL &&
      !gpt_precision_from_name(g->str[GEN_PRECISION], &cfg->precision, &err))
    return fail_option(cmd, "--precision", err);
  if (g->str[GEN_ARCH] != NULL &&
      !gpt_arch_from_name(g->str[GEN_ARCH], &cfg->arch, &err))
    return fail_option(cmd, "--arch", err);
  if (g->str[GEN_IMPL] != NULL &&
      !gpt_impl_from_name(g->str[GEN_IMPL], &cfg->impl, &err))
    return fail_option(cmd, "--impl", err);
  if (g->str[GEN_ATTENTION] != NULL &&
      !gpt_attention_from_name(g->str[GEN_ATTENTION], &cfg->attention, &err))
    return fail_option(cmd, "--attention", err);
  guint64 num = 0;
  if (g->str[GEN_ZERO] != NULL) {
    if (!parse_count(g->str[GEN_ZERO], 0, 3, &num))
      return fail_usage(cmd, usage_gen, "--zero needs 0, 1, 2 or 3 (got "
                        "'%s')", g->str[GEN_ZERO]);
    cfg->zero = (guint)num;
  }
  if (g->str[GEN_ZERO_GROUP] != NULL &&
      !gpt_zero_group_from_name(g->str[GEN_ZERO_GROUP], &cfg->zero_group,
                                &err))
    return fail_option(cmd, "--zero-group", err);
  if (g->str[GEN_GPN] != NULL) {
    if (!parse_count(g->str[GEN_GPN], 1, 1u << 20, &num))
      return fail_usage(cmd, usage_gen, "--gpus-per-node needs an integer "
                        "from 1 to %u (got '%s')", 1u << 20, g->str[GEN_GPN]);
    cfg->gpus_per_node = (guint)num;
  }
  if (g->str[GEN_KV_HEADS] != NULL) {
    if (!parse_count(g->str[GEN_KV_HEADS], 1, 65536, &num))
      return fail_usage(cmd, usage_gen, "--kv-heads needs an integer from 1 "
                        "to 65536 (got '%s')", g->str[GEN_KV_HEADS]);
    cfg->kv_heads = (guint)num;
  }
  if (g->str[GEN_FFN] != NULL) {
    if (!parse_count(g->str[GEN_FFN], 1, 1u << 20, &num))
      return fail_usage(cmd, usage_gen, "--ffn-hidden needs an integer from "
                        "1 to %u (got '%s')", 1u << 20, g->str[GEN_FFN]);
    cfg->ffn_hidden = (guint)num;
  }
  if (g->str[GEN_GBS] != NULL) {
    if (!parse_count(g->str[GEN_GBS], 1, 1u << 30, &num))
      return fail_usage(cmd, usage_gen, "--global-batch-size needs an "
                        "integer from 1 to %u (got '%s')", 1u << 30,
                        g->str[GEN_GBS]);
    cfg->global_batch_size = (guint)num;
    if (!gpt_config_resolve_batch(cfg, &err))
      return fail_option(cmd, "--global-batch-size", err);
  }
  if (g->str[GEN_STAGE_LAYERS] != NULL) {
    g_auto(GStrv) parts = g_strsplit(g->str[GEN_STAGE_LAYERS], ",", -1);
    guint n = g_strv_length(parts);
    if (n != cfg->pp) {
      fprintf(stderr, "joulesim trace gen: --stage-layers has %u entries, "
              "--pp is %u: give one layer count per stage\n", n, cfg->pp);
      return EXIT_USER;
    }
    *layers_of = g_new(guint, n);
    for (guint i = 0; i < n; i++) {
      guint64 v = 0;
      if (!parse_count(parts[i], 1, 255, &v))
        return fail_usage(cmd, usage_gen, "--stage-layers: entry %u must be "
                          "an integer from 1 to 255 (got '%s')", i + 1,
                          parts[i]);
      (*layers_of)[i] = (guint)v;
    }
    cfg->stage_layers = *layers_of;
  }
  return -1;
}

static int cmd_gen(int argc, char **argv)
{
  const char *cmd = "gen";
  GenCfg g;
  memset(&g, 0, sizeof g);
  gpt_config_init(&g.cfg);
  g.str[GEN_GPU] = "A100-SXM4-80GB";
  int rc = parse_gen(argc, argv, &g);
  if (rc >= 0)
    return rc;
  const char *out = g.str[GEN_OUTPUT];
  if (out == NULL)
    return fail_usage(cmd, usage_gen, "missing -o TRACE.h5");
  GError *err = NULL;
  if (!g.force && !js_output_check(out, JS_FILE_TRACE, FORCE_HINT, &err))
    return fail_option(cmd, "-o", err);
  g_autofree guint *layers_of = NULL;
  rc = gen_apply(&g, &layers_of);
  if (rc >= 0)
    return rc;
  GptConfig *cfg = &g.cfg;
  if ((guint64)cfg->tp * cfg->cp * cfg->pp * cfg->dp > (1u << 20)) {
    fprintf(stderr, "joulesim trace gen: tp*%spp*dp = %" G_GUINT64_FORMAT
            " ranks is more than the 1,048,576 supported\n",
            cfg->cp > 1 ? "cp*" : "",
            (guint64)cfg->tp * cfg->cp * cfg->pp * cfg->dp);
    return EXIT_USER;
  }
  g_autoptr(GpuCatalogue) cat = cli_catalogue_new();
  const GpuSpec *gpu = gpu_catalogue_lookup(cat, g.str[GEN_GPU], &err);
  if (gpu == NULL)
    return fail_option(cmd, "--gpu", err);
  if (!gpt_config_validate(cfg, &err))
    return fail_user(cmd, err);
  if (!js_memory_check(0, gpt_estimate_bytes(cfg), "the workload", &err))
    return fail_user(cmd, err);
  g_autoptr(SimWorkload) w = gpt_generate(cfg, gpu, &err);
  if (w == NULL)
    return fail_user(cmd, err);
  rc = save_native(cmd, w, out);
  if (rc == 0)
    print_gpu_memory(cfg, gpu);
  return rc;
}

/* ---- trace import and trace info ---------------------------------------------- */

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

enum { IMP_HELP, IMP_OUTPUT, IMP_GPU, IMP_STEP, IMP_GPU_ONLY, IMP_FORCE };

static const CliOption import_options[] = {
  {"--help", IMP_HELP, FALSE},
  {"-h", IMP_HELP, FALSE},
  {"--output", IMP_OUTPUT, TRUE},
  {"-o", IMP_OUTPUT, TRUE},
  {"--gpu", IMP_GPU, TRUE},
  {"--step", IMP_STEP, TRUE},
  {"--gpu-only", IMP_GPU_ONLY, FALSE},
  {"--force", IMP_FORCE, FALSE},
  {NULL, 0, FALSE}};

/* trace info's options: import's but -o and --force. */
static const CliOption info_options[] = {
  {"--help", IMP_HELP, FALSE},
  {"-h", IMP_HELP, FALSE},
  {"--gpu", IMP_GPU, TRUE},
  {"--step", IMP_STEP, TRUE},
  {"--gpu-only", IMP_GPU_ONLY, FALSE},
  {NULL, 0, FALSE}};

/* What trace import's (or info's) options ask for. */
typedef struct {
  const char *out, *gpu;
  TraceImportOptions how;
  gboolean force;
  GPtrArray *files; /* borrowed from argv */
} ImportCfg;

/* Reads the options of trace import (info: opts = info_options).
 * Returns -1 to go on, else the exit status. */
static int parse_import(const char *cmd, const char *usage,
                        const CliOption *opts, int argc, char **argv,
                        ImportCfg *c)
{
  CliArgs a;
  cli_args_init(&a, argc, argv, opts, 0);
  for (int id; (id = cli_next(&a)) != CLI_DONE;) {
    switch (id) {
    case IMP_HELP:
      fputs(usage, stdout);
      return 0;
    case IMP_OUTPUT:
      if (a.value == NULL)
        return fail_usage(cmd, usage, "-o needs a file name");
      c->out = a.value;
      break;
    case IMP_GPU:
      if (a.value == NULL)
        return fail_usage(cmd, usage, "--gpu needs a GPU name");
      c->gpu = a.value;
      break;
    case IMP_STEP: {
      if (a.value == NULL)
        return fail_usage(cmd, usage, "--step needs N, first, median or "
                          "all");
      GError *e = NULL;
      if (!trace_parse_step_option(a.value, &c->how, &e)) {
        int rc = fail_usage(cmd, usage, "--step: %s", e->message);
        g_error_free(e);
        return rc;
      }
      break;
    }
    case IMP_GPU_ONLY:
      c->how.gpu_only = TRUE;
      break;
    case IMP_FORCE:
      c->force = TRUE;
      break;
    case CLI_UNKNOWN:
      return fail_usage(cmd, usage, "unknown option '%s'", a.arg);
    default:
      g_ptr_array_add(c->files, (gpointer)a.arg);
      break;
    }
  }
  return -1;
}

static int cmd_import(int argc, char **argv)
{
  const char *cmd = "import";
  g_autoptr(GPtrArray) files = g_ptr_array_new();
  ImportCfg c = {.files = files};
  int rc = parse_import(cmd, usage_import, import_options, argc, argv, &c);
  if (rc >= 0)
    return rc;
  if (files->len == 0)
    return fail_usage(cmd, usage_import, "missing trace FILES");
  if (c.out == NULL)
    return fail_usage(cmd, usage_import, "missing -o TRACE.h5");
  g_autoptr(JsSession) s = cli_session_new(1);
  GError *err = NULL;
  if (!c.force && !js_output_check(c.out, JS_FILE_TRACE, FORCE_HINT, &err))
    return fail_option(cmd, "-o", err);
  if (c.gpu != NULL && gpu_catalogue_lookup(s->catalogue, c.gpu, &err) == NULL)
    return fail_option(cmd, "--gpu", err);
  g_autoptr(SimWorkload) w = load_files(cmd, s, files, c.gpu, &c.how);
  if (w == NULL)
    return EXIT_USER;
  return save_native(cmd, w, c.out);
}

static int cmd_info(int argc, char **argv)
{
  const char *cmd = "info";
  g_autoptr(GPtrArray) files = g_ptr_array_new();
  ImportCfg c = {.files = files};
  int rc = parse_import(cmd, usage_info, info_options, argc, argv, &c);
  if (rc >= 0)
    return rc;
  if (files->len == 0)
    return fail_usage(cmd, usage_info, "missing FILE");
  g_autoptr(JsSession) s = cli_session_new(1);
  GError *err = NULL;
  if (c.gpu != NULL && gpu_catalogue_lookup(s->catalogue, c.gpu, &err) == NULL)
    return fail_option(cmd, "--gpu", err);
  g_autoptr(SimWorkload) w = load_files(cmd, s, files, c.gpu, &c.how);
  if (w == NULL)
    return EXIT_USER;
  GString *text = g_string_new(NULL);
  g_autofree char *label = js_inputs_label((const char *const *)files->pdata,
                                           files->len);
  g_string_append_printf(text, "trace         %s\n", label);
  trace_info(w, text);
  fputs(text->str, stdout);
  g_string_free(text, TRUE);
  return 0;
}

/* ---- trace export ------------------------------------------------------------ */

static const char usage_export[] =
  "usage: joulesim trace export --chrome OUT.json [OPTIONS] TRACE.h5|FILES...\n"
  "       joulesim trace export --h5 OUT.h5 --run NAME [OPTIONS] TRACE...\n"
  "\n"
  "Simulates the trace on a cluster and writes the replay's timeline as\n"
  "Chrome trace-event JSON (open it in ui.perfetto.dev or chrome://tracing):\n"
  "one process per GPU, one thread per stream, kernels and communication as\n"
  "complete events (class, clocks, power and energy in args), blocked time,\n"
  "and counter tracks for SM clock and power; or, with --h5, each GPU's\n"
  "power and SM clock over time as /timelines/NAME of a results file\n"
  "(docs/sweeps.md, \"Timelines\").\n"
  "  --chrome FILE         the JSON file to write\n"
  "  --h5 FILE             the HDF5 results file to write the power timeline\n"
  "                        to (created when missing); with --run NAME\n"
  "  --force               replace the --chrome FILE even when it is not a\n"
  "                        joulesim timeline (refused otherwise); with --h5,\n"
  "                        replace the timeline NAME when it exists\n"
  "  --cluster-gpu NAME    GPU model of the cluster (default: the trace's\n"
  "                        reference GPU, else A100-SXM4-80GB)\n"
  "  --network NAME        dgx-a100, dgx-h100 or pcie (default from the GPU)\n"
  "  --gpus-per-node N     GPUs per node (8)\n"
  "  --policy P            NAME[:KEY=VALUE,...]: any js.policy but custom,\n"
  "                        with its Lua arguments: max (default), fixed:SM\n"
  "                        or fixed:SM:MEM (MHz), powercap:watts=300,\n"
  "                        kernel:slowdown=0.01,granularity=op,\n"
  "                        perseus:slowdown=0.05, envpipe, zeus:eta=0.5,\n"
  "                        plan:N.sched.json (docs/lua-api.md)\n"
  "  --iterations N        iterations to replay (1)\n"
  "  --seed N              seed of the run (1)\n"
  "  --gpus LIST           GPUs to export, e.g. 0,3,8-15 (default all)\n"
  "  --window T0:T1        simulated time to export, e.g. 0.1:0.2 or\n"
  "                        10ms:25ms (units ns, us, ms, s; default s)\n"
  "  --gpu NAME            GPU to assume for imported devices not in the\n"
  "                        catalogue\n";

enum {
  EXP_HELP, EXP_CHROME, EXP_CLUSTER_GPU, EXP_NETWORK, EXP_GPUS_PER_NODE,
  EXP_GPUS, EXP_WINDOW, EXP_GPU, EXP_POLICY, EXP_ITERATIONS, EXP_SEED,
  EXP_FORCE, EXP_H5, EXP_RUN
};

static const CliOption export_options[] = {
  {"--help", EXP_HELP, FALSE},
  {"-h", EXP_HELP, FALSE},
  {"--chrome", EXP_CHROME, TRUE},
  {"--cluster-gpu", EXP_CLUSTER_GPU, TRUE},
  {"--network", EXP_NETWORK, TRUE},
  {"--gpus-per-node", EXP_GPUS_PER_NODE, TRUE},
  {"--gpus", EXP_GPUS, TRUE},
  {"--window", EXP_WINDOW, TRUE},
  {"--gpu", EXP_GPU, TRUE},
  {"--policy", EXP_POLICY, TRUE},
  {"--iterations", EXP_ITERATIONS, TRUE},
  {"--seed", EXP_SEED, TRUE},
  {"--force", EXP_FORCE, FALSE},
  {"--h5", EXP_H5, TRUE},
  {"--run", EXP_RUN, TRUE},
  {NULL, 0, FALSE}};

/* What trace export's options ask for (strings borrowed from argv). */
typedef struct {
  const char *out, *cluster_gpu, *network, *gpus_spec, *window, *gpu;
  const char *h5, *run;      /* --h5 FILE --run NAME: an HDF5 timeline */
  guint64 iterations, seed, per_node;
  gboolean force;
  DvfsPolicy pol;
  SchedPlan *plan;           /* plan:FILE: pol's clocks (owned) */
  GPtrArray *files;
} ExportCfg;

/* Reads trace export's options.  Returns -1 to go on, else the exit
 * status. */
static int parse_export(int argc, char **argv, ExportCfg *c)
{
  const char *cmd = "export";
  CliArgs a;
  cli_args_init(&a, argc, argv, export_options, 0);
  for (int id; (id = cli_next(&a)) != CLI_DONE;) {
    const char **str = NULL;
    switch (id) {
    case EXP_HELP:
      fputs(usage_export, stdout);
      return 0;
    case EXP_GPUS_PER_NODE:
      if (!parse_count(a.value, 1, 64, &c->per_node))
        return fail_usage(cmd, usage_export,
                          "--gpus-per-node needs an integer from 1 to 64");
      continue;
    case EXP_POLICY: {
      if (a.value == NULL)
        return fail_usage(cmd, usage_export, "--policy needs a value");
      GError *err = NULL;
      g_clear_pointer(&c->plan, sched_plan_free);
      if (!cli_policy_parse(a.value, &c->pol, &c->plan, &err)) {
        /* A plan file that cannot be read is bad input, not usage. */
        if (err->domain != CLI_POLICY_ERROR)
          return fail_option(cmd, "--policy", err);
        int rc = fail_usage(cmd, usage_export, "--policy: %s", err->message);
        g_error_free(err);
        return rc;
      }
      continue;
    }
    case EXP_ITERATIONS:
      if (!parse_count(a.value, 1, 100000, &c->iterations))
        return fail_usage(cmd, usage_export,
                          "--iterations needs an integer from 1 to 100000");
      continue;
    case EXP_SEED:
      if (!parse_count(a.value, 0, G_MAXINT64, &c->seed))
        return fail_usage(cmd, usage_export,
                          "--seed needs a non-negative integer");
      continue;
    case EXP_FORCE:
      c->force = TRUE;
      continue;
    case EXP_CHROME: str = &c->out; break;
    case EXP_H5: str = &c->h5; break;
    case EXP_RUN: str = &c->run; break;
    case EXP_CLUSTER_GPU: str = &c->cluster_gpu; break;
    case EXP_NETWORK: str = &c->network; break;
    case EXP_GPUS: str = &c->gpus_spec; break;
    case EXP_WINDOW: str = &c->window; break;
    case EXP_GPU: str = &c->gpu; break;
    case CLI_UNKNOWN:
      return fail_usage(cmd, usage_export, "unknown option '%s'", a.arg);
    default:
      g_ptr_array_add(c->files, (gpointer)a.arg);
      continue;
    }
    if (a.value == NULL)
      return fail_usage(cmd, usage_export, "%s needs a value", a.name);
    *str = a.value;
  }
  return -1;
}

/* Prints what the export wrote and simulated. */
static void export_report(const ExportCfg *x, const TraceTimelineCounts *n,
                          const char *label, const SimResult *r)
{
  double t = (double)r->time_ns * 1e-9;
  if (x->h5 != NULL)
    printf("wrote %s: /timelines/%s, %" G_GUINT64_FORMAT " samples\n",
           x->h5, x->run, n->counter);
  else
    printf("wrote %s: %" G_GUINT64_FORMAT " op events, %" G_GUINT64_FORMAT
           " blocked, %" G_GUINT64_FORMAT " markers, %" G_GUINT64_FORMAT
           " counter samples\n", x->out, n->complete, n->blocked,
           n->instant, n->counter);
  printf("simulated %s: %u GPUs, %u iteration%s, %.6f s, %.3f J, "
         "%.1f W per GPU\n", label,
         r->n_gpus, r->n_iterations, r->n_iterations == 1 ? "" : "s", t,
         r->energy_j, t > 0 ? r->energy_j / t / r->n_gpus : 0.0);
}

/* Replays w on c (spec, net) writing the timeline; reports.  The exit
 * status. */
static int export_run(const ExportCfg *x, JsSession *s, const SimWorkload *w,
                      const Cluster *c, const GpuSpec *spec,
                      const NetSpec *net, gint64 t0, gint64 t1)
{
  const char *cmd = "export";
  g_autofree char *plabel = dvfs_policy_label(&x->pol, spec);
  g_autofree char *tlabel = js_inputs_label(
    (const char *const *)x->files->pdata, x->files->len);
  g_autofree char *label = g_strdup_printf("%s on %u x %s, %s, policy %s",
                                           tlabel, w->n_ranks, spec->name,
                                           net->name, plabel);
  JsTimelineSpec t;
  js_timeline_spec_init(&t);
  t.path = x->h5 != NULL ? x->h5 : x->out;
  t.name = x->run;
  t.replace = x->force;
  t.meta = (ResMeta){JOULESIM_VERSION, tlabel, NULL, x->seed, NULL, NULL};
  t.gpus = x->gpus_spec;
  t.gpus_context = g_ptr_array_index(x->files, 0);
  t.t0_ns = t0;
  t.t1_ns = t1;
  t.label = label;

  JsRunOptions ropt;
  memset(&ropt, 0, sizeof ropt);
  ropt.iterations = (guint)x->iterations;
  ropt.seed = x->seed;
  ropt.switch_latency_ms = -1;
  ropt.timeline = &t;
  g_auto(JsRunReport) rep = {0};
  GError *err = NULL;
  g_autoptr(SimResult) r = js_simulate_report(s, c, w, &x->pol, &ropt, &rep,
                                              &err);
  if (r == NULL) {
    /* Only writing an HDF5 timeline over one of that name says so. */
    if (g_error_matches(err, RES_ERROR, RES_ERROR_EXISTS))
      g_prefix_error(&err, "--force replaces it: ");
    return fail_user(cmd, err); /* no file left */
  }
  export_report(x, &rep.timeline, label, r);
  return 0;
}

static int cmd_export(int argc, char **argv)
{
  const char *cmd = "export";
  g_autoptr(GPtrArray) files = g_ptr_array_new();
  ExportCfg x = {.iterations = 1, .seed = 1, .per_node = 8, .files = files};
  dvfs_policy_init(&x.pol, DVFS_MAX);
  int rc = parse_export(argc, argv, &x);
  g_autoptr(SchedPlan) plan = x.plan; /* freed on every return */
  if (rc >= 0)
    return rc;
  if (x.out == NULL && x.h5 == NULL)
    return fail_usage(cmd, usage_export, "missing --chrome OUT.json (or "
                      "--h5 OUT.h5 --run NAME)");
  if (x.out != NULL && x.h5 != NULL)
    return fail_usage(cmd, usage_export, "give --chrome or --h5, not both");
  if ((x.h5 == NULL) != (x.run == NULL))
    return fail_usage(cmd, usage_export, "--h5 OUT.h5 and --run NAME go "
                      "together");
  if (files->len == 0)
    return fail_usage(cmd, usage_export, "missing TRACE.h5 or FILES");
  GError *err = NULL;
  /* A results file is written into, never replaced: --force replaces
   * only the timeline. */
  if (x.h5 != NULL && !js_output_check(x.h5, JS_FILE_RESULTS, NULL, &err))
    return fail_option(cmd, "--h5", err);
  if (x.out != NULL && !x.force &&
      !js_output_check(x.out, JS_FILE_TIMELINE, FORCE_HINT, &err))
    return fail_option(cmd, "--chrome", err);
  gint64 t0 = 0, t1 = -1;
  if (x.window != NULL &&
      !trace_timeline_parse_window(x.window, &t0, &t1, &err)) {
    fprintf(stderr, "joulesim trace export: --window: %s\n%s", err->message,
            usage_export);
    g_error_free(err);
    return EXIT_USAGE;
  }

  g_autoptr(JsSession) s = cli_session_new(x.seed);
  if (x.gpu != NULL && gpu_catalogue_lookup(s->catalogue, x.gpu, &err) == NULL)
    return fail_option(cmd, "--gpu", err);
  g_autoptr(SimWorkload) w = load_files(cmd, s, files, x.gpu, NULL);
  if (w == NULL)
    return EXIT_USER;
  if (w->n_ranks == 0) {
    fprintf(stderr, "joulesim trace export: %s: the trace has no ranks\n",
            (const char *)g_ptr_array_index(files, 0));
    return EXIT_USER;
  }

  /* The cluster: one GPU per rank. */
  const char *cluster_gpu = x.cluster_gpu;
  if (cluster_gpu == NULL)
    cluster_gpu = w->ref_gpu != NULL &&
                      gpu_catalogue_lookup(s->catalogue, w->ref_gpu, NULL)
                    ? w->ref_gpu
                    : "A100-SXM4-80GB";
  const GpuSpec *spec = gpu_catalogue_lookup(s->catalogue, cluster_gpu, &err);
  if (spec == NULL)
    return fail_option(cmd, "--cluster-gpu", err);
  g_autoptr(NetSpec) net = net_preset(
    x.network != NULL ? x.network : net_default_preset(spec->name), &err);
  if (net == NULL)
    return fail_option(cmd, "--network", err);
  guint gpn = (guint)MIN(x.per_node, (guint64)w->n_ranks);
  g_autoptr(Cluster) c = cluster_new(spec, net, w->n_ranks, gpn, &err);
  if (c == NULL)
    return fail_user(cmd, err);
  if (!dvfs_policy_check(&x.pol, c, &err))
    return fail_option(cmd, "--policy", err);
  return export_run(&x, s, w, c, spec, net, t0, t1);
}

/* ---- dispatch ------------------------------------------------------------------ */

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

int cmd_trace(int argc, char **argv)
{
  if (argc < 1) {
    fputs(usage_trace, stderr);
    return EXIT_USAGE;
  }
  const char *sub = argv[0];
  if (cli_is_help(sub) || strcmp(sub, "help") == 0) {
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

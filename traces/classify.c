/* traces/classify.c -- the tables that give imported names a meaning.
 *
 * Every table is matched in order and the first match wins, so put specific
 * patterns before general ones ("reducescatter" before "reduce", "fbgemm"
 * before "gemm").  Names are lower-cased first; patterns are lower-case
 * substrings unless the table says "prefix" or "exact".  The tables are
 * heuristics: a kernel name says what library and algorithm produced it,
 * not what it did.  Known limits: convolutions count as GEMM (tensor-core
 * bound like GEMMs); cuDNN batch norm as norm; a kernel no row matches is
 * "other", which the GPU model prices with middle-of-the-road fractions.
 * The test tests/test-import.c checks every row against a real name.
 */
#include "traces/classify.h"

#include <string.h>

typedef struct {
  const char *pattern;
  SimOpClass klass;
} ClassRule;

/* Kernel name -> class.  Extend here. */
static const ClassRule class_rules[] = {
  /* communication and copies first: their names contain other words */
  {"nccl", SIM_CLASS_COMM},
  {"memcpy", SIM_CLASS_MEMCPY},
  {"memset", SIM_CLASS_MEMCPY},
  /* attention (FlashAttention, cuDNN/xFormers fused MHA, SDPA) */
  {"flash", SIM_CLASS_ATTENTION},
  {"fmha", SIM_CLASS_ATTENTION},
  {"attention", SIM_CLASS_ATTENTION},
  {"attn", SIM_CLASS_ATTENTION},
  {"sdpa", SIM_CLASS_ATTENTION},
  {"softmax", SIM_CLASS_SOFTMAX},
  /* normalisation (PyTorch, Apex, TransformerEngine, cuDNN batch norm) */
  {"layer_norm", SIM_CLASS_NORM},
  {"layernorm", SIM_CLASS_NORM},
  {"rms_norm", SIM_CLASS_NORM},
  {"rmsnorm", SIM_CLASS_NORM},
  {"batch_norm", SIM_CLASS_NORM},
  {"batchnorm", SIM_CLASS_NORM},
  {"group_norm", SIM_CLASS_NORM},
  {"groupnorm", SIM_CLASS_NORM},
  {"instance_norm", SIM_CLASS_NORM},
  {"cudnn::bn_", SIM_CLASS_NORM},
  {"ln_fwd", SIM_CLASS_NORM},
  {"ln_bwd", SIM_CLASS_NORM},
  {"norm_fwd", SIM_CLASS_NORM},
  {"norm_bwd", SIM_CLASS_NORM},
  {"rowwisemoments", SIM_CLASS_NORM},  /* PyTorch layer norm statistics */
  {"gammabeta", SIM_CLASS_NORM},       /* PyTorch layer norm backward */
  /* embeddings (PyTorch, fbgemm table-batched embeddings) */
  {"embedding", SIM_CLASS_EMBEDDING},
  {"indexselect", SIM_CLASS_EMBEDDING},
  {"index_select", SIM_CLASS_EMBEDDING},
  /* optimizers (fused / multi-tensor Adam, SGD; not "lamb": it would
   * match every "{lambda(int)#1}" in element-wise kernel names) */
  {"adam", SIM_CLASS_OPTIMIZER},
  {"sgd", SIM_CLASS_OPTIMIZER},
  {"adagrad", SIM_CLASS_OPTIMIZER},
  {"multi_tensor_apply", SIM_CLASS_OPTIMIZER},
  {"optimizer", SIM_CLASS_OPTIMIZER},
  /* fbgemm_gpu's other kernels are data movement, not GEMMs */
  {"fbgemm_gpu::", SIM_CLASS_ELEMENTWISE},
  /* GEMMs and convolutions (cuBLAS, cuBLASLt, CUTLASS, cuDNN xmma) */
  {"gemm", SIM_CLASS_GEMM},
  {"gemv", SIM_CLASS_GEMM},
  {"cublas", SIM_CLASS_GEMM},
  {"cutlass", SIM_CLASS_GEMM},
  {"xmma", SIM_CLASS_GEMM},
  {"nvjet", SIM_CLASS_GEMM},
  {"matmul", SIM_CLASS_GEMM},
  {"s16816", SIM_CLASS_GEMM},
  {"h16816", SIM_CLASS_GEMM},
  {"s1688", SIM_CLASS_GEMM},
  {"h1688", SIM_CLASS_GEMM},
  {"wgrad", SIM_CLASS_GEMM},
  {"dgrad", SIM_CLASS_GEMM},
  {"fprop", SIM_CLASS_GEMM},
  {"winograd", SIM_CLASS_GEMM},
  {"scudnn", SIM_CLASS_GEMM},          /* cuDNN convolutions */
  {"convolve", SIM_CLASS_GEMM},
  {"conv2d", SIM_CLASS_GEMM},
  {"ampere_", SIM_CLASS_GEMM},
  {"volta_", SIM_CLASS_GEMM},
  {"turing_", SIM_CLASS_GEMM},
  {"sm80_", SIM_CLASS_GEMM},
  {"sm90_", SIM_CLASS_GEMM},
  /* reductions, losses, sorts and scans */
  {"reduce", SIM_CLASS_REDUCTION},
  {"reduction", SIM_CLASS_REDUCTION},
  {"cross_entropy", SIM_CLASS_REDUCTION},
  {"nll_loss", SIM_CLASS_REDUCTION},
  {"triton_red", SIM_CLASS_REDUCTION},
  {"triton_per", SIM_CLASS_REDUCTION},
  {"radixsort", SIM_CLASS_REDUCTION},
  {"scan", SIM_CLASS_REDUCTION},
  {"argmax", SIM_CLASS_REDUCTION},
  {"pool", SIM_CLASS_REDUCTION},       /* max/avg pooling */
  /* element-wise and data movement */
  {"elementwise", SIM_CLASS_ELEMENTWISE},
  {"vectorized", SIM_CLASS_ELEMENTWISE},
  {"pointwise", SIM_CLASS_ELEMENTWISE},
  {"unrolled", SIM_CLASS_ELEMENTWISE},
  {"triton_", SIM_CLASS_ELEMENTWISE},
  {"catarray", SIM_CLASS_ELEMENTWISE},
  {"fill", SIM_CLASS_ELEMENTWISE},
  {"copy", SIM_CLASS_ELEMENTWISE},
  {"transpose", SIM_CLASS_ELEMENTWISE},
  {"permute", SIM_CLASS_ELEMENTWISE},
  {"nchwtonhwc", SIM_CLASS_ELEMENTWISE},
  {"nhwctonchw", SIM_CLASS_ELEMENTWISE},
  {"gelu", SIM_CLASS_ELEMENTWISE},
  {"relu", SIM_CLASS_ELEMENTWISE},
  {"silu", SIM_CLASS_ELEMENTWISE},
  {"dropout", SIM_CLASS_ELEMENTWISE},
  {"activation", SIM_CLASS_ELEMENTWISE},
  {"scatter", SIM_CLASS_ELEMENTWISE},
  {"gather", SIM_CLASS_ELEMENTWISE},
  {"index", SIM_CLASS_ELEMENTWISE},
};

SimOpClass trace_classify_kernel(const char *name)
{
  if (name == NULL)
    return SIM_CLASS_OTHER;
  g_autofree char *low = g_ascii_strdown(name, -1);
  for (gsize i = 0; i < G_N_ELEMENTS(class_rules); i++)
    if (strstr(low, class_rules[i].pattern) != NULL)
      return class_rules[i].klass;
  return SIM_CLASS_OTHER;
}

gboolean trace_is_nccl_kernel(const char *name)
{
  if (name == NULL)
    return FALSE;
  g_autofree char *low = g_ascii_strdown(name, -1);
  return strstr(low, "nccl") != NULL;
}

/* ---- communication ------------------------------------------------------ */

typedef struct {
  const char *pattern;  /* substring of the name, lower case, no '_' */
  TraceCommKind kind;
  SimCollType coll;
} CommRule;

/* Collective names (PyTorch "Collective name" args, c10d op names, NCCL
 * kernel names) with '_' removed.  Approximations: barrier and reduce are
 * priced as all-reduces, gather as an all-gather, scatter as a broadcast. */
static const CommRule comm_rules[] = {
  {"allreduce", TRACE_COMM_COLL, SIM_COLL_ALL_REDUCE},
  {"allgather", TRACE_COMM_COLL, SIM_COLL_ALL_GATHER},
  {"reducescatter", TRACE_COMM_COLL, SIM_COLL_REDUCE_SCATTER},
  {"alltoall", TRACE_COMM_COLL, SIM_COLL_ALL_TO_ALL},
  {"broadcast", TRACE_COMM_COLL, SIM_COLL_BROADCAST},
  {"bcast", TRACE_COMM_COLL, SIM_COLL_BROADCAST},
  {"barrier", TRACE_COMM_COLL, SIM_COLL_ALL_REDUCE},
  {"sendrecv", TRACE_COMM_SENDRECV, SIM_COLL_SEND_RECV},
  {"send", TRACE_COMM_SEND, SIM_COLL_SEND_RECV},
  {"recv", TRACE_COMM_RECV, SIM_COLL_SEND_RECV},
  {"reduce", TRACE_COMM_COLL, SIM_COLL_ALL_REDUCE},
  {"gather", TRACE_COMM_COLL, SIM_COLL_ALL_GATHER},
  {"scatter", TRACE_COMM_COLL, SIM_COLL_BROADCAST},
};

/* Lower case without '_', cut at the first '(' (kernel argument lists). */
static char *comm_normalise(const char *name)
{
  GString *s = g_string_sized_new(64);
  for (const char *p = name; *p != '\0' && *p != '('; p++)
    if (*p != '_')
      g_string_append_c(s, g_ascii_tolower(*p));
  return g_string_free(s, FALSE);
}

static gboolean comm_match(const char *name, TraceCommKind *kind,
                           SimCollType *coll)
{
  g_autofree char *n = comm_normalise(name);
  for (gsize i = 0; i < G_N_ELEMENTS(comm_rules); i++) {
    if (strstr(n, comm_rules[i].pattern) != NULL) {
      *kind = comm_rules[i].kind;
      *coll = comm_rules[i].coll;
      return TRUE;
    }
  }
  return FALSE;
}

gboolean trace_comm_from_collective_name(const char *name,
                                         TraceCommKind *kind,
                                         SimCollType *coll)
{
  if (name == NULL || *name == '\0')
    return FALSE;
  return comm_match(name, kind, coll);
}

gboolean trace_comm_from_kernel_name(const char *name, TraceCommKind *kind,
                                     SimCollType *coll)
{
  *kind = TRACE_COMM_COLL;
  *coll = SIM_COLL_ALL_REDUCE;
  if (name == NULL)
    return FALSE;
  /* Skip the "ncclKernel"/"ncclDevKernel" prefix so its letters cannot
   * match a rule. */
  const char *p = name;
  g_autofree char *low = g_ascii_strdown(name, -1);
  const char *k = strstr(low, "kernel");
  if (k != NULL && strstr(low, "nccl") != NULL && strstr(low, "nccl") < k)
    p = name + (k - low) + strlen("kernel");
  TraceCommKind kk;
  SimCollType cc;
  if (!comm_match(p, &kk, &cc))
    return FALSE;
  *kind = kk;
  *coll = cc;
  return TRUE;
}

/* ---- dtypes ------------------------------------------------------------- */

typedef struct {
  const char *name;  /* exact, lower case, namespace stripped */
  guint bytes;
} DtypeRule;

static const DtypeRule dtype_rules[] = {
  {"float", 4},         {"float32", 4},       {"double", 8},
  {"float64", 8},       {"half", 2},          {"float16", 2},
  {"bfloat16", 2},      {"int", 4},           {"int32", 4},
  {"long", 8},          {"int64", 8},         {"short", 2},
  {"int16", 2},         {"byte", 1},          {"char", 1},
  {"bool", 1},          {"uint8", 1},         {"int8", 1},
  {"complexfloat", 8},  {"complexdouble", 16}, {"complexhalf", 4},
  {"uint16", 2},        {"uint32", 4},        {"uint64", 8},
};

guint trace_dtype_bytes(const char *dtype)
{
  if (dtype == NULL)
    return 0;
  g_autofree char *low = g_ascii_strdown(dtype, -1);
  const char *p = low;
  static const char *const prefixes[] = {"c10::", "torch.", "at::"};
  for (gsize i = 0; i < G_N_ELEMENTS(prefixes); i++)
    if (g_str_has_prefix(p, prefixes[i]))
      p += strlen(prefixes[i]);
  if (g_str_has_prefix(p, "float8"))
    return 1;
  for (gsize i = 0; i < G_N_ELEMENTS(dtype_rules); i++)
    if (strcmp(p, dtype_rules[i].name) == 0)
      return dtype_rules[i].bytes;
  return 0;
}

/* ---- phases and iterations ---------------------------------------------- */

typedef enum { M_PREFIX, M_SUBSTR } MatchMode;

typedef struct {
  const char *pattern;  /* lower case */
  MatchMode mode;
  gint phase;           /* SimPhase, or -1: marks no phase (stop) */
} PhaseRule;

/* CPU-side names that mark a phase.  Wrappers spanning several phases
 * (Megatron's forward_backward_func) must mark nothing, hence first. */
static const PhaseRule phase_rules[] = {
  {"forward_backward", M_SUBSTR, -1},
  {"forward-backward", M_SUBSTR, -1},
  {"fwd_bwd", M_SUBSTR, -1},
  {"profilerstep#", M_PREFIX, -1},
  {"autograd::engine::evaluate_function", M_PREFIX, SIM_PHASE_BACKWARD},
  {"optimizer", M_SUBSTR, SIM_PHASE_OPTIMIZER},
  {"backward", M_SUBSTR, SIM_PHASE_BACKWARD},
  {"forward", M_SUBSTR, SIM_PHASE_FORWARD},
};

gint trace_phase_of_annotation(const char *name)
{
  if (name == NULL)
    return -1;
  /* Fast path: most CPU op names ("aten::mm") contain none of the
   * patterns' first letters in a matching way; the loop is short anyway. */
  g_autofree char *low = g_ascii_strdown(name, -1);
  for (gsize i = 0; i < G_N_ELEMENTS(phase_rules); i++) {
    const PhaseRule *r = &phase_rules[i];
    gboolean hit = r->mode == M_PREFIX ? g_str_has_prefix(low, r->pattern)
                                       : strstr(low, r->pattern) != NULL;
    if (hit)
      return r->phase;
  }
  return -1;
}

gboolean trace_parse_step(const char *name, gint64 *number)
{
  static const char *const prefixes[] = {"profilerstep", "iteration", "iter",
                                         "step"};
  if (name == NULL)
    return FALSE;
  g_autofree char *low = g_ascii_strdown(name, -1);
  g_strstrip(low);
  const char *p = NULL;
  for (gsize i = 0; i < G_N_ELEMENTS(prefixes) && p == NULL; i++)
    if (g_str_has_prefix(low, prefixes[i]))
      p = low + strlen(prefixes[i]);
  if (p == NULL)
    return FALSE;
  while (*p == ' ' || *p == '_' || *p == '#' || *p == ':' || *p == '=' ||
         *p == '-')
    p++;
  if (!g_ascii_isdigit(*p))
    return FALSE;
  gint64 v = 0;
  for (; g_ascii_isdigit(*p); p++) {
    if (v > (G_MAXINT64 - 9) / 10)
      return FALSE;
    v = v * 10 + (*p - '0');
  }
  if (*p != '\0')
    return FALSE;
  *number = v;
  return TRUE;
}

/* ---- devices ------------------------------------------------------------ */

typedef struct {
  const char *pattern;  /* lower-case substring of the device name */
  const char *gpu;      /* catalogue name; NULL: a board that must not
                           match a later, looser pattern */
} DeviceRule;

/* Profiler device names (nvidia-smi / cudaGetDeviceProperties) that do not
 * spell the catalogue name.  The A100 "PG509-200" board (a 40 GB SXM4
 * variant) is deliberately absent: its clocks and power limit differ. */
static const DeviceRule device_rules[] = {
  {"a100-sxm4-80gb", "A100-SXM4-80GB"},
  {"a100-sxm-80gb", "A100-SXM4-80GB"},
  {"a100-sxm4-40gb", "A100-SXM4-40GB"},
  {"a100 80gb pcie", "A100-PCIE-80GB"},
  {"a100-pcie-80gb", "A100-PCIE-80GB"},
  {"h100 80gb hbm3", "H100-SXM5-80GB"},
  {"h100-sxm5", "H100-SXM5-80GB"},
  {"h100 sxm5", "H100-SXM5-80GB"},
  {"h100 pcie", "H100-PCIE-80GB"},
  {"h100-pcie", "H100-PCIE-80GB"},
  {"rtx 3080 ti", "RTX-3080-Ti"},
  {"v100-sxm2-16gb", "V100-SXM2-16GB"},  /* "Tesla V100-SXM2-16GB" */
  {"v100-sxm2-32gb", "V100-SXM2-32GB"},
  {"h200 nvl", NULL},                    /* the 600 W PCIe board: unknown */
  {"h200", "H200-SXM-141GB"},            /* "NVIDIA H200" */
  {"l40s", "L40S"},                      /* "NVIDIA L40S" (not the L40) */
};

/* Lower case, "nvidia " prefix dropped, spaces as '-'. */
static char *device_normalise(const char *name)
{
  g_autofree char *low = g_ascii_strdown(name, -1);
  g_strstrip(low);
  const char *p = low;
  if (g_str_has_prefix(p, "nvidia "))
    p += strlen("nvidia ");
  char *out = g_strdup(p);
  for (char *q = out; *q != '\0'; q++)
    if (*q == ' ')
      *q = '-';
  return out;
}

const char *trace_gpu_for_device(const GpuCatalogue *cat, const char *device)
{
  if (cat == NULL || device == NULL || *device == '\0')
    return NULL;
  g_autofree char *norm = device_normalise(device);
  g_autoptr(GPtrArray) names = gpu_catalogue_names(cat);
  for (guint i = 0; i < names->len; i++) {
    const char *n = g_ptr_array_index(names, i);
    g_autofree char *cn = device_normalise(n);
    if (strcmp(cn, norm) == 0)
      return n;
  }
  g_autofree char *low = g_ascii_strdown(device, -1);
  for (gsize i = 0; i < G_N_ELEMENTS(device_rules); i++) {
    if (strstr(low, device_rules[i].pattern) == NULL)
      continue;
    if (device_rules[i].gpu == NULL)
      return NULL; /* a known board with no entry of its own */
    for (guint k = 0; k < names->len; k++)
      if (strcmp(g_ptr_array_index(names, k), device_rules[i].gpu) == 0)
        return g_ptr_array_index(names, k);
  }
  return NULL;
}

/* ---- runtime calls -------------------------------------------------------- */

typedef struct {
  const char *prefix;
  TraceCall call;
} CallRule;

/* Prefixes, first match wins; "cuda" and "cu" spellings of each call.
 * cudaMemcpyToSymbol, cudaMemcpy2DAsync ... are copies too. */
static const CallRule call_rules[] = {
  {"cudaLaunchKernel", TRACE_CALL_LAUNCH},
  {"cudaLaunchCooperativeKernel", TRACE_CALL_LAUNCH},
  {"cuLaunchKernel", TRACE_CALL_LAUNCH},
  {"cuLaunchCooperativeKernel", TRACE_CALL_LAUNCH},
  {"cudaGraphLaunch", TRACE_CALL_LAUNCH},
  {"cudaMemcpy", TRACE_CALL_MEMCPY},
  {"cuMemcpy", TRACE_CALL_MEMCPY},
  {"cudaMemset", TRACE_CALL_MEMSET},
  {"cuMemset", TRACE_CALL_MEMSET},
  {"cudaStreamSynchronize", TRACE_CALL_SYNC_STREAM},
  {"cuStreamSynchronize", TRACE_CALL_SYNC_STREAM},
  {"cudaDeviceSynchronize", TRACE_CALL_SYNC_DEVICE},
  {"cuCtxSynchronize", TRACE_CALL_SYNC_DEVICE},
  {"cudaEventSynchronize", TRACE_CALL_SYNC_EVENT},
  {"cuEventSynchronize", TRACE_CALL_SYNC_EVENT},
  {"cudaStreamWaitEvent", TRACE_CALL_WAIT_EVENT},
  {"cuStreamWaitEvent", TRACE_CALL_WAIT_EVENT},
};

TraceCall trace_runtime_call(const char *name)
{
  if (name == NULL)
    return TRACE_CALL_OTHER;
  for (gsize i = 0; i < G_N_ELEMENTS(call_rules); i++)
    if (g_str_has_prefix(name, call_rules[i].prefix))
      return call_rules[i].call;
  return TRACE_CALL_OTHER;
}

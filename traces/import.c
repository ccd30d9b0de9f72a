/* traces/import.c -- format detection, dispatch, and what the importers
 * share: raw ranks, the reference GPU, warnings, and the last step of
 * every import, sharing the programs of alike ranks
 * (sim_workload_share_alike).
 *
 * The builder that turns raw ranks into a workload is traces/import_build.c
 * (the algorithm: its opening comment), with traces/import_select.c (what
 * each rank keeps: windows, phases, streams, dependencies) and
 * traces/import_host.c (the CPU side's host streams).
 */
#include "traces/import-private.h"
#include "traces/classify.h"
#include "io/fault.h"
#include "io/input.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

G_DEFINE_QUARK(trace-error-quark, trace_error)

#define DEFAULT_GPU "A100-SXM4-80GB"

const char *trace_format_name(TraceFormat f)
{
  switch (f) {
  case TRACE_FORMAT_KINETO: return "kineto";
  case TRACE_FORMAT_NSYS: return "nsys";
  case TRACE_FORMAT_CHAKRA: return "chakra";
  case TRACE_FORMAT_NATIVE: return "native";
  default: return "unknown";
  }
}

void trace_warn(const TraceImportOptions *opt, const char *fmt, ...)
{
  if (opt == NULL || opt->warnings == NULL)
    return;
  va_list ap;
  va_start(ap, fmt);
  g_ptr_array_add(opt->warnings, g_strdup_vprintf(fmt, ap));
  va_end(ap);
}

gboolean trace_parse_step_option(const char *text, TraceImportOptions *opt,
                                 GError **error)
{
  g_return_val_if_fail(text != NULL && opt != NULL, FALSE);
  if (strcmp(text, "first") == 0) {
    opt->step = TRACE_STEP_FIRST;
    return TRUE;
  }
  if (strcmp(text, "median") == 0) {
    opt->step = TRACE_STEP_MEDIAN;
    return TRUE;
  }
  if (strcmp(text, "all") == 0) {
    opt->step = TRACE_STEP_ALL;
    return TRUE;
  }
  char *end = NULL;
  errno = 0;
  gint64 v = g_ascii_strtoll(text, &end, 10);
  if (text[0] == '\0' || *end != '\0' || errno != 0 || v < 0 ||
      !g_ascii_isdigit(text[0])) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_INVALID,
                "step \"%s\": expected first, median, all or a step number",
                text);
    return FALSE;
  }
  opt->step = TRACE_STEP_NUMBER;
  opt->step_number = v;
  return TRUE;
}

/* ---- format detection --------------------------------------------------- */

static gboolean has_suffix_ci(const char *path, const char *suffix)
{
  gsize n = strlen(path), m = strlen(suffix);
  return n >= m && g_ascii_strcasecmp(path + n - m, suffix) == 0;
}

TraceFormat trace_detect_format(const char *path, GError **error)
{
  g_return_val_if_fail(path != NULL, TRACE_FORMAT_UNKNOWN);
  /* io/input.h: a FIFO or a device is refused at once (opening a FIFO
   * without a writer blocks forever), a directory too. */
  IoInput in;
  if (!io_input_open(&in, path, "import: detect format", TRACE_ERROR,
                     TRACE_ERROR_IO, error))
    return TRACE_FORMAT_UNKNOWN;
  unsigned char head[64];
  size_t n = 0;
  int read_errno = 0;
  while (n < sizeof head) {
    ssize_t r = read(in.fd, head + n, sizeof head - n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      read_errno = errno;
    if (r <= 0)
      break;
    n += (size_t)r;
  }
  io_input_close(&in);
  if (read_errno != 0) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_IO, "%s: read error (%s)",
                path, g_strerror(read_errno));
    return TRACE_FORMAT_UNKNOWN;
  }
  /* Content first: magic numbers are unambiguous. */
  if (n >= 16 && memcmp(head, "SQLite format 3", 16) == 0)
    return TRACE_FORMAT_NSYS;
  if (n >= 8 && memcmp(head, "\x89HDF\r\n\x1a\n", 8) == 0)
    return TRACE_FORMAT_NATIVE;
  if (n >= 2 && head[0] == 0x1f && head[1] == 0x8b)
    return TRACE_FORMAT_KINETO; /* gzip: the only compressed format */
  /* Then the name. */
  if (has_suffix_ci(path, ".json") || has_suffix_ci(path, ".json.gz"))
    return TRACE_FORMAT_KINETO;
  if (has_suffix_ci(path, ".sqlite") || has_suffix_ci(path, ".sqlite3"))
    return TRACE_FORMAT_NSYS;
  if (has_suffix_ci(path, ".et"))
    return TRACE_FORMAT_CHAKRA;
  if (has_suffix_ci(path, ".h5") || has_suffix_ci(path, ".hdf5"))
    return TRACE_FORMAT_NATIVE;
  /* Then the look of the content. */
  size_t i = 0;
  while (i < n && g_ascii_isspace(head[i]))
    i++;
  if (i < n && (head[i] == '{' || head[i] == '['))
    return TRACE_FORMAT_KINETO;
  if (n == 0) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT,
                "%s: empty file (expected a Kineto .json[.gz], an Nsight "
                "Systems .sqlite or a Chakra .et trace)", path);
    return TRACE_FORMAT_UNKNOWN;
  }
  g_set_error(error, TRACE_ERROR, TRACE_ERROR_UNSUPPORTED,
              "%s: unknown trace format (expected a Kineto .json[.gz], an "
              "Nsight Systems .sqlite or a Chakra .et trace)", path);
  return TRACE_FORMAT_UNKNOWN;
}

/* ---- raw ranks ---------------------------------------------------------- */

static void clear_comm(gpointer p)
{
  TraceRawComm *c = p;
  g_free(c->ranks);
  g_free(c->pg_name);
}

TraceRawRank *trace_raw_rank_new(const char *path)
{
  TraceRawRank *r = g_new0(TraceRawRank, 1);
  r->path = g_strdup(path);
  r->rank = -1;
  r->world_size = -1;
  r->ops = g_array_new(FALSE, FALSE, sizeof(TraceRawOp));
  r->comms = g_array_new(FALSE, FALSE, sizeof(TraceRawComm));
  g_array_set_clear_func(r->comms, clear_comm);
  r->ranges = g_array_new(FALSE, FALSE, sizeof(TraceRawRange));
  r->syncs = g_array_new(FALSE, FALSE, sizeof(TraceRawSync));
  r->launches = g_array_new(FALSE, FALSE, sizeof(TraceRawLaunch));
  r->cpu_ops = g_array_new(FALSE, FALSE, sizeof(TraceRawCpuOp));
  r->works = g_array_new(FALSE, FALSE, sizeof(TraceRawWork));
  r->devices = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free,
                                     g_free);
  r->pg_ranks = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
                                      g_free);
  return r;
}

void trace_raw_rank_free(TraceRawRank *r)
{
  if (r == NULL)
    return;
  g_free(r->path);
  g_array_unref(r->ops);
  g_array_unref(r->comms);
  g_array_unref(r->ranges);
  g_array_unref(r->syncs);
  g_array_unref(r->launches);
  g_array_unref(r->cpu_ops);
  g_array_unref(r->works);
  g_free(r->bad_shape_op);
  g_hash_table_unref(r->devices);
  g_hash_table_unref(r->pg_ranks);
  g_free(r);
}

/* ---- reference GPU ------------------------------------------------------ */

char *trace_ref_gpu(const TraceImportOptions *opt, const char *device,
                    const char *path, GError **error)
{
  g_autoptr(GpuCatalogue) own = NULL;
  const GpuCatalogue *cat = opt != NULL ? opt->catalogue : NULL;
  if (cat == NULL)
    cat = own = gpu_catalogue_new();
  const char *fallback = opt != NULL && opt->gpu != NULL ? opt->gpu
                                                         : DEFAULT_GPU;
  if (opt != NULL && opt->gpu != NULL) {
    GError *e = NULL;
    if (gpu_catalogue_lookup(cat, opt->gpu, &e) == NULL) {
      g_set_error(error, TRACE_ERROR, TRACE_ERROR_INVALID,
                  "gpu \"%s\" (the GPU to assume for %s): %s", opt->gpu,
                  path, e->message);
      g_error_free(e);
      return NULL;
    }
  }
  const char *hit = trace_gpu_for_device(cat, device);
  if (hit != NULL)
    return g_strdup(hit);
  if (device != NULL)
    trace_warn(opt, "%s: device \"%s\" is not in the GPU catalogue; "
               "durations are taken as measured on %s", path, device,
               fallback);
  else
    trace_warn(opt, "%s: the trace names no GPU model; durations are "
               "taken as measured on %s", path, fallback);
  return g_strdup(fallback);
}

/* ---- dispatch ----------------------------------------------------------- */

SimWorkload *trace_import(const char *const *paths, guint n,
                          const TraceImportOptions *opt, GError **error)
{
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  TraceImportOptions dflt = {0};
  if (opt == NULL)
    opt = &dflt;
  if (n == 0 || paths == NULL) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_INVALID,
                "no trace files given");
    return NULL;
  }
  TraceFormat fmt = TRACE_FORMAT_UNKNOWN;
  for (guint i = 0; i < n; i++) {
    TraceFormat f = trace_detect_format(paths[i], error);
    if (f == TRACE_FORMAT_UNKNOWN)
      return NULL;
    if (i > 0 && f != fmt) {
      g_set_error(error, TRACE_ERROR, TRACE_ERROR_UNSUPPORTED,
                  "%s is a %s trace but %s is a %s trace; import one format "
                  "at a time", paths[0], trace_format_name(fmt), paths[i],
                  trace_format_name(f));
      return NULL;
    }
    fmt = f;
  }
  SimWorkload *w = NULL;
  switch (fmt) {
  case TRACE_FORMAT_KINETO:
  case TRACE_FORMAT_NSYS: {
    g_autoptr(SimWorkload) names = sim_workload_new(0);
    g_autoptr(GPtrArray) raws = g_ptr_array_new_with_free_func(
        (GDestroyNotify)trace_raw_rank_free);
    for (guint i = 0; i < n; i++) {
      if (fmt == TRACE_FORMAT_KINETO) {
        TraceRawRank *r = trace_kineto_read(paths[i], names, error);
        if (r == NULL)
          return NULL;
        g_ptr_array_add(raws, r);
      } else if (!trace_nsys_read(paths[i], names, raws, error)) {
        return NULL;
      }
    }
    w = trace_raw_build(raws, names, opt, trace_format_name(fmt), error);
    break;
  }
  case TRACE_FORMAT_CHAKRA:
    w = trace_chakra_import(paths, n, opt, error);
    break;
  case TRACE_FORMAT_NATIVE:
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_UNSUPPORTED,
                "%s is a native joulesim trace: load it, do not import it",
                paths[0]);
    return NULL;
  default:
    g_assert_not_reached();
  }
  /* Every importer builds each rank's ops on their own; ranks that run
   * alike ops (the same records, their groups and peers shifted by one
   * constant) share one copy, as generated workloads do.  Exact, and
   * nothing downstream edits imported ops in place (a consumer that does
   * must call sim_workload_materialise_rank first). */
  if (w != NULL)
    sim_workload_share_alike(w);
  return w;
}

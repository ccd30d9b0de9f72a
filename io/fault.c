/* io/fault.c -- the countdown switch of io/fault.h.
 *
 * Algorithm.  One process-wide record {fail_at, kinds, log, count, fired,
 * suspended}.  fault_inject() is an inline test of `fault_enabled_` (FALSE
 * unless armed or logging), so a disarmed run pays one well-predicted
 * branch per guarded call and never calls in here.  Armed, each guarded call
 * whose kind is selected and which is not inside fault_suspend() takes the
 * next ordinal k = ++count (an atomic add, so concurrent callers never share
 * an ordinal); it must fail exactly when k == fail_at.  Only that one call
 * fails: the countdown models one transient fault (a read error, a full
 * disk, an allocation refused) and asks whether the code around it cleans
 * up, not whether it retries.
 *
 * Parameters: JOULESIM_FAULT (fail_at), JOULESIM_FAULT_KIND (kinds),
 * JOULESIM_FAULT_LOG (log), read by fault_configure_from_env().
 *
 * Known limits.  Which call is the N-th is deterministic when the guarded
 * calls happen on one thread in a fixed order (every CLI command today;
 * js.sweep's workers are processes, each with its own count after fork).
 * A fault is injected *instead of* the call (or, for HDF5, instead of the
 * driver operation), so the failure is the one the call would report, not
 * a partial read or a short write.
 */
#include "io/fault.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

G_DEFINE_QUARK(fault-error-quark, fault_error)

/* The switch (see the header's "State" for why it is global). */
typedef struct {
  guint64 fail_at;   /* the ordinal that fails; 0: none */
  guint kinds;       /* FaultKind bits counted */
  gboolean log;      /* one stderr line per counted call */
  guint64 count;     /* ordinals handed out so far */
  guint64 fired;     /* the ordinal that was failed, 0 before */
  gint suspended;    /* fault_suspend() depth */
} FaultState;

static FaultState fault_state = { 0, FAULT_ALL, FALSE, 0, 0, 0 };
gboolean fault_enabled_ = FALSE;

static const struct {
  const char *name;
  guint bits;
} kind_names[] = {
  { "read", FAULT_READ },   { "write", FAULT_WRITE }, { "hdf5", FAULT_HDF5 },
  { "alloc", FAULT_ALLOC }, { "all", FAULT_ALL },
};

const char *fault_kind_name(FaultKind kind)
{
  for (gsize i = 0; i < G_N_ELEMENTS(kind_names); i++)
    if (kind_names[i].bits == (guint)kind)
      return kind_names[i].name;
  return "?";
}

gboolean fault_configure(guint64 fail_at, guint kinds, gboolean log,
                         GError **error)
{
  if ((kinds & FAULT_ALL) == 0 || (kinds & ~(guint)FAULT_ALL) != 0) {
    g_set_error(error, FAULT_ERROR, FAULT_ERROR_CONFIG,
                "fault kinds 0x%x: need a non-empty set of read, write, "
                "hdf5, alloc", kinds);
    return FALSE;
  }
  fault_state.fail_at = fail_at;
  fault_state.kinds = kinds;
  fault_state.log = log;
  fault_state.count = 0;
  fault_state.fired = 0;
  fault_state.suspended = 0;
  fault_enabled_ = fail_at > 0 || log;
  return TRUE;
}

void fault_reset(void)
{
  fault_configure(0, FAULT_ALL, FALSE, NULL);
}

gboolean fault_parse_kinds(const char *s, guint *kinds, GError **error)
{
  g_return_val_if_fail(s != NULL && kinds != NULL, FALSE);
  guint bits = 0;
  g_auto(GStrv) parts = g_strsplit(s, ",", -1);
  for (guint i = 0; parts[i] != NULL; i++) {
    const char *p = g_strstrip(parts[i]);
    guint b = 0;
    for (gsize k = 0; k < G_N_ELEMENTS(kind_names); k++)
      if (strcmp(p, kind_names[k].name) == 0)
        b = kind_names[k].bits;
    if (b == 0) {
      g_set_error(error, FAULT_ERROR, FAULT_ERROR_CONFIG,
                  "JOULESIM_FAULT_KIND: unknown kind '%s' in '%s' (expected "
                  "a comma-separated list of read, write, hdf5, alloc, all)",
                  p, s);
      return FALSE;
    }
    bits |= b;
  }
  *kinds = bits;
  return TRUE;
}

/* A decimal integer without sign, spaces or trailing text. */
static gboolean parse_ordinal(const char *s, guint64 *out)
{
  if (s == NULL || !g_ascii_isdigit(s[0]))
    return FALSE;
  char *end = NULL;
  errno = 0;
  guint64 v = g_ascii_strtoull(s, &end, 10);
  if (errno != 0 || end == NULL || *end != '\0')
    return FALSE;
  *out = v;
  return TRUE;
}

gboolean fault_configure_from_env(GError **error)
{
  const char *n_s = g_getenv("JOULESIM_FAULT");
  const char *kind_s = g_getenv("JOULESIM_FAULT_KIND");
  const char *log_s = g_getenv("JOULESIM_FAULT_LOG");
  guint64 fail_at = 0;
  guint kinds = FAULT_ALL;
  gboolean log = FALSE;
  if (n_s != NULL && n_s[0] != '\0' && !parse_ordinal(n_s, &fail_at)) {
    g_set_error(error, FAULT_ERROR, FAULT_ERROR_CONFIG,
                "JOULESIM_FAULT: '%s' is not a call number (a non-negative "
                "decimal integer)", n_s);
    return FALSE;
  }
  if (kind_s != NULL && kind_s[0] != '\0' &&
      !fault_parse_kinds(kind_s, &kinds, error))
    return FALSE;
  if (log_s != NULL && log_s[0] != '\0') {
    if (strcmp(log_s, "1") == 0) {
      log = TRUE;
    } else if (strcmp(log_s, "0") != 0) {
      g_set_error(error, FAULT_ERROR, FAULT_ERROR_CONFIG,
                  "JOULESIM_FAULT_LOG: '%s' must be 0 or 1", log_s);
      return FALSE;
    }
  }
  return fault_configure(fail_at, kinds, log, error);
}

guint64 fault_count(void)
{
  return __atomic_load_n(&fault_state.count, __ATOMIC_RELAXED);
}

guint64 fault_fired(void)
{
  return __atomic_load_n(&fault_state.fired, __ATOMIC_RELAXED);
}

gboolean fault_enabled(void)
{
  return fault_enabled_;
}

void fault_suspend(void)
{
  __atomic_add_fetch(&fault_state.suspended, 1, __ATOMIC_RELAXED);
}

void fault_resume(void)
{
  gint left = __atomic_sub_fetch(&fault_state.suspended, 1, __ATOMIC_RELAXED);
  if (left < 0) {
    /* More resumes than suspends: a bug in the caller. */
    __atomic_add_fetch(&fault_state.suspended, 1, __ATOMIC_RELAXED);
    g_return_if_reached();
  }
}

gboolean fault_hit(FaultKind kind, const char *site)
{
  if ((fault_state.kinds & (guint)kind) == 0 ||
      __atomic_load_n(&fault_state.suspended, __ATOMIC_RELAXED) > 0)
    return FALSE;
  guint64 k = __atomic_add_fetch(&fault_state.count, 1, __ATOMIC_RELAXED);
  gboolean fail = k == fault_state.fail_at;
  if (fail)
    __atomic_store_n(&fault_state.fired, k, __ATOMIC_RELAXED);
  if (fault_state.log) {
    /* One write(2) per line, so that the lines of forked workers sharing
     * stderr never interleave mid-line. */
    char line[512];
    int n = g_snprintf(line, sizeof line,
                       "joulesim fault[%ld]: %" G_GUINT64_FORMAT " %s %s%s\n",
                       (long)getpid(), k, fault_kind_name(kind),
                       site != NULL ? site : "?", fail ? " <- injected" : "");
    if (n > 0) {
      gsize len = MIN((gsize)n, sizeof line - 1);
      line[len - 1] = '\n';
      ssize_t w = write(STDERR_FILENO, line, len);
      (void)w;
    }
  }
  return fail;
}

gboolean fault_inject_errno(FaultKind kind, const char *site)
{
  if (!fault_inject(kind, site))
    return FALSE;
  errno = EIO;
  return TRUE;
}

FILE *fault_fopen(const char *path, const char *mode, const char *site)
{
  FaultKind kind = mode != NULL && mode[0] == 'r' && strchr(mode, '+') == NULL
                     ? FAULT_READ
                     : FAULT_WRITE;
  if (fault_inject_errno(kind, site))
    return NULL;
  return fopen(path, mode);
}

gboolean fault_get_contents(const char *path, char **contents, gsize *length,
                            const char *site, GError **error)
{
  if (fault_inject(FAULT_READ, site)) {
    g_autofree char *display = g_filename_display_name(path);
    *contents = NULL;
    if (length != NULL)
      *length = 0;
    g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_IO,
                "Failed to read from file \xe2\x80\x9c%s\xe2\x80\x9d: %s "
                "(injected fault)", display, g_strerror(EIO));
    return FALSE;
  }
  return g_file_get_contents(path, contents, length, error);
}

static gpointer try_alloc(gsize n, gsize size, gboolean zero,
                          const char *site, GQuark domain, gint code,
                          GError **error)
{
  gsize count = MAX(n, 1);
  gboolean injected = fault_inject(FAULT_ALLOC, site);
  gpointer p = NULL;
  if (!injected && size > 0 && count <= G_MAXSIZE / size)
    p = zero ? g_try_malloc0_n(count, size) : g_try_malloc_n(count, size);
  if (p == NULL)
    g_set_error(error, domain, code,
                "%s: cannot allocate %" G_GSIZE_FORMAT " records of %"
                G_GSIZE_FORMAT " bytes (%.1f MB): %s", site, n, size,
                (double)n * (double)size / 1e6,
                injected ? "injected fault" : "out of memory");
  return p;
}

gpointer fault_try_alloc(gsize n, gsize size, const char *site, GQuark domain,
                         gint code, GError **error)
{
  return try_alloc(n, size, FALSE, site, domain, code, error);
}

gpointer fault_try_alloc0(gsize n, gsize size, const char *site,
                          GQuark domain, gint code, GError **error)
{
  return try_alloc(n, size, TRUE, site, domain, code, error);
}

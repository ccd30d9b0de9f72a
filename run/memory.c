/* run/memory.c -- memory limits; see memory.h. */
#include "run/memory.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

G_DEFINE_QUARK(js-memory-error-quark, js_memory_error)

gboolean js_memory_parse(const char *text, guint64 *bytes, GError **error)
{
  const char *p = text != NULL ? text : "";
  char *end = NULL;
  errno = 0;
  if (!g_ascii_isdigit(*p))
    goto bad;
  guint64 v = g_ascii_strtoull(p, &end, 10);
  if (errno != 0)
    goto bad;
  guint shift = 0;
  switch (g_ascii_toupper(*end)) {
  case 'K': shift = 10; end++; break;
  case 'M': shift = 20; end++; break;
  case 'G': shift = 30; end++; break;
  case 'T': shift = 40; end++; break;
  default: break;
  }
  if (shift > 0 && *end == 'i')
    end++;
  if (g_ascii_toupper(*end) == 'B')
    end++;
  if (*end != '\0' || v == 0 || (shift > 0 && v > (G_MAXUINT64 >> shift)))
    goto bad;
  *bytes = v << shift;
  return TRUE;
bad:
  g_set_error(error, JS_MEMORY_ERROR, JS_MEMORY_ERROR_PARSE,
              "--max-memory: '%s' is not a size (a positive integer with an "
              "optional K, M, G or T suffix, e.g. 4G)", text != NULL ? text : "");
  return FALSE;
}

/* A decimal number (or "max") read from the first line of a file; FALSE
 * when the file is missing or says "max". */
static gboolean read_u64_file(const char *path, guint64 *out)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, NULL))
    return FALSE;
  char *end = NULL;
  errno = 0;
  guint64 v = g_ascii_strtoull(text, &end, 10);
  if (errno != 0 || end == text)
    return FALSE;
  *out = v;
  return TRUE;
}

guint64 js_memory_available(void)
{
  guint64 avail = G_MAXUINT64;
  g_autofree char *info = NULL;
  if (g_file_get_contents("/proc/meminfo", &info, NULL, NULL)) {
    const char *line = strstr(info, "MemAvailable:");
    if (line != NULL) {
      guint64 kb = g_ascii_strtoull(line + strlen("MemAvailable:"), NULL, 10);
      if (kb > 0)
        avail = kb * 1024;
    }
  }
  /* cgroup v2: the container's own limit may be far below the host's. */
  guint64 max = 0, cur = 0;
  if (read_u64_file("/sys/fs/cgroup/memory.max", &max) &&
      read_u64_file("/sys/fs/cgroup/memory.current", &cur))
    avail = MIN(avail, max > cur ? max - cur : 0);
  return avail;
}

guint64 js_memory_resident(void)
{
  g_autofree char *statm = NULL;
  if (!g_file_get_contents("/proc/self/statm", &statm, NULL, NULL))
    return 0;
  const char *p = strchr(statm, ' ');
  return p != NULL ? g_ascii_strtoull(p + 1, NULL, 10) * (guint64)sysconf(
                         _SC_PAGESIZE) : 0;
}

guint64 js_memory_limit(guint64 max_memory)
{
  if (max_memory == 0)
    return js_memory_available();
  guint64 used = js_memory_resident();
  return max_memory > used ? max_memory - used : 0;
}

char *js_memory_format(guint64 bytes)
{
  double b = (double)bytes;
  if (b >= 1e12)
    return g_strdup_printf("%.1f TB", b * 1e-12);
  if (b >= 1e9)
    return g_strdup_printf("%.1f GB", b * 1e-9);
  if (b >= 1e6)
    return g_strdup_printf("%.1f MB", b * 1e-6);
  return g_strdup_printf("%.0f kB", b * 1e-3);
}

gboolean js_memory_check(guint64 max_memory, guint64 need, const char *what,
                         GError **error)
{
  guint64 limit = js_memory_limit(max_memory);
  if (need <= limit)
    return TRUE;
  g_autofree char *n = js_memory_format(need);
  g_autofree char *l = js_memory_format(limit);
  g_set_error(error, JS_MEMORY_ERROR, JS_MEMORY_ERROR_LIMIT,
              "%s would need about %s of memory, more than the %s %s; "
              "stopped before allocating it (use a smaller or folded "
              "workload%s)", what, n, l,
              max_memory > 0 ? "left under --max-memory"
                             : "available on this machine now",
              max_memory > 0 ? ", or raise --max-memory" : "");
  return FALSE;
}

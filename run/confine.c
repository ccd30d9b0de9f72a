/* run/confine.c -- see run/confine.h. */
#include "run/confine.h"
#include "io/h5open.h"
#include "io/results.h"
#include "models/gpufile.h"
#include "traces/native.h"
#include "traces/timeline.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

G_DEFINE_QUARK(js-confine-error-quark, js_confine_error)

struct JsConfine {
  GPtrArray *dirs[2]; /* [JsAccess]: canonical directories (owned strings) */
  GPtrArray *shown[2]; /* [JsAccess]: the same directories as the user named
                          them ("the current directory", or the option's
                          argument as given), for messages: a refusal never
                          prints a canonical path (it would show a
                          script where a link outside leads) */
};

JsConfine *js_confine_new(void)
{
  JsConfine *c = g_new0(JsConfine, 1);
  for (int a = 0; a < 2; a++) {
    c->dirs[a] = g_ptr_array_new_with_free_func(g_free);
    c->shown[a] = g_ptr_array_new_with_free_func(g_free);
  }
  return c;
}

void js_confine_free(JsConfine *c)
{
  if (c == NULL)
    return;
  for (int a = 0; a < 2; a++) {
    g_ptr_array_unref(c->dirs[a]);
    g_ptr_array_unref(c->shown[a]);
  }
  g_free(c);
}

/* realpath() into GLib memory; NULL with errno set. */
static char *real_path(const char *path)
{
  char *r = realpath(path, NULL);
  if (r == NULL)
    return NULL;
  char *out = g_strdup(r);
  free(r);
  return out;
}

char *js_confine_resolve(const char *path, GError **error)
{
  if (path == NULL || *path == '\0') {
    g_set_error(error, JS_CONFINE_ERROR, JS_CONFINE_ERROR_RESOLVE,
                "an empty file name");
    return NULL;
  }
  struct stat st;
  if (lstat(path, &st) == 0) {
    char *r = real_path(path);
    if (r == NULL) {
      int e = errno;
      g_set_error(error, JS_CONFINE_ERROR, JS_CONFINE_ERROR_RESOLVE,
                  "%s: cannot resolve it: %s%s", path, g_strerror(e),
                  S_ISLNK(st.st_mode) ? " (a symbolic link to a missing file)"
                                      : "");
    }
    return r;
  }
  if (errno != ENOENT) {
    int e = errno;
    g_set_error(error, JS_CONFINE_ERROR, JS_CONFINE_ERROR_RESOLVE,
                "%s: cannot resolve it: %s", path, g_strerror(e));
    return NULL;
  }
  /* A new file: its directory must exist; its name is taken as it is. */
  g_autofree char *dir = g_path_get_dirname(path);
  g_autofree char *base = g_path_get_basename(path);
  if (strcmp(base, ".") == 0 || strcmp(base, "..") == 0 ||
      strcmp(base, G_DIR_SEPARATOR_S) == 0) {
    g_set_error(error, JS_CONFINE_ERROR, JS_CONFINE_ERROR_RESOLVE,
                "%s: not a file name", path);
    return NULL;
  }
  g_autofree char *rdir = real_path(dir);
  if (rdir == NULL) {
    int e = errno;
    g_set_error(error, JS_CONFINE_ERROR, JS_CONFINE_ERROR_RESOLVE,
                "%s: cannot resolve its directory %s: %s", path, dir,
                g_strerror(e));
    return NULL;
  }
  return g_build_filename(rdir, base, NULL);
}

gboolean js_confine_allow(JsConfine *c, JsAccess access, const char *dir,
                          const char *option, GError **error)
{
  g_autofree char *r = real_path(dir);
  if (r == NULL || !g_file_test(r, G_FILE_TEST_IS_DIR)) {
    g_set_error(error, JS_CONFINE_ERROR, JS_CONFINE_ERROR_RESOLVE,
                "%s %s: %s", option, dir,
                r == NULL ? g_strerror(errno) : "not a directory");
    return FALSE;
  }
  for (guint i = 0; i < c->dirs[access]->len; i++)
    if (strcmp(g_ptr_array_index(c->dirs[access], i), r) == 0)
      return TRUE;
  g_ptr_array_add(c->dirs[access], g_steal_pointer(&r));
  g_ptr_array_add(c->shown[access],
                  strcmp(dir, ".") == 0 ? g_strdup("the current directory")
                                        : g_strdup(dir));
  return TRUE;
}

/* TRUE when the canonical path p is dir or lies below it. */
static gboolean below(const char *p, const char *dir)
{
  gsize n = strlen(dir);
  if (n == 1 && dir[0] == '/')
    return p[0] == '/';
  return strncmp(p, dir, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

static gboolean allowed_in(const GPtrArray *dirs, const char *p)
{
  for (guint i = 0; i < dirs->len; i++)
    if (below(p, g_ptr_array_index(dirs, i)))
      return TRUE;
  return FALSE;
}

/* Is canonical path p one that `access` allows? */
static gboolean allows(const JsConfine *c, const char *p, JsAccess access)
{
  return allowed_in(c->dirs[JS_ACCESS_WRITE], p) ||
         (access == JS_ACCESS_READ && allowed_in(c->dirs[JS_ACCESS_READ], p));
}

/* Would the sandbox tell the user why `path` cannot be resolved?  Only when
 * the nearest ancestor of it that exists resolves into an allowed
 * directory: beyond them, "missing" and "there" must read the same (a
 * script could otherwise map the file system outside). */
static gboolean resolve_error_is_inside(const JsConfine *c, const char *path,
                                        JsAccess access)
{
  g_autofree char *cur = g_strdup(path);
  for (int depth = 0; depth < 4096; depth++) {
    g_autofree char *up = g_path_get_dirname(cur);
    char *r = real_path(up);
    if (r != NULL) {
      gboolean in = allows(c, r, access);
      g_free(r);
      return in;
    }
    if (strcmp(up, cur) == 0)
      return FALSE;
    g_free(cur);
    cur = g_steal_pointer(&up);
  }
  return FALSE;
}

gboolean js_confine_check(const JsConfine *c, const char *path,
                          JsAccess access, GError **error)
{
  g_return_val_if_fail(c != NULL, FALSE);
  GError *rerr = NULL;
  g_autofree char *p = js_confine_resolve(path, &rerr);
  gboolean w = access == JS_ACCESS_WRITE;
  if (p == NULL && (path == NULL || *path == '\0' ||
                    resolve_error_is_inside(c, path, access))) {
    g_propagate_prefixed_error(error, rerr, "sandbox: ");
    return FALSE;
  }
  g_clear_error(&rerr);
  if (p != NULL && allows(c, p, access)) {
    /* A second name of a file (a hard link) may be a file outside: realpath
     * cannot tell, so the sandbox writes no file that has one (finding
     * 16).  Reading one is no worse than reading the file the link is. */
    struct stat st;
    if (w && lstat(p, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink > 1) {
      g_set_error(error, JS_CONFINE_ERROR, JS_CONFINE_ERROR_DENIED,
                  "sandbox: %s: the file has %lu names (hard links); "
                  "refusing to write it (another name may lie outside the "
                  "directories the sandbox may write)", path,
                  (unsigned long)st.st_nlink);
      return FALSE;
    }
    return TRUE;
  }
  /* Refused.  The message names the path as given and the directories as
   * the user named them, never what the path resolves to (a symbolic
   * link's target, /proc/self's PID) nor whether it exists. */
  g_autoptr(GString) dirs = g_string_new(NULL);
  for (int a = JS_ACCESS_WRITE; a >= (int)access; a--)
    for (guint i = 0; i < c->dirs[a]->len; i++) {
      const char *d = g_ptr_array_index(c->dirs[a], i);
      if (a == JS_ACCESS_READ && allowed_in(c->dirs[JS_ACCESS_WRITE], d) &&
          g_ptr_array_find_with_equal_func(c->dirs[JS_ACCESS_WRITE], d,
                                           g_str_equal, NULL))
        continue; /* listed already */
      g_string_append_printf(dirs, "%s%s", dirs->len > 0 ? ", " : "",
                             (const char *)g_ptr_array_index(c->shown[a], i));
    }
  /* A name inside that leads outside: say so, not where. */
  g_autofree char *cwd = g_get_current_dir();
  g_autofree char *lexical = g_canonicalize_filename(path, cwd);
  gboolean via_link = FALSE;
  for (int a = 0; a < 2 && !via_link; a++)
    for (guint i = 0; i < c->dirs[a]->len && !via_link; i++)
      via_link = below(lexical, g_ptr_array_index(c->dirs[a], i));
  g_set_error(error, JS_CONFINE_ERROR, JS_CONFINE_ERROR_DENIED,
              "sandbox: %s is outside the directories the sandbox may %s "
              "(%s)%s; %s DIR allows one", path, w ? "write" : "read",
              dirs->len > 0 ? dirs->str : "none",
              via_link ? " through a symbolic link" : "",
              w ? "--allow-write" : "--allow-read");
  return FALSE;
}

const char *js_file_kind_name(JsFileKind kind)
{
  switch (kind) {
  case JS_FILE_TRACE:
    return "a joulesim trace";
  case JS_FILE_RESULTS:
    return "a joulesim results file";
  case JS_FILE_TIMELINE:
    return "a joulesim timeline";
  case JS_FILE_GPU:
    return "a joulesim GPU file";
  }
  return "a joulesim file";
}

static gboolean is_kind(const char *path, JsFileKind kind)
{
  switch (kind) {
  case JS_FILE_TRACE:
    return trace_native_is_trace(path);
  case JS_FILE_RESULTS:
    return res_file_probe(path);
  case JS_FILE_TIMELINE:
    return trace_timeline_probe(path);
  case JS_FILE_GPU:
    return gpu_file_probe(path);
  }
  return FALSE;
}

gboolean js_output_check(const char *path, JsFileKind kind, const char *hint,
                         GError **error)
{
  struct stat st;
  if (stat(path, &st) != 0)
    return TRUE; /* nothing there (or unreachable: the writer says why) */
  if (S_ISDIR(st.st_mode))
    return TRUE; /* every writer refuses a directory in its own words */
  if (!S_ISREG(st.st_mode)) {
    g_set_error(error, JS_CONFINE_ERROR, JS_CONFINE_ERROR_EXISTS,
                "%s: exists and is not a regular file; refusing to write "
                "it", path);
    return FALSE;
  }
  if (st.st_size == 0)
    return TRUE; /* nothing to lose */
  /* An HDF5 file that io/h5open.h refuses is refused here in its words
   * (external storage, links to other files, damage libhdf5 cannot
   * survive), not as "not a joulesim file". */
  if ((kind == JS_FILE_TRACE || kind == JS_FILE_RESULTS) &&
      !h5u_check(path, JS_CONFINE_ERROR, JS_CONFINE_ERROR_EXISTS, error))
    return FALSE;
  if (is_kind(path, kind))
    return TRUE; /* joulesim's own */
  g_set_error(error, JS_CONFINE_ERROR, JS_CONFINE_ERROR_EXISTS,
              "%s: exists and is not %s; refusing to replace it%s%s%s", path,
              js_file_kind_name(kind),
              hint != NULL ? " (" : "", hint != NULL ? hint : "",
              hint != NULL ? ")" : "");
  return FALSE;
}

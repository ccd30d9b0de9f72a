/* io/atomic.c -- writing a file atomically (temporary file, fsync, rename
 * or link).  See io/atomic.h for the contract. */
#include "io/atomic.h"
#include "io/fault.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

/* The fault switch for step `step` of a's caller: TRUE (errno EIO) when
 * the step must fail.  The site name is built only while the switch is
 * armed. */
static gboolean atomic_fault(const IoAtomic *a, const char *step)
{
  if (G_LIKELY(!fault_enabled()))
    return FALSE;
  g_autofree char *site = g_strdup_printf("%s: %s", a->site, step);
  return fault_inject_errno(FAULT_WRITE, site);
}

/* Frees a's strings and zeroes it (the temporary file already gone). */
static void atomic_release(IoAtomic *a)
{
  g_free(a->path);
  g_free(a->dir);
  g_free(a->tmp);
  memset(a, 0, sizeof *a);
  a->fd = -1;
}

int io_atomic_open(IoAtomic *a, const char *path, const char *site)
{
  g_return_val_if_fail(a != NULL && path != NULL && site != NULL, EINVAL);
  memset(a, 0, sizeof *a);
  a->fd = -1;
  a->site = site;
  a->path = g_strdup(path);
  a->dir = g_path_get_dirname(path);
  g_autofree char *base = g_path_get_basename(path);
  g_autofree char *name = g_strdup_printf(".%s.tmp-XXXXXX", base);
  char *tmp = g_build_filename(a->dir, name, NULL);
  int fd = atomic_fault(a, "temporary file")
             ? -1
             : g_mkstemp_full(tmp, O_RDWR, 0666); /* the umask applies */
  if (fd < 0) {
    int e = errno != 0 ? errno : EIO;
    g_free(tmp);
    return e;
  }
  a->tmp = tmp;
  a->fd = fd;
  return 0;
}

int io_atomic_sync(IoAtomic *a)
{
  g_return_val_if_fail(a != NULL && a->tmp != NULL, EINVAL);
  if (atomic_fault(a, "fsync"))
    return EIO;
  int fd = a->fd >= 0 ? a->fd : g_open(a->tmp, O_RDONLY, 0);
  if (fd < 0)
    return errno;
  int e = fsync(fd) == 0 || errno == EINVAL || errno == EROFS ? 0 : errno;
  if (fd != a->fd)
    close(fd);
  return e;
}

int io_atomic_commit(IoAtomic *a, IoAtomicMode mode)
{
  g_return_val_if_fail(a != NULL && a->tmp != NULL, EINVAL);
  int e = 0;
  if (a->fd >= 0) {
    if (close(a->fd) != 0)
      e = errno;
    a->fd = -1;
  }
  if (e == 0 && mode == IO_ATOMIC_REPLACE) {
    if (atomic_fault(a, "rename") || g_rename(a->tmp, a->path) != 0)
      e = errno;
  } else if (e == 0) {
    if (atomic_fault(a, "link") || link(a->tmp, a->path) != 0) {
      e = errno;
      /* A file system without hard links: rename when nothing is there
       * (not atomic against another creator, the best it allows). */
      if ((e == EPERM || e == ENOTSUP || e == EOPNOTSUPP) &&
          !g_file_test(a->path, G_FILE_TEST_EXISTS) &&
          g_rename(a->tmp, a->path) == 0)
        e = 0;
    }
  }
  if (e != 0 || mode == IO_ATOMIC_CREATE)
    g_unlink(a->tmp); /* failed, or linked: the temporary name goes */
  atomic_release(a);
  return e;
}

void io_atomic_abort(IoAtomic *a)
{
  if (a == NULL)
    return;
  if (a->fd >= 0)
    close(a->fd);
  if (a->tmp != NULL)
    g_unlink(a->tmp);
  atomic_release(a);
}

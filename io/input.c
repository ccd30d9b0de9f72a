/* io/input.c -- opening an input file once, a regular file or nothing.
 * See io/input.h for the contract. */
#include "io/input.h"
#include "io/fault.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *io_input_kind(unsigned int st_mode)
{
  if (S_ISFIFO(st_mode))
    return "a FIFO";
  if (S_ISDIR(st_mode))
    return "a directory";
  if (S_ISCHR(st_mode))
    return "a character device";
  if (S_ISBLK(st_mode))
    return "a block device";
  if (S_ISSOCK(st_mode))
    return "a socket";
  if (S_ISLNK(st_mode))
    return "a symbolic link";
  return "not a plain file";
}

/* Marks `in` closed. */
static void input_reset(IoInput *in)
{
  in->fd = -1;
  in->size = 0;
  in->proc_path[0] = '\0';
}

gboolean io_input_open(IoInput *in, const char *path, const char *site,
                       GQuark domain, gint code, GError **error)
{
  g_return_val_if_fail(in != NULL && path != NULL && site != NULL, FALSE);
  input_reset(in);
  /* O_NONBLOCK: a FIFO with no writer opens at once instead of waiting
   * for one (and a read-only open of a FIFO never blocks then). */
  if (fault_inject(FAULT_READ, site)) {
    g_set_error(error, domain, code, "%s: %s (injected fault)", path,
                g_strerror(EIO));
    return FALSE;
  }
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    int e = errno;
    g_set_error(error, domain, code, "%s: %s", path, g_strerror(e));
    return FALSE;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    g_set_error(error, domain, code, "%s: %s", path, g_strerror(e));
    return FALSE;
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    g_set_error(error, domain, code,
                "%s: not a regular file (%s); cannot read it", path,
                io_input_kind((unsigned int)st.st_mode));
    return FALSE;
  }
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    int e = errno;
    close(fd);
    g_set_error(error, domain, code, "%s: %s", path, g_strerror(e));
    return FALSE;
  }
  in->fd = fd;
  in->size = (gint64)st.st_size;
  g_snprintf(in->proc_path, sizeof in->proc_path, "/proc/self/fd/%d", fd);
  return TRUE;
}

gboolean io_input_read_all(IoInput *in, const char *path, gsize max_bytes,
                           const char *what, const char *site, GQuark domain,
                           gint code, char **contents, gsize *length,
                           GError **error)
{
  g_return_val_if_fail(in != NULL && in->fd >= 0 && contents != NULL, FALSE);
  *contents = NULL;
  if (length != NULL)
    *length = 0;
  if (in->size < 0 || (guint64)in->size > max_bytes) {
    g_set_error(error, domain, code,
                "%s: %" G_GINT64_FORMAT " bytes, over the limit of %.0f MiB "
                "for %s", path, in->size, (double)max_bytes / 1048576.0,
                what);
    return FALSE;
  }
  if (fault_inject(FAULT_READ, site)) {
    g_set_error(error, domain, code, "%s: read error (%s) (injected fault)",
                path, g_strerror(EIO));
    return FALSE;
  }
  /* st_size is a hint for the buffer, not a promise: the file may have
   * changed since.  Read until the end, never past max_bytes + 1. */
  gsize cap = (gsize)in->size + 1, n = 0;
  g_autofree char *buf = g_malloc(cap + 1);
  for (;;) {
    if (n == cap) {
      if (cap > max_bytes)
        break;
      cap = MIN(MAX(cap * 2, (gsize)4096), max_bytes + 1);
      buf = g_realloc(buf, cap + 1);
    }
    ssize_t r = read(in->fd, buf + n, cap - n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      int e = errno;
      g_set_error(error, domain, code, "%s: read error (%s)", path,
                  g_strerror(e));
      return FALSE;
    }
    if (r == 0)
      break;
    n += (gsize)r;
  }
  if (n > max_bytes) {
    g_set_error(error, domain, code,
                "%s: over the limit of %.0f MiB for %s", path,
                (double)max_bytes / 1048576.0, what);
    return FALSE;
  }
  buf[n] = '\0';
  *contents = g_steal_pointer(&buf);
  if (length != NULL)
    *length = n;
  return TRUE;
}

int io_input_steal_fd(IoInput *in)
{
  g_return_val_if_fail(in != NULL, -1);
  int fd = in->fd;
  input_reset(in);
  return fd;
}

FILE *io_input_fdopen(IoInput *in, const char *path, GQuark domain,
                      gint code, GError **error)
{
  g_return_val_if_fail(in != NULL && in->fd >= 0, NULL);
  FILE *f = fdopen(in->fd, "rb");
  if (f == NULL) {
    int e = errno;
    io_input_close(in);
    g_set_error(error, domain, code, "%s: %s", path, g_strerror(e));
    return NULL;
  }
  io_input_steal_fd(in); /* fclose closes it */
  return f;
}

void io_input_close(IoInput *in)
{
  if (in == NULL)
    return;
  if (in->fd >= 0)
    close(in->fd);
  input_reset(in);
}

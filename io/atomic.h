/* io/atomic.h -- writing a file atomically: build it under a temporary name
 * in the target's directory, then move it into place in one step, so that
 * a reader (or a crash) sees the old file or the complete new one, never a
 * part.
 *
 *     IoAtomic a;
 *     int e = io_atomic_open(&a, path, "native");
 *     if (e != 0) ... report g_strerror(e) ...;
 *     ... write a.tmp (through a.fd, or by name) ...
 *     e = io_atomic_sync(&a);                      (unless already synced)
 *     if (e == 0) e = io_atomic_commit(&a, IO_ATOMIC_REPLACE);
 *     if (e != 0) ... report ...;   (a is released either way)
 *     ... or, on any error of the caller's own: io_atomic_abort(&a);
 *
 * The temporary file is ".BASE.tmp-XXXXXX" beside BASE, the X's random
 * (mkstemp: an unpredictable name, created exclusively, so another process
 * cannot plant it beforehand), mode 0666 less the umask.  It never
 * outlives an error: commit, on failure, and abort unlink it.
 *
 * Every step can be failed by fault injection (io/fault.h, kind
 * FAULT_WRITE), the site named "SITE: STEP" after the caller's `site`
 * prefix: "temporary file" (open), "fsync" (sync), "rename" (commit,
 * replacing) or "link" (commit, creating).  An injected failure is EIO
 * through the same path as a real one.
 *
 * Errors are errno values (0 = success), not GErrors: each caller words
 * its own message (which names its file and its operation) from them.
 * Ownership: IoAtomic is the caller's (usually on its stack); its strings
 * are freed by commit and abort, which leave it zeroed with fd -1.
 */
#ifndef JOULESIM_IO_ATOMIC_H
#define JOULESIM_IO_ATOMIC_H

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  char *path;       /* the target (a copy) */
  char *dir;        /* its directory, for messages */
  char *tmp;        /* the temporary file, in dir; NULL once released */
  int fd;           /* open read-write on tmp; -1 once closed or taken */
  const char *site; /* prefix of the fault-injection sites (borrowed) */
} IoAtomic;

typedef enum {
  IO_ATOMIC_REPLACE, /* rename(2) over whatever is at the target */
  IO_ATOMIC_CREATE   /* link(2): fails with EEXIST if the target exists
                        (on a file system without hard links: rename when
                        nothing is there) */
} IoAtomicMode;

/* Creates the temporary file for `path` (site "SITE: temporary file").
 * Returns 0 with a->tmp created and a->fd open on it, or the errno, with
 * nothing created; a->dir is set in both cases (for the caller's message)
 * and io_atomic_abort() releases it.  The caller may close a->fd or take
 * it (fdopen), and must then set it to -1. */
int io_atomic_open(IoAtomic *a, const char *path, const char *site);

/* Flushes the temporary file to the disk (site "SITE: fsync"): through
 * a->fd when it is open, else by opening a->tmp.  A file system that
 * cannot fsync (EINVAL, EROFS) is not an error.  Returns 0 or the errno;
 * a stays as it was (abort or commit it). */
int io_atomic_sync(IoAtomic *a);

/* Closes a->fd if it is open and moves the temporary file to the target
 * (site "SITE: rename" or "SITE: link").  Returns 0, or the errno (EEXIST
 * for IO_ATOMIC_CREATE when the target exists); the temporary file is gone
 * and a released either way. */
int io_atomic_commit(IoAtomic *a, IoAtomicMode mode);

/* Closes a->fd if it is open, unlinks the temporary file and releases a.
 * Safe on a released IoAtomic and after a failed io_atomic_open(). */
void io_atomic_abort(IoAtomic *a);

G_END_DECLS

#endif

/* io/fault.h -- fault injection at the I/O boundary: a countdown switch.
 *
 * Every place where joulesim touches the outside world and can fail -- a
 * file opened or read, an HDF5 file driver call, the allocation of a
 * workload's op array -- asks fault_inject(kind, site) first.  Normally the
 * answer is FALSE at the cost of one predictable branch.  When the switch is
 * armed (fault_configure, or JOULESIM_FAULT=N read by the CLI at start), the
 * guarded calls of the selected kinds are numbered 1, 2, 3, ... in the order
 * they happen and exactly the N-th one is told to fail: the call site then
 * takes the same path as a real failure (errno EIO, an HDF5 error, a NULL
 * allocation), so a test can walk N = 1 .. count and require a clean error,
 * no leak and no corrupt output every time (SQLite's testing discipline;
 * docs/fault-injection.md has the sites, the counts and what was found).
 *
 * Kinds (bit flags; JOULESIM_FAULT_KIND=read,hdf5,... selects; default all):
 *   FAULT_READ   plain input files: open, read (importers, profile
 *                loaders, the native trace's checksum pass)
 *   FAULT_WRITE  plain output outside HDF5: temporary files, links and
 *                renames, fsync, the native trace's seal, timeline JSON
 *   FAULT_HDF5   every call HDF5 makes to its file driver (open, read,
 *                write, flush, truncate) for the files joulesim opens,
 *                except inside H5Fclose (io/h5util.c)
 *   FAULT_ALLOC  op-array allocations of the workload builders
 *
 * State.  The switch is process-global on purpose: it must reach the
 * innermost I/O call (HDF5's driver callbacks, an importer's read loop)
 * without every layer passing a context down, and it describes the process
 * (one run of the CLI), not a simulation.  That is the one exception to "no
 * global mutable state" (STYLE.md): it never affects results (disarmed it is
 * never consulted; armed, the run fails at a known call or is unchanged),
 * the CLI sets it once before anything else runs, and tests reset it.  A
 * fork()ed child (js.sweep's workers) inherits the count so far and then
 * counts on its own.  The counter is atomic; the order of guarded calls,
 * hence which call is the N-th, is deterministic for single-threaded runs.
 */
#ifndef SIM_FAULT_H
#define SIM_FAULT_H

#include <glib.h>
#include <stdio.h>


G_BEGIN_DECLS

typedef enum {
  FAULT_READ = 1u << 0,
  FAULT_WRITE = 1u << 1,
  FAULT_HDF5 = 1u << 2,
  FAULT_ALLOC = 1u << 3,
} FaultKind;
#define FAULT_ALL (FAULT_READ | FAULT_WRITE | FAULT_HDF5 | FAULT_ALLOC)

#define FAULT_ERROR (fault_error_quark())
GQuark fault_error_quark(void);
typedef enum {
  FAULT_ERROR_CONFIG /* a bad JOULESIM_FAULT* value */
} FaultError;

/* Arms the switch: the fail_at-th guarded call (counting only `kinds`, a
 * non-empty set of FaultKind bits) fails; fail_at == 0 fails none.  With
 * `log`, every counted call writes "joulesim fault[PID]: ORDINAL KIND SITE"
 * to stderr (and " <- injected" on the failing one): the one place outside
 * the CLI that prints, because only the call itself knows its ordinal.
 * Resets the count.  Returns FALSE (state unchanged) for an empty kind set. */
gboolean fault_configure(guint64 fail_at, guint kinds, gboolean log,
                         GError **error);
/* Reads JOULESIM_FAULT (a decimal ordinal >= 0), JOULESIM_FAULT_KIND
 * (comma-separated read, write, hdf5, alloc, all; default all) and
 * JOULESIM_FAULT_LOG (0 or 1) and arms the switch accordingly (disarmed
 * when none is set).  FAULT_ERROR_CONFIG naming the variable and its value
 * for anything else; the state is then unchanged.  The CLI calls this once,
 * first thing in main(). */
gboolean fault_configure_from_env(GError **error);
/* Parses a JOULESIM_FAULT_KIND value into FaultKind bits. */
gboolean fault_parse_kinds(const char *s, guint *kinds, GError **error);
/* Disarms the switch and forgets the count (tests). */
void fault_reset(void);

/* Guarded calls counted so far, and the ordinal that was made to fail (0:
 * none yet). */
guint64 fault_count(void);
guint64 fault_fired(void);
/* TRUE while the switch is armed or logging (only then does h5u_quiet()
 * route HDF5 files through the counting driver). */
gboolean fault_enabled(void);
const char *fault_kind_name(FaultKind kind);

/* Guarded calls inside fault_suspend() .. fault_resume() (nestable) are
 * neither counted nor failed: for work that has no clean failure path of
 * its own (HDF5's H5Fclose, see io/h5util.c). */
void fault_suspend(void);
void fault_resume(void);

/* The slow path of fault_inject: counts the call and answers. */
gboolean fault_hit(FaultKind kind, const char *site);
/* Read only through fault_inject (the one branch when disarmed). */
extern gboolean fault_enabled_;

/* TRUE when this guarded call of `kind` at `site` (a short description:
 * "kineto: read", "hdf5 write results.h5") must fail. */
static inline gboolean fault_inject(FaultKind kind, const char *site)
{
  return G_UNLIKELY(fault_enabled_) && fault_hit(kind, site);
}

/* fault_inject() that also sets errno to EIO when the call must fail, for
 * sites whose real failure path reads errno. */
gboolean fault_inject_errno(FaultKind kind, const char *site);

/* fopen() guarded as FAULT_READ (mode "r...") or FAULT_WRITE: NULL with
 * errno EIO when the call must fail. */
FILE *fault_fopen(const char *path, const char *mode, const char *site);

/* g_file_get_contents() guarded as FAULT_READ: an injected failure is the
 * G_FILE_ERROR_IO that a failed read() gives, its message naming the file
 * and "injected fault". */
gboolean fault_get_contents(const char *path, char **contents, gsize *length,
                            const char *site, GError **error);

/* Allocates n records of `size` bytes (uninitialised; zero-filled with
 * fault_try_alloc0), guarded as FAULT_ALLOC: NULL with error (domain and
 * code given by the caller, message "SITE: cannot allocate N records of
 * SIZE bytes (X MB): out of memory" or "... : injected fault") when the
 * call must fail, when n * size overflows or when the system has no
 * memory.  Ownership: the caller g_free()s.  n == 0 allocates one record. */
gpointer fault_try_alloc(gsize n, gsize size, const char *site, GQuark domain,
                         gint code, GError **error);
gpointer fault_try_alloc0(gsize n, gsize size, const char *site,
                          GQuark domain, gint code, GError **error);

G_END_DECLS

#endif

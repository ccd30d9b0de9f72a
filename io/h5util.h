/* io/h5util.h -- small HDF5 helpers shared by every module that reads
 * or writes HDF5 (traces/native.c, io/results.c): owned identifiers closed
 * by g_auto, a guard that silences HDF5's automatic error printing for the
 * duration of a public call, and the reason of the last HDF5 failure.
 */
#ifndef TRACES_H5UTIL_H
#define TRACES_H5UTIL_H

#include <glib.h>
#include <hdf5.h>

G_BEGIN_DECLS

/* An owned HDF5 identifier of any kind, closed by g_auto(H5uHid). */
typedef hid_t H5uHid;
void h5u_hid_close(hid_t id);
G_DEFINE_AUTO_CLEANUP_FREE_FUNC(H5uHid, h5u_hid_close, H5I_INVALID_HID)

/* Hands a g_auto(H5uHid) identifier over to the caller. */
static inline hid_t h5u_steal(hid_t *id)
{
  hid_t out = *id;
  *id = H5I_INVALID_HID;
  return out;
}

/* HDF5's automatic error printing, saved and turned off on entry to a
 * public function and restored on exit: H5U_QUIET(); at its top (a scope
 * guard, never read: hence unused). */
typedef struct {
  H5E_auto2_t func;
  void *data;
  gboolean saved;
} H5uQuiet;
H5uQuiet h5u_quiet(void);
void h5u_quiet_restore(H5uQuiet *q);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(H5uQuiet, h5u_quiet_restore)
#define H5U_QUIET() \
  g_auto(H5uQuiet) h5u_quiet_guard_ G_GNUC_UNUSED = h5u_quiet()

/* The most specific description on the current HDF5 error stack (a failed
 * system call reduced to the system's message, newlines removed), or NULL;
 * clears the stack.  Call right after the failing HDF5 call.  Caller frees. */
char *h5u_error_reason(void);

G_END_DECLS

#endif

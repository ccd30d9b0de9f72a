/* io/h5util.c -- see io/h5util.h.
 *
 * Fault injection (io/fault.h).  When the fault switch is armed, every
 * HDF5 file that joulesim opens is routed through "joulesim-fault", a file
 * driver that passes each operation to HDF5's own sec2 (POSIX) driver,
 * after asking fault_inject(FAULT_HDF5, "OP FILE") for open, read, write,
 * flush and truncate.  So one hook covers every HDF5 call that reaches the
 * disk, and an injected fault is what HDF5 sees when the disk fails: the
 * operation returns an error and HDF5 unwinds as it would for EIO;
 * h5u_error_reason() then reports "injected fault (OP FILE)".  The driver is installed on HDF5's default file-access
 * property list by h5u_quiet(), the entry of every public function of the
 * modules that use HDF5, so files opened with H5P_DEFAULT (and lists
 * copied from it) use it; a disarmed run never installs it.
 *
 * Not guarded: operations inside H5Fclose (h5u_hid_close suspends the
 * switch; callers of H5Fclose do the same).  HDF5 1.10 cannot recover from
 * a failed close: the file stays half-closed in the library and the
 * process crashes at exit in H5F__close_cb (traces/native_write.c documents
 * the same for a full disk).  Callers flush before closing, so the writes a
 * close would do are made, and can fail, in a guarded H5Fflush.
 *
 * The driver's id and the pending fault below are process-wide, like the
 * fault switch itself (io/fault.h says why) and HDF5's own driver ids.
 */
#include "io/h5util.h"
#include "io/fault.h"

#include <H5FDsec2.h>
#include <string.h>
#include <sys/types.h>

/* ---- the fault-injecting file driver ------------------------------------- */

/* One open file: HDF5's view first (the driver contract), then the sec2
 * file that does the work. */
typedef struct {
  H5FD_t pub;
  H5FD_t *inner;
  char name[64]; /* base name, for fault sites */
} H5uFaultFile;

/* The site of a fault injected during the current public call, until
 * h5u_error_reason() reports it or h5u_quiet_restore() ends the call.  It
 * cannot stay on HDF5's error stack: the driver calls HDF5's public H5FD*
 * functions, which clear the stack on entry, while HDF5 unwinds. */
static char fault_pending[128];

/* Asks the switch about operation `op` on file `name`; when it must fail,
 * records the site and pushes HDF5's error (maj H5E_VFL, min the
 * operation's error class). */
static gboolean fault_op(const char *name, const char *op, hid_t min)
{
  char site[128];
  g_snprintf(site, sizeof site, "%s %s", op, name);
  if (!fault_inject(FAULT_HDF5, site))
    return FALSE;
  g_strlcpy(fault_pending, site, sizeof fault_pending);
  H5Epush2(H5E_DEFAULT, __FILE__, G_STRFUNC, __LINE__, H5E_ERR_CLS, H5E_VFL,
           min, "injected fault (%s)", site);
  return TRUE;
}

static H5FD_t *fault_open(const char *name, unsigned flags, hid_t fapl,
                          haddr_t maxaddr)
{
  g_autofree char *base = g_path_get_basename(name);
  if (fault_op(base, "open", H5E_CANTOPENFILE))
    return NULL;
  hid_t sec2 = H5Pcreate(H5P_FILE_ACCESS);
  if (sec2 < 0)
    return NULL;
  H5FD_t *inner = H5Pset_fapl_sec2(sec2) < 0
                    ? NULL
                    : H5FDopen(name, flags, sec2, maxaddr);
  H5Pclose(sec2);
  if (inner == NULL)
    return NULL;
  H5uFaultFile *f = g_new0(H5uFaultFile, 1);
  f->inner = inner;
  g_strlcpy(f->name, base, sizeof f->name);
  return &f->pub;
}

static herr_t fault_close(H5FD_t *file)
{
  H5uFaultFile *f = (H5uFaultFile *)file;
  herr_t rc = H5FDclose(f->inner);
  g_free(f);
  return rc;
}

static int fault_cmp(const H5FD_t *a, const H5FD_t *b)
{
  return H5FDcmp(((const H5uFaultFile *)a)->inner,
                 ((const H5uFaultFile *)b)->inner);
}

static herr_t fault_query(const H5FD_t *file, unsigned long *flags)
{
  if (file == NULL) {
    /* The driver's own features, asked before any file is open: sec2's. */
    return H5FDdriver_query(H5FD_SEC2, flags);
  }
  return H5FDquery(((const H5uFaultFile *)file)->inner, flags) < 0 ? -1 : 0;
}

static haddr_t fault_get_eoa(const H5FD_t *file, H5FD_mem_t type)
{
  return H5FDget_eoa(((const H5uFaultFile *)file)->inner, type);
}

static herr_t fault_set_eoa(H5FD_t *file, H5FD_mem_t type, haddr_t addr)
{
  return H5FDset_eoa(((H5uFaultFile *)file)->inner, type, addr);
}

static haddr_t fault_get_eof(const H5FD_t *file, H5FD_mem_t type)
{
  return H5FDget_eof(((const H5uFaultFile *)file)->inner, type);
}

static herr_t fault_get_handle(H5FD_t *file, hid_t fapl, void **handle)
{
  return H5FDget_vfd_handle(((H5uFaultFile *)file)->inner, fapl, handle);
}

static herr_t fault_read(H5FD_t *file, H5FD_mem_t type, hid_t dxpl,
                         haddr_t addr, size_t size, void *buf)
{
  H5uFaultFile *f = (H5uFaultFile *)file;
  if (fault_op(f->name, "read", H5E_READERROR))
    return -1;
  return H5FDread(f->inner, type, dxpl, addr, size, buf);
}

static herr_t fault_write(H5FD_t *file, H5FD_mem_t type, hid_t dxpl,
                          haddr_t addr, size_t size, const void *buf)
{
  H5uFaultFile *f = (H5uFaultFile *)file;
  if (fault_op(f->name, "write", H5E_WRITEERROR))
    return -1;
  return H5FDwrite(f->inner, type, dxpl, addr, size, buf);
}

static herr_t fault_flush(H5FD_t *file, hid_t dxpl, hbool_t closing)
{
  H5uFaultFile *f = (H5uFaultFile *)file;
  if (!closing && fault_op(f->name, "flush", H5E_WRITEERROR))
    return -1;
  return H5FDflush(f->inner, dxpl, closing);
}

static herr_t fault_truncate(H5FD_t *file, hid_t dxpl, hbool_t closing)
{
  H5uFaultFile *f = (H5uFaultFile *)file;
  if (!closing && fault_op(f->name, "truncate", H5E_WRITEERROR))
    return -1;
  return H5FDtruncate(f->inner, dxpl, closing);
}

static herr_t fault_lock(H5FD_t *file, hbool_t rw)
{
  return H5FDlock(((H5uFaultFile *)file)->inner, rw);
}

static herr_t fault_unlock(H5FD_t *file)
{
  return H5FDunlock(((H5uFaultFile *)file)->inner);
}

static const H5FD_class_t fault_class = {
  .name = "joulesim-fault",
  .maxaddr = (haddr_t)((((guint64)1) << (8 * sizeof(off_t) - 1)) - 1),
  .fc_degree = H5F_CLOSE_WEAK,
  .open = fault_open,
  .close = fault_close,
  .cmp = fault_cmp,
  .query = fault_query,
  .get_eoa = fault_get_eoa,
  .set_eoa = fault_set_eoa,
  .get_eof = fault_get_eof,
  .get_handle = fault_get_handle,
  .read = fault_read,
  .write = fault_write,
  .flush = fault_flush,
  .truncate = fault_truncate,
  .lock = fault_lock,
  .unlock = fault_unlock,
  .fl_map = H5FD_FLMAP_DICHOTOMY,
};

/* The driver's id, registered on first use: process-wide like HDF5's own
 * driver ids (and re-registered should the library have been closed). */
static hid_t fault_driver_id = H5I_INVALID_HID;

/* Routes files opened with the default file-access list through the fault
 * driver (see the top of this file); a no-op when it already does. */
static void fault_install(void)
{
  if (fault_driver_id < 0 || H5Iget_type(fault_driver_id) != H5I_VFL)
    fault_driver_id = H5FDregister(&fault_class);
  if (fault_driver_id < 0)
    return;
  if (H5Pget_driver(H5P_FILE_ACCESS_DEFAULT) != fault_driver_id)
    H5Pset_driver(H5P_FILE_ACCESS_DEFAULT, fault_driver_id, NULL);
}

/* ---- handles and errors -------------------------------------------------- */

void h5u_hid_close(hid_t id)
{
  switch (H5Iget_type(id)) {
  case H5I_FILE:
    /* See the top of this file: no faults inside a close. */
    fault_suspend();
    H5Fclose(id);
    fault_resume();
    break;
  case H5I_GROUP: H5Gclose(id); break;
  case H5I_DATATYPE: H5Tclose(id); break;
  case H5I_DATASPACE: H5Sclose(id); break;
  case H5I_DATASET: H5Dclose(id); break;
  case H5I_ATTR: H5Aclose(id); break;
  case H5I_GENPROP_LST: H5Pclose(id); break;
  default: break;
  }
}

H5uQuiet h5u_quiet(void)
{
  H5uQuiet q = {NULL, NULL, FALSE};
  if (H5Eget_auto2(H5E_DEFAULT, &q.func, &q.data) >= 0)
    q.saved = TRUE;
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  if (fault_enabled())
    fault_install();
  return q;
}

void h5u_quiet_restore(H5uQuiet *q)
{
  H5Eclear2(H5E_DEFAULT);
  fault_pending[0] = '\0';
  if (q->saved)
    H5Eset_auto2(H5E_DEFAULT, q->func, q->data);
}

/* H5Ewalk2 callback keeping the innermost (most specific) description,
 * e.g. the errno text of a failed open(). */
static herr_t walk_innermost(unsigned n, const H5E_error2_t *err, void *data)
{
  char **out = data;
  if (n == 0 && err->desc != NULL && err->desc[0] != '\0')
    *out = g_strdup(err->desc);
  return 0;
}

char *h5u_error_reason(void)
{
  char *reason = NULL;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk_innermost, &reason);
  H5Eclear2(H5E_DEFAULT);
  if (fault_pending[0] != '\0') {
    /* An injected fault is the cause, whatever HDF5 says last. */
    g_free(reason);
    reason = g_strdup_printf("injected fault (%s)", fault_pending);
    fault_pending[0] = '\0';
    return reason;
  }
  /* A failed system call's description is long ("file write failed:
   * time = ..., errno = 28, error message = '...', buf = ..."): keep the
   * system's message. */
  const char *sys = reason != NULL ? strstr(reason, "error message = '")
                                   : NULL;
  if (sys != NULL) {
    sys += strlen("error message = '");
    const char *end = strchr(sys, '\'');
    char *short_reason = g_strndup(sys, end ? (gsize)(end - sys)
                                            : strlen(sys));
    g_free(reason);
    reason = short_reason;
  }
  if (reason != NULL)
    g_strdelimit(reason, "\n", ' ');
  return reason;
}

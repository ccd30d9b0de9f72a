/* traces/h5util.c -- see traces/h5util.h. */
#include "traces/h5util.h"

#include <string.h>

void h5u_hid_close(hid_t id)
{
  switch (H5Iget_type(id)) {
  case H5I_FILE: H5Fclose(id); break;
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
  return q;
}

void h5u_quiet_restore(H5uQuiet *q)
{
  H5Eclear2(H5E_DEFAULT);
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

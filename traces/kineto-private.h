/* traces/kineto-private.h -- the Kineto reader's parse state, shared by
 * traces/kineto.c (the yajl callbacks and the driver) and
 * traces/kineto_events.c (finished events).
 */
#ifndef TRACES_KINETO_PRIVATE_H
#define TRACES_KINETO_PRIVATE_H

#include "traces/import-private.h"
#include "traces/classify.h"
#include "traces/shapes.h"

/* The deepest container stack followed; the latest time accepted (ns). */
#define MAX_ROLES 64
#define KIN_MAX_NS ((gint64)1 << 62)

typedef enum {
  R_IGNORE = 0, R_ROOT, R_EVENTS, R_EVENT, R_ARGS, R_ARGS_RANKS, R_DIST,
  R_PGCONF, R_PG, R_PG_RANKS, R_DEVPROPS, R_DEVPROP,
  R_DIMS, R_DIM, R_DIM_LIST, R_TYPES /* cpu_op "Input Dims", "Input type" */
} Role;

typedef enum {
  K_OTHER = 0,
  /* root */
  K_TRACE_EVENTS, K_DIST, K_DEVPROPS,
  /* event */
  K_PH, K_CAT, K_NAME, K_PID, K_TID, K_TS, K_DUR, K_ARGS,
  /* args */
  K_DEVICE, K_STREAM, K_CORR, K_COLL_NAME, K_IN_NELEMS, K_OUT_NELEMS,
  K_DTYPE, K_GROUP_SIZE, K_PG_RANKS, K_PG_NAME, K_SRC_RANK, K_DST_RANK,
  K_WAIT_STREAM, K_WAIT_CORR, K_EXT, K_IN_DIMS, K_IN_TYPE,
  /* distributedInfo / pg_config / deviceProperties */
  K_RANK, K_WORLD, K_PG_CONFIG, K_PGC_NAME, K_PGC_RANKS, K_ID, K_DEV_NAME
} Key;

typedef enum {
  C_OTHER = 0, C_KERNEL, C_MEMCPY, C_MEMSET, C_RUNTIME, C_SYNC, C_GPU_ANNOT,
  C_CPU_OP
} Cat;

typedef struct {
  gboolean has_ts, has_dur, has_pid, has_tid, has_device, has_stream,
      has_corr, has_coll, has_dtype, has_pg_ranks, has_pg_name, has_ext;
  char ph;
  Cat cat;
  gint64 ts_ns, dur_ns, pid, tid, device, stream, corr, ext;
  gint64 in_nelems, out_nelems, group_size, src_rank, dst_rank;
  gint64 wait_stream, wait_corr;
  GString *name, *coll, *dtype, *pg_ranks, *pg_name;
} Event;

typedef struct {
  const char *path;
  TraceRawRank *raw;
  SimWorkload *names;
  GError *error;            /* first error raised in a callback */
  guint8 roles[MAX_ROLES];
  gint depth;               /* open containers */
  Key key;                  /* last key of the innermost map */
  gboolean root_seen, events_seen;
  guint64 n_events;         /* traceEvents elements so far */
  Event ev;
  /* distributedInfo / pg_config / deviceProperties scratch */
  GString *pgc_name, *pgc_ranks;
  gboolean has_dev_id;
  gint64 dev_id;
  GString *dev_name;
  /* caches */
  GByteArray *nccl;         /* per name id: 0 unknown, 1 no, 2 yes */
  GByteArray *calls;        /* per name id: 0 unknown, else TraceCall + 1 */
  GHashTable *cpu_names;    /* CPU event name -> (phase + 2) or 1 (none) */
  GHashTable *op_names;     /* cpu_op name -> operator + 2, or 1 (none) */
  GHashTable *types;        /* "Input type" string -> element bytes + 1 */
  /* The current event's "Input Dims" and "Input type" (either may come
   * first in its args, so types are joined to dims at the event's end). */
  TraceShapeInputs shp;
  guint8 types_elem[TRACE_SHAPE_MAX_INPUTS];
  double list_prod;         /* element count of the TensorList member open */
} Kin;

#define FAIL(k, ...)                                                        \
  do {                                                                      \
    if ((k)->error == NULL) {                                               \
      g_autofree char *m_ = g_strdup_printf(__VA_ARGS__);                   \
      g_set_error(&(k)->error, TRACE_ERROR, TRACE_ERROR_FORMAT, "%s: %s",   \
                  (k)->path, m_);                                           \
    }                                                                       \
    return 0;                                                               \
  } while (0)

static inline Role top_role(const Kin *k)
{
  if (k->depth <= 0 || k->depth > MAX_ROLES)
    return R_IGNORE;
  return (Role)k->roles[k->depth - 1];
}

/* An integer (a float with a zero fraction is accepted). */
gboolean kin_parse_int(const char *s, size_t len, gint64 *out);

/* Clears e for the next event (its strings kept, emptied). */
void kin_event_reset(Event *e);

/* Element bytes of an "Input type" string, cached (0: not a tensor). */
guint8 kin_type_elem(Kin *k, const char *s, size_t len);

/* The input of "Input Dims" being filled (NULL past the kept ones). */
TraceShapeInput *kin_cur_input(Kin *k);

/* A scalar inside "Input Dims" or "Input type" that is not what the role
 * wants: the dims are damaged (the operator keeps class-only pricing). */
void kin_shape_scalar(Kin *k, Role r);

/* One dim of the current input (or of its TensorList member). */
void kin_shape_dim(Kin *k, Role r, const char *s, size_t len);

/* The event just closed, by its category: appended to the raw rank.
 * Returns 1, or 0 with k->error set (FAIL) to stop the parse. */
int kin_event_end(Kin *k);

#endif

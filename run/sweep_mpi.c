/* run/sweep_mpi.c -- a sweep's points across MPI ranks: every line of MPI
 * code in the sweep engine.  Without JOULESIM_MPI this file only has the
 * stubs of a single machine (sweep_distributed() is FALSE).
 *
 * Every rank runs the script; rank 0 resumes, holds the queue and is the
 * only writer; the other ranks ask it for points as their workers fall
 * idle and send the rows back (docs/sweeps.md, "Sweeps on a cluster").
 * Rows do not depend on the number of ranks.  A rank that dies takes the
 * job down; the rerun resumes.
 */
#include "run/sweep-private.h"

#ifdef JOULESIM_MPI
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Under mpirun/srun (JOULESIM_MPI builds), rank 0 holds the queue of points
 * and is the only process that opens the results file; every other rank
 * asks it for as many points as it has idle workers (TAG_REQ, a u32),
 * gets them as a TAG_POINTS message (concatenated frames of run/sweep_wire.c,
 * length prefix included) or TAG_DONE when none are left, runs them on its
 * own forked workers, and sends each outcome to rank 0 as one ROW or ERROR
 * frame (TAG_RESULT, without the length prefix).  Every rank builds the
 * same points from the same script; a point sent to a rank must carry the
 * point_id that rank has at that index.  TAG_ABORT (a message) stops the
 * sweep on the other side: rank 0 sends it to every rank still asking when
 * it fails, another rank sends it to rank 0.  A rank that dies takes the
 * job down (MPI's default); rows already written stay, and the rerun
 * resumes as on one machine. */
#define TAG_REQ 7101
#define TAG_POINTS 7102
#define TAG_DONE 7103
#define TAG_RESULT 7104
#define TAG_ABORT 7105

struct SweepMpi {
  int rank, size;       /* MPI rank and ranks */
  gboolean exhausted;   /* rank > 0: rank 0 has no more points for us */
  guint open_ranks;     /* rank 0: ranks not yet told "no more points" */
  guint remote_flight;  /* rank 0: points out on other ranks */
  gint *holder;         /* rank 0: rank running point i, -1 none */
  gboolean *closed;     /* rank 0: rank r told "no more" (or stopped) */
  gboolean peer_stopped; /* rank 0 stopped the sweep (rank > 0) */
};

gboolean sweep_remote(const Sweep *sw)
{
  return sw->mpi != NULL && sw->mpi->size > 1 && sw->mpi->rank > 0;
}

gboolean sweep_distributed(const Sweep *sw)
{
  return sw->mpi != NULL && sw->mpi->size > 1;
}

void sweep_mpi_free(Sweep *sw)
{
  if (sw->mpi == NULL)
    return;
  g_free(sw->mpi->holder);
  g_free(sw->mpi->closed);
  g_clear_pointer(&sw->mpi, g_free);
}

static void mpi_finalize_at_exit(void)
{
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (init && !fin)
    MPI_Finalize();
}

/* Joins MPI when started by a launcher (mpirun, srun), once per process;
 * ranks other than 0 send their stdout to /dev/null (only rank 0 prints).
 * Not under a launcher, sw->mpi stays NULL: one machine. */
void sweep_mpi_setup(Sweep *sw)
{
  if (g_getenv("OMPI_COMM_WORLD_SIZE") == NULL &&
      g_getenv("PMIX_RANK") == NULL && g_getenv("PMI_SIZE") == NULL)
    return;
  sw->mpi = g_new0(SweepMpi, 1);
  int init = 0;
  MPI_Initialized(&init);
  if (!init) {
    int provided = 0;
    MPI_Init_thread(NULL, NULL, MPI_THREAD_SINGLE, &provided);
    atexit(mpi_finalize_at_exit);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank > 0) {
      fflush(stdout);
      int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
      if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        close(fd);
      }
    }
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &sw->mpi->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &sw->mpi->size);
  if (sw->mpi->size > 1 && sw->mpi->rank == 0) {
    sw->mpi->holder = g_new(gint, MAX(sweep_n_points(sw), 1));
    for (guint i = 0; i < sweep_n_points(sw); i++)
      sw->mpi->holder[i] = -1;
    sw->mpi->closed = g_new0(gboolean, sw->mpi->size);
    sw->mpi->closed[0] = TRUE;
    sw->mpi->open_ranks = (guint)sw->mpi->size - 1;
  }
}

/* Waits for a message from src (or MPI_ANY_SOURCE) without spinning:
 * MPI_Probe busy-polls, which takes a core from the workers when ranks
 * share a machine. */
static void mpi_wait_probe(int src, MPI_Status *st)
{
  for (;;) {
    int flag = 0;
    MPI_Iprobe(src, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, st);
    if (flag)
      return;
    g_usleep(100);
  }
}

/* Receives the message st announced (from src); a new buffer, *len. */
static guint8 *mpi_recv_bytes(const MPI_Status *st, int *len)
{
  int n = 0;
  MPI_Get_count(st, MPI_BYTE, &n);
  guint8 *buf = g_malloc(MAX(n, 1));
  MPI_Recv(buf, n, MPI_BYTE, st->MPI_SOURCE, st->MPI_TAG, MPI_COMM_WORLD,
           MPI_STATUS_IGNORE);
  *len = n;
  return buf;
}

/* The sweep failed on this rank with message: tell the other side(s). */
void sweep_mpi_abort(Sweep *sw, const char *message)
{
  if (!sweep_distributed(sw))
    return;
  int n = (int)strlen(message);
  if (sw->mpi->rank > 0) {
    if (!sw->mpi->peer_stopped && !sw->mpi->exhausted)
      MPI_Send(message, n, MPI_BYTE, 0, TAG_ABORT, MPI_COMM_WORLD);
    return;
  }
  for (int r = 1; r < sw->mpi->size; r++) {
    if (sw->mpi->closed[r])
      continue;
    MPI_Send(message, n, MPI_BYTE, r, TAG_ABORT, MPI_COMM_WORLD);
    sw->mpi->closed[r] = TRUE;
    sw->mpi->open_ranks--;
  }
}

/* Rank > 0: the outcome of point idx (a frame payload) to rank 0. */
void sweep_mpi_send_result(Sweep *sw, const guint8 *payload, gsize len,
                                  gboolean good)
{
  sw->ran++;
  if (good)
    sw->done++;
  else
    sw->failed++;
  MPI_Send(payload, (int)len, MPI_BYTE, 0, TAG_RESULT, MPI_COMM_WORLD);
}

/* Rank > 0 with idle workers: asks rank 0 for as many points (blocking
 * until it answers). */
static gboolean sweep_mpi_request(Sweep *sw, GError **error)
{
  guint busy = sweep_in_flight(sw) + g_queue_get_length(&sw->todo);
  if (sw->mpi->exhausted || busy >= sw->jobs)
    return TRUE;
  guint32 want = sw->jobs - busy;
  MPI_Send(&want, (int)sizeof want, MPI_BYTE, 0, TAG_REQ, MPI_COMM_WORLD);
  MPI_Status st;
  mpi_wait_probe(0, &st);
  int len = 0;
  g_autofree guint8 *buf = mpi_recv_bytes(&st, &len);
  if (st.MPI_TAG == TAG_DONE) {
    sw->mpi->exhausted = TRUE;
    return TRUE;
  }
  if (st.MPI_TAG == TAG_ABORT) {
    sw->mpi->peer_stopped = TRUE;
    g_set_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_WORKER,
                "MPI rank %d: rank 0 stopped the sweep: %.*s", sw->mpi->rank, len,
                (const char *)buf);
    return FALSE;
  }
  gsize pos = 0;
  while (st.MPI_TAG == TAG_POINTS && pos + 4 <= (gsize)len) {
    guint32 n = 0;
    memcpy(&n, buf + pos, 4);
    pos += 4;
    JsSweepMsg msg = { 0 };
    if (n > (gsize)len - pos ||
        !js_sweep_decode(buf + pos, n, &msg, error))
      break;
    pos += n;
    const SweepPoint *p = msg.index < sweep_n_points(sw) ? sweep_point(sw, msg.index)
                                                : NULL;
    if (msg.kind != JS_SWEEP_MSG_POINT || p == NULL ||
        strcmp(p->id, msg.text) != 0) {
      g_set_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_PROTOCOL,
                  "MPI rank %d: rank 0 sent point %u = %s, which is %s here: "
                  "every rank must run the same script with the same "
                  "arguments", sw->mpi->rank, msg.index, msg.text,
                  p != NULL ? p->id : "no point");
      js_sweep_msg_clear(&msg);
      return FALSE;
    }
    g_queue_push_tail(&sw->todo, GUINT_TO_POINTER(msg.index + 1));
    js_sweep_msg_clear(&msg);
  }
  if (st.MPI_TAG != TAG_POINTS || pos != (gsize)len) {
    if (error != NULL && *error == NULL)
      g_set_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_PROTOCOL,
                  "MPI rank %d: a malformed reply from rank 0 (tag %d, %d "
                  "bytes)", sw->mpi->rank, st.MPI_TAG, len);
    return FALSE;
  }
  return TRUE;
}

/* Every rank must have built the same points: rank 0's count and a hash of
 * its point_ids go to all (collective: every rank is in js.sweep).  FALSE
 * with error on a rank whose points differ. */
gboolean sweep_mpi_check_points(Sweep *sw, GError **error)
{
  guint64 mine[2] = { sweep_n_points(sw), 0 };
  for (guint i = 0; i < sweep_n_points(sw); i++)
    mine[1] = mine[1] * G_GUINT64_CONSTANT(0x100000001b3) ^
              sweep_hash_id(sweep_point(sw, i)->id);
  guint64 root[2] = { mine[0], mine[1] };
  MPI_Bcast(root, 2, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (root[0] == mine[0] && root[1] == mine[1])
    return TRUE;
  g_set_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_PROTOCOL,
              "MPI rank %d: its %u points differ from rank 0's (%" G_GUINT64_FORMAT
              " points): every rank must run the same script with the same "
              "arguments", sw->mpi->rank, sweep_n_points(sw), root[0]);
  return FALSE;
}

/* Rank 0: answers every message waiting (with block, waits for one
 * first).  Rows from other ranks are written as they come. */
static gboolean sweep_mpi_serve(Sweep *sw, gboolean block, GError **error)
{
  for (;;) {
    int flag = 0;
    MPI_Status st;
    if (block) {
      mpi_wait_probe(MPI_ANY_SOURCE, &st);
      flag = 1;
      block = FALSE;
    } else {
      MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
    }
    if (!flag)
      return TRUE;
    int len = 0, src = st.MPI_SOURCE;
    g_autofree guint8 *buf = mpi_recv_bytes(&st, &len);
    if (st.MPI_TAG == TAG_REQ && len == 4 && !sw->mpi->closed[src]) {
      guint32 want = 0;
      memcpy(&want, buf, 4);
      g_autoptr(GByteArray) out = g_byte_array_new();
      for (guint32 k = 0; k < want && !g_queue_is_empty(&sw->todo); k++) {
        guint idx = GPOINTER_TO_UINT(g_queue_pop_head(&sw->todo)) - 1;
        const SweepPoint *p = sweep_point(sw, idx);
        g_autoptr(GByteArray) b =
          js_sweep_encode(JS_SWEEP_MSG_POINT, idx, p->id, p->vals, p->n);
        g_byte_array_append(out, b->data, b->len);
        sw->mpi->holder[idx] = src;
        sw->mpi->remote_flight++;
      }
      if (out->len == 0) {
        MPI_Send(NULL, 0, MPI_BYTE, src, TAG_DONE, MPI_COMM_WORLD);
        sw->mpi->closed[src] = TRUE;
        sw->mpi->open_ranks--;
      } else {
        MPI_Send(out->data, (int)out->len, MPI_BYTE, src, TAG_POINTS,
                 MPI_COMM_WORLD);
      }
      continue;
    }
    if (st.MPI_TAG == TAG_RESULT) {
      JsSweepMsg msg = { 0 };
      if (!js_sweep_decode(buf, (gsize)len, &msg, error)) {
        g_prefix_error(error, "MPI rank %d: ", src);
        return FALSE;
      }
      guint idx = msg.index;
      if (msg.kind == JS_SWEEP_MSG_POINT || idx >= sweep_n_points(sw) ||
          sw->mpi->holder[idx] != src) {
        g_set_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_PROTOCOL,
                    "MPI rank %d sent a result for point %u, which it was "
                    "not running", src, idx);
        js_sweep_msg_clear(&msg);
        return FALSE;
      }
      sw->mpi->holder[idx] = -1;
      sw->mpi->remote_flight--;
      sw->ran++;
      gboolean ok = sweep_take_result(sw, idx, &msg, error);
      js_sweep_msg_clear(&msg);
      if (!ok)
        return FALSE;
      continue;
    }
    if (st.MPI_TAG == TAG_ABORT) {
      if (!sw->mpi->closed[src]) {
        sw->mpi->closed[src] = TRUE;
        sw->mpi->open_ranks--;
      }
      g_set_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_WORKER,
                  "%.*s", len, (const char *)buf); /* names its rank */
      return FALSE;
    }
    g_set_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_PROTOCOL,
                "MPI rank %d sent an unexpected message (tag %d, %d bytes)",
                src, st.MPI_TAG, len);
    return FALSE;
  }
}

/* One turn of the main loop on a distributed sweep (run/sweep_pool.c):
 * rank > 0 asks for points for its idle workers and hands them out; rank
 * 0 answers the other ranks (waiting for one when it has nothing in
 * flight itself, then *again: go round without polling).  *finished when
 * the sweep is over on this rank. */
gboolean sweep_mpi_turn(Sweep *sw, gboolean *finished, gboolean *again,
                        GError **error)
{
  *finished = *again = FALSE;
  if (sweep_remote(sw)) {
    if (!sweep_mpi_request(sw, error) || !sweep_dispatch(sw, error))
      return FALSE;
    *finished = sweep_in_flight(sw) == 0 && sw->mpi->exhausted;
    return TRUE;
  }
  if (!sweep_distributed(sw))
    return TRUE;
  gboolean idle = sweep_in_flight(sw) == 0;
  if (idle && sw->mpi->remote_flight == 0 && sw->mpi->open_ranks == 0) {
    *finished = TRUE;
    return TRUE;
  }
  if (!sweep_mpi_serve(sw, idle, error))
    return FALSE;
  *again = idle;
  return TRUE;
}

#else /* one machine */

void sweep_mpi_setup(Sweep *sw)
{
}

void sweep_mpi_free(Sweep *sw)
{
}

gboolean sweep_remote(const Sweep *sw)
{
  return FALSE;
}

gboolean sweep_distributed(const Sweep *sw)
{
  return FALSE;
}

gboolean sweep_mpi_check_points(Sweep *sw, GError **error)
{
  return TRUE;
}

void sweep_mpi_abort(Sweep *sw, const char *message)
{
}

void sweep_mpi_send_result(Sweep *sw, const guint8 *payload, gsize len,
                           gboolean good)
{
  g_return_if_reached(); /* only an MPI rank > 0 sends results */
}

gboolean sweep_mpi_turn(Sweep *sw, gboolean *finished, gboolean *again,
                        GError **error)
{
  *finished = *again = FALSE;
  return TRUE;
}

#endif

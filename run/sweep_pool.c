/* run/sweep_pool.c -- sweep_run: the worker processes and the main loop
 * of a sweep (run/sweep.h).
 *
 * Workers.  sweep_run fork()s spec->jobs worker processes (never more than
 * the points to run).  A worker is a copy of the caller at the moment of
 * the call: js.sweep's Lua state already holds `run` and everything the
 * script built before, copy-on-write, so no state has to be serialised.
 * Each worker reads a point, calls hooks->run_point, checks the row against
 * the point (sweep_row_strip) and sends back the row or the error message;
 * the parent is the only process that writes the results file.  Parent and
 * worker talk over a socketpair in the frames of run/sweep_wire.c; the
 * parent sends a worker its next point only after writing its previous
 * row, polls all workers, and writes rows in the order they complete.
 *
 * Determinism.  A point's row does not depend on jobs, on which worker ran
 * it or on what the worker ran before: run_point gets the point's own
 * seed (sweep_point_seed of the session's seed and the point_id).  Only
 * the order of the rows depends on timing; point_id identifies them.
 *
 * Crashes.  A worker that dies (killed, crashed in C) is seen as EOF on its
 * socket; it is reaped with waitpid, its point is run once more on a new
 * worker, and when that dies too the point is recorded as failed with the
 * way the worker died.  Workers die with the parent (PR_SET_PDEATHSIG on
 * Linux; elsewhere at their next write).  A worker never returns from
 * sweep_run: it ends with _exit() after flushing stdio, so it runs no exit
 * handler, and its HDF5 state (a copy of the parent's) is let go first
 * (res_release_files_in_child).
 *
 * Every row is flushed when written (io/results.c: a kill -9 keeps every
 * written row), so an interrupted sweep loses only the points in flight.
 *
 * Interrupts.  While the parent of a sweep on one machine runs its
 * points, SIGINT (Ctrl-C), SIGTERM and SIGHUP only set a flag; the main
 * loop sees it before it handles anything else (a worker killed by the
 * same Ctrl-C is not recorded as a failed point), stops the workers,
 * closes the table and fails with JS_SWEEP_ERROR_INTERRUPTED saying how
 * many rows the table holds, all on disk, and that running the script
 * again resumes.  Before, Ctrl-C ended the process silently (nothing was
 * lost, but nobody was told).  Workers get the default actions back.
 */
#include "run/sweep-private.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

/* ---- interrupts -------------------------------------------------------------- */

/* The signal that asked the running sweep to stop (0: none).  Process-wide
 * by necessity: a signal handler can reach nothing else. */
static volatile sig_atomic_t stop_signal;
static const int stop_signals[] = { SIGINT, SIGTERM, SIGHUP };

static void note_stop(int signo)
{
  stop_signal = signo;
}

/* Installs note_stop for stop_signals (old actions to old), or puts the
 * old actions back. */
static void catch_stops(struct sigaction *old)
{
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = note_stop; /* no SA_RESTART: poll() returns EINTR */
  sigemptyset(&sa.sa_mask);
  stop_signal = 0;
  for (gsize i = 0; i < G_N_ELEMENTS(stop_signals); i++)
    sigaction(stop_signals[i], &sa, &old[i]);
}

static void release_stops(const struct sigaction *old)
{
  for (gsize i = 0; i < G_N_ELEMENTS(stop_signals); i++)
    sigaction(stop_signals[i], &old[i], NULL);
}

/* In a new worker: the default actions, so that Ctrl-C ends it. */
static void worker_default_stops(void)
{
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  for (gsize i = 0; i < G_N_ELEMENTS(stop_signals); i++)
    sigaction(stop_signals[i], &sa, NULL);
}

/* TRUE (with error) when a stop signal came. */
static gboolean sweep_stopped(GError **error)
{
  if (stop_signal == 0)
    return FALSE;
  g_set_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_INTERRUPTED,
              "interrupted by %s", g_strsignal(stop_signal));
  return TRUE;
}

/* ---- the sweep's state ------------------------------------------------------ */

static Sweep *sweep_new(const SweepSpec *spec, const SweepHooks *hooks)
{
  Sweep *sw = g_new0(Sweep, 1);
  sw->session = spec->session;
  sw->pts = spec->points;
  sw->hooks = hooks;
  sw->out = spec->out;
  sw->table = spec->table;
  sw->mode = spec->mode;
  sw->retry_failed = spec->retry_failed;
  sw->progress = spec->progress && hooks->progress != NULL;
  sw->jobs = MAX(spec->jobs, 1);
  sw->attempts = g_new0(guint, MAX(sweep_n_points(sw), 1));
  sw->parent = getpid();
  sw->workers = g_array_new(FALSE, TRUE, sizeof(SweepWorker));
  sw->pending = g_array_new(FALSE, TRUE, sizeof(SweepPending));
  sw->failures = g_ptr_array_new_with_free_func(g_free);
  g_queue_init(&sw->todo);
  return sw;
}

/* Stops every worker still running (SIGKILL) and reaps it. */
static void sweep_kill_workers(Sweep *sw)
{
  for (guint i = 0; sw->workers != NULL && i < sw->workers->len; i++) {
    SweepWorker *w = &g_array_index(sw->workers, SweepWorker, i);
    if (w->fd >= 0)
      close(w->fd);
    w->fd = -1;
    if (w->pid > 0) {
      kill(w->pid, SIGKILL);
      while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
        ;
    }
    w->pid = -1;
  }
}

static void sweep_free(Sweep *sw)
{
  /* Only the process that made the workers and opened the table owns
   * them (a worker holds a copy of this struct). */
  if (sw->parent == getpid()) {
    sweep_kill_workers(sw);
    if (sw->t != NULL)
      res_table_free(sw->t);
  }
  g_array_unref(sw->workers);
  for (guint i = 0; i < sw->pending->len; i++)
    g_free(g_array_index(sw->pending, SweepPending, i).message);
  g_array_unref(sw->pending);
  if (sw->failures != NULL)
    g_ptr_array_unref(sw->failures);
  g_queue_clear(&sw->todo);
  g_free(sw->attempts);
  sweep_mpi_free(sw);
  g_free(sw);
}

/* ---- the worker process ------------------------------------------------------- */

/* Runs one point through the hook; returns the reply frame. */
static GByteArray *worker_run_point(Sweep *sw, const JsSweepMsg *msg)
{
  guint np = msg->values->len;
  const ResValue *pv = (const ResValue *)(void *)msg->values->data;
  guint64 seed = sweep_point_seed(sw->session->seed, msg->text);
  g_autoptr(GArray) row = g_array_new(FALSE, TRUE, sizeof(ResValue));
  g_autofree char *problem = NULL;
  sw->session->trust_weakest = -1;
  sw->session->gpu_memory_gb = -1;
  sw->session->gpu_memory_unfit = FALSE;
  gboolean ran = sw->hooks->run_point(sw->hooks->data, pv, np, msg->text,
                                      seed, row, &problem);
  ResValue mem[2] = {
    {.name = "fits", .type = RES_BOOL, .i = !sw->session->gpu_memory_unfit},
    {.name = "memory_gb", .type = RES_FLOAT, .f = sw->session->gpu_memory_gb},
  };
  if (!ran && sw->session->gpu_memory_unfit)
    /* js.simulate refused the layout: a result of the sweep, not a
     * failure of the point. */
    return js_sweep_encode(JS_SWEEP_MSG_UNFIT, msg->index, problem, mem, 2);
  if (ran)
    problem = sweep_row_strip(pv, np, row);
  else if (problem == NULL)
    problem = g_strdup("");
  if (problem == NULL && sw->session->trust_weakest >= 0) {
    /* The point's runs are as trustworthy as the weakest of them. */
    ResValue tv = {.name = "trust", .type = RES_STRING,
                   .s = js_trust_level_name(
                       (JsTrustLevel)sw->session->trust_weakest)};
    g_array_append_val(row, tv);
  }
  if (problem == NULL && sw->session->gpu_memory_gb >= 0)
    g_array_append_vals(row, mem, 2); /* the GPU memory of a js.gpt run */
  if (problem != NULL)
    return js_sweep_encode(JS_SWEEP_MSG_ERROR, msg->index, problem, NULL, 0);
  return js_sweep_encode(JS_SWEEP_MSG_ROW, msg->index, NULL,
                         (const ResValue *)(void *)row->data, row->len);
}

/* The worker's life: points in, rows out, until the parent closes the
 * socket.  Never returns. */
static G_GNUC_NORETURN void worker_main(Sweep *sw, int fd)
{
#ifdef __linux__
  prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
  worker_default_stops();
  if (getppid() != sw->parent)
    _exit(0);
  res_release_files_in_child(); /* the parent's HDF5 files, and locks */
  if (sw->hooks->worker_init != NULL)
    sw->hooks->worker_init(sw->hooks->data);

  for (;;) {
    gboolean eof = FALSE;
    GError *err = NULL;
    g_autoptr(GByteArray) frame = sweep_read_frame(fd, &eof, &err);
    if (frame == NULL) {
      g_clear_error(&err);
      break;
    }
    JsSweepMsg msg;
    if (!js_sweep_decode(frame->data, frame->len, &msg, &err) ||
        msg.kind != JS_SWEEP_MSG_POINT) {
      g_clear_error(&err);
      js_sweep_msg_clear(&msg);
      fflush(NULL);
      _exit(3);
    }
    g_autoptr(GByteArray) reply = worker_run_point(sw, &msg);
    js_sweep_msg_clear(&msg);
    fflush(NULL); /* what run printed, before the parent moves on */
    if (write(fd, reply->data, reply->len) != (ssize_t)reply->len)
      break;
  }
  fflush(NULL);
  _exit(0);
}

/* ---- the parent: workers --------------------------------------------------------- */

/* Starts one worker; FALSE with error when fork or socketpair fails. */
static gboolean sweep_spawn(Sweep *sw, GError **error)
{
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    int e = errno;
    g_set_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_WORKER,
                "cannot start a sweep worker: socketpair: %s", g_strerror(e));
    return FALSE;
  }
  fflush(NULL); /* no buffered output may be written twice */
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(sv[0]);
    close(sv[1]);
    g_set_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_WORKER,
                "cannot start a sweep worker: fork: %s", g_strerror(e));
    return FALSE;
  }
  if (pid == 0) {
    /* The other workers' sockets must close in this process too, or a
     * worker would never see its parent hang up. */
    for (guint i = 0; i < sw->workers->len; i++) {
      SweepWorker *w = &g_array_index(sw->workers, SweepWorker, i);
      if (w->fd >= 0)
        close(w->fd);
    }
    close(sv[0]);
    js_limits_after_fork(sw->session);
    worker_main(sw, sv[1]);
  }
  close(sv[1]);
  SweepWorker w = { pid, sv[0], -1 };
  /* Reuse a dead slot. */
  for (guint i = 0; i < sw->workers->len; i++) {
    SweepWorker *slot = &g_array_index(sw->workers, SweepWorker, i);
    if (slot->pid < 0) {
      *slot = w;
      return TRUE;
    }
  }
  g_array_append_val(sw->workers, w);
  return TRUE;
}

static guint sweep_live_workers(const Sweep *sw)
{
  guint n = 0;
  for (guint i = 0; i < sw->workers->len; i++)
    n += g_array_index(sw->workers, SweepWorker, i).pid > 0;
  return n;
}

guint sweep_in_flight(const Sweep *sw)
{
  guint n = 0;
  for (guint i = 0; i < sw->workers->len; i++)
    n += g_array_index(sw->workers, SweepWorker, i).cur >= 0;
  return n;
}

/* A point that ran out of attempts: recorded here, or on rank 0. */
static gboolean sweep_point_lost(Sweep *sw, guint i, const char *message,
                                 GError **error)
{
  if (sweep_remote(sw)) {
    g_autoptr(GByteArray) b =
      js_sweep_encode(JS_SWEEP_MSG_ERROR, i, message, NULL, 0);
    sweep_mpi_send_result(sw, b->data + 4, b->len - 4, FALSE);
    return TRUE;
  }
  return sweep_failed_point(sw, i, message, error);
}

/* How a reaped worker ended, for the error column. */
static char *describe_status(int status)
{
  if (WIFSIGNALED(status))
    return g_strdup_printf("killed by signal %d (%s)", WTERMSIG(status),
                           g_strsignal(WTERMSIG(status)));
  if (WIFEXITED(status))
    return g_strdup_printf("exited with status %d", WEXITSTATUS(status));
  return g_strdup("ended");
}

/* Worker slot wi is gone (EOF, a failed write, a bad message): reap it and
 * run its point again or fail it. */
static gboolean sweep_worker_lost(Sweep *sw, guint wi, GError **error)
{
  SweepWorker *w = &g_array_index(sw->workers, SweepWorker, wi);
  if (w->fd >= 0)
    close(w->fd);
  w->fd = -1;
  int status = 0;
  kill(w->pid, SIGKILL); /* a worker that sent garbage may still run */
  while (waitpid(w->pid, &status, 0) < 0 && errno == EINTR)
    ;
  w->pid = -1;
  gint64 cur = w->cur;
  w->cur = -1;
  if (cur < 0)
    return TRUE;
  guint attempts = ++sw->attempts[cur];
  if (attempts < SWEEP_MAX_ATTEMPTS) {
    g_queue_push_head(&sw->todo, GUINT_TO_POINTER((guint)cur + 1));
    return TRUE;
  }
  g_autofree char *how = describe_status(status);
  g_autofree char *m =
    g_strdup_printf("the worker process died while running this point (%s), "
                    "%u times", how, attempts);
  return sweep_point_lost(sw, (guint)cur, m, error);
}

/* Gives idle workers the next points; starts workers up to
 * min(jobs, points left).  FALSE only when no worker can run at all. */
gboolean sweep_dispatch(Sweep *sw, GError **error)
{
  for (;;) {
    guint want = MIN(sw->jobs, g_queue_get_length(&sw->todo) +
                                 sweep_in_flight(sw));
    while (sweep_live_workers(sw) < want) {
      GError *err = NULL;
      if (!sweep_spawn(sw, &err)) {
        if (sweep_live_workers(sw) > 0) { /* go on with fewer */
          g_error_free(err);
          break;
        }
        g_propagate_error(error, err);
        return FALSE;
      }
    }
    gboolean lost = FALSE;
    for (guint i = 0; i < sw->workers->len && !g_queue_is_empty(&sw->todo);
         i++) {
      SweepWorker *w = &g_array_index(sw->workers, SweepWorker, i);
      if (w->pid < 0 || w->cur >= 0)
        continue;
      guint idx = GPOINTER_TO_UINT(g_queue_pop_head(&sw->todo)) - 1;
      const SweepPoint *p = sweep_point(sw, idx);
      g_autoptr(GByteArray) b =
        js_sweep_encode(JS_SWEEP_MSG_POINT, idx, p->id, p->vals, p->n);
      w->cur = idx;
      if (!sweep_send_full(w->fd, b->data, b->len)) {
        /* Died before it got the point: that is no attempt at it. */
        w->cur = -1;
        g_queue_push_head(&sw->todo, GUINT_TO_POINTER(idx + 1));
        if (!sweep_worker_lost(sw, i, error))
          return FALSE;
        lost = TRUE;
      }
    }
    if (!lost)
      return TRUE;
  }
}

/* Handles one frame (or EOF) from worker wi. */
static gboolean sweep_receive(Sweep *sw, guint wi, GError **error)
{
  SweepWorker *w = &g_array_index(sw->workers, SweepWorker, wi);
  gboolean eof = FALSE;
  GError *err = NULL;
  g_autoptr(GByteArray) frame = sweep_read_frame(w->fd, &eof, &err);
  JsSweepMsg msg = { 0 };
  if (frame == NULL ||
      !js_sweep_decode(frame->data, frame->len, &msg, &err) ||
      msg.kind == JS_SWEEP_MSG_POINT || (gint64)msg.index != w->cur) {
    g_clear_error(&err);
    js_sweep_msg_clear(&msg);
    return sweep_worker_lost(sw, wi, error);
  }
  guint idx = (guint)w->cur;
  w->cur = -1;
  if (sweep_remote(sw)) {
    sweep_mpi_send_result(sw, frame->data, frame->len,
                          msg.kind != JS_SWEEP_MSG_ERROR);
    js_sweep_msg_clear(&msg);
    return TRUE;
  }
  sw->ran++;
  gboolean ok = sweep_take_result(sw, idx, &msg, error);
  js_sweep_msg_clear(&msg);
  return ok;
}

/* ---- progress ---------------------------------------------------------------------- */

/* Tells the progress hook, at most every 0.2 s unless final. */
static void sweep_progress(Sweep *sw, gboolean final)
{
  if (!sw->progress)
    return;
  gint64 now = g_get_monotonic_time();
  if (!final && now - sw->last_progress_us < 200000)
    return;
  sw->last_progress_us = now;
  SweepProgress p = {
    .table = sw->table,
    .total = sweep_n_points(sw),
    .finished = sw->done + sw->failed + sw->skipped,
    .failed = sw->failed,
    .skipped = sw->skipped,
    .ran = sw->ran,
    .elapsed_s = (double)(now - sw->started_us) * 1e-6,
    .final = final,
  };
  sw->hooks->progress(&p, sw->hooks->progress_data);
}

/* ---- the main loop --------------------------------------------------------------------- */

static gboolean sweep_loop(Sweep *sw, GError **error)
{
  g_autofree struct pollfd *pfd = NULL;
  g_autofree guint *slot = NULL;
  for (;;) {
    if (sweep_stopped(error) || !sweep_dispatch(sw, error))
      return FALSE;
    if (sweep_distributed(sw)) {
      gboolean finished = FALSE, again = FALSE;
      if (!sweep_mpi_turn(sw, &finished, &again, error))
        return FALSE;
      if (finished)
        return TRUE;
      if (again)
        continue;
    }
    if (sweep_in_flight(sw) == 0)
      return TRUE; /* nothing left: dispatch ran everything it could */
    guint n = sw->workers->len;
    pfd = g_renew(struct pollfd, pfd, n);
    slot = g_renew(guint, slot, n);
    nfds_t np = 0;
    for (guint i = 0; i < n; i++) {
      SweepWorker *w = &g_array_index(sw->workers, SweepWorker, i);
      if (w->pid < 0 || w->cur < 0)
        continue;
      pfd[np].fd = w->fd;
      pfd[np].events = POLLIN;
      pfd[np].revents = 0;
      slot[np++] = i;
    }
    /* Rank 0 of an MPI sweep also answers the other ranks: every ms. */
    int rc = poll(pfd, np, sweep_distributed(sw) && !sweep_remote(sw) ? 1
                           : sw->progress                             ? 250
                                                                      : -1);
    if (rc < 0 && errno == EINTR)
      continue;
    if (rc < 0) {
      int e = errno;
      g_set_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_WORKER,
                  "waiting for sweep workers: %s", g_strerror(e));
      return FALSE;
    }
    for (nfds_t k = 0; k < np; k++) {
      if (pfd[k].revents == 0)
        continue;
      if (sweep_stopped(error) || !sweep_receive(sw, slot[k], error))
        return FALSE;
      /* The row is written: only now may this worker get a new point. */
      if (!sweep_dispatch(sw, error))
        return FALSE;
    }
    sweep_progress(sw, FALSE);
  }
}

/* Closes the workers' sockets (they exit) and reaps them. */
static void sweep_stop_workers(Sweep *sw)
{
  for (guint i = 0; i < sw->workers->len; i++) {
    SweepWorker *w = &g_array_index(sw->workers, SweepWorker, i);
    if (w->fd >= 0)
      close(w->fd);
    w->fd = -1;
  }
  for (guint i = 0; i < sw->workers->len; i++) {
    SweepWorker *w = &g_array_index(sw->workers, SweepWorker, i);
    if (w->pid > 0)
      while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
        ;
    w->pid = -1;
  }
}


/* ---- sweep_run -------------------------------------------------------------------------- */

/* Opens the results table (sw->t) and fills sw->todo with the points it
 * does not hold yet; skipped counts the others.  No points: no table. */
static gboolean sweep_plan(Sweep *sw, GError **error)
{
  if (sweep_n_points(sw) == 0)
    return TRUE;
  g_autoptr(GHashTable) done_ids = g_hash_table_new(NULL, NULL);
  if (!sweep_resume(sw, done_ids, error))
    return FALSE;
  for (guint i = 0; i < sweep_n_points(sw); i++) {
    if (g_hash_table_contains(done_ids, sweep_point(sw, i)->id))
      sw->skipped++;
    else
      g_queue_push_tail(&sw->todo, GUINT_TO_POINTER(i + 1));
  }
  return TRUE;
}

/* Before the first fork: the hook's tidying, then the memory limits
 * divided among the workers that will run (js_limits_share). */
static gboolean sweep_before_fork(Sweep *sw, guint workers, GError **error)
{
  if (sw->hooks->before_fork != NULL)
    sw->hooks->before_fork(sw->hooks->data);
  return js_limits_share(sw->session, MIN(sw->jobs, MAX(workers, 1)), error);
}

guint js_sweep_max_jobs(void)
{
  return MAX(JS_SWEEP_MAX_JOBS, 2 * (guint)MAX(g_get_num_processors(), 1));
}

/* The sweep on an MPI rank > 0: points come from rank 0, rows go to it;
 * this rank opens no file. */
static gboolean sweep_run_remote(Sweep *sw, GError **error)
{
  sw->progress = FALSE;
  if (!sweep_before_fork(sw, sw->jobs, error) ||
      !sweep_mpi_check_points(sw, error) || !sweep_loop(sw, error)) {
    sweep_kill_workers(sw);
    sweep_mpi_abort(sw, (*error)->message);
    return FALSE;
  }
  sweep_stop_workers(sw);
  return TRUE;
}

/* After a stop signal: the workers are killed (their points have no row,
 * so a rerun runs them), the table is closed, and *error (replaced) says
 * how many rows it holds and how to resume.  Always FALSE. */
static gboolean sweep_interrupted(Sweep *sw, guint64 *rows, GError **error)
{
  g_clear_error(error);
  sweep_kill_workers(sw);
  sweep_progress(sw, TRUE);
  sw->session->sweep_failed += sw->failed;
  ResTable *t = g_steal_pointer(&sw->t);
  *rows = res_table_rows(t);
  GError *close_err = NULL;
  gboolean closed = res_table_close(t, &close_err);
  g_set_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_INTERRUPTED,
              "interrupted by %s: %u of %u points have their row; table '%s' "
              "in %s holds %" G_GUINT64_FORMAT " rows, %s; run the same "
              "script again to resume (the points with a row are skipped)",
              g_strsignal(stop_signal),
              sw->done + sw->failed + sw->skipped, sweep_n_points(sw),
              sw->table, sw->out, *rows,
              closed ? "all on disk" : close_err->message);
  g_clear_error(&close_err);
  return FALSE;
}

/* Runs every point of sw->todo into the table sweep_plan opened, and
 * closes it. */
static gboolean sweep_run_points(Sweep *sw, guint64 *rows, GError **error)
{
  JsSession *s = sw->session;
  /* Tidy up here, not in the workers. */
  if (!sweep_before_fork(sw, g_queue_get_length(&sw->todo), error)) {
    sweep_mpi_abort(sw, (*error)->message);
    return FALSE;
  }
  sweep_progress(sw, FALSE);
  /* On one machine, Ctrl-C stops the sweep cleanly (see Interrupts). */
  gboolean catching = !sweep_distributed(sw);
  struct sigaction old[G_N_ELEMENTS(stop_signals)];
  if (catching)
    catch_stops(old);
  gboolean ok = sweep_loop(sw, error) && sweep_flush_pending(sw, error);
  if (catching)
    release_stops(old);
  if (!ok && g_error_matches(*error, JS_SWEEP_ERROR,
                             JS_SWEEP_ERROR_INTERRUPTED))
    return sweep_interrupted(sw, rows, error);
  if (!ok) {
    sweep_kill_workers(sw);
    sweep_mpi_abort(sw, (*error)->message);
    return FALSE;
  }
  sweep_stop_workers(sw);
  sweep_progress(sw, TRUE);
  ResTable *t = g_steal_pointer(&sw->t);
  *rows = res_table_rows(t);
  if (!res_table_close(t, error))
    return FALSE;
  s->sweep_failed += sw->failed;
  return TRUE;
}

/* The whole sweep, in the order of the file's header comment; with
 * error, every other rank is told (sweep_mpi_abort) before it returns. */
static gboolean sweep_run_all(Sweep *sw, guint64 *rows, GError **error)
{
  sw->started_us = sw->last_progress_us = g_get_monotonic_time();
  sweep_mpi_setup(sw);
  if (sweep_distributed(sw) && !sweep_remote(sw))
    sweep_mpi_check_points(sw, NULL);
  if (sweep_remote(sw))
    return sweep_run_remote(sw, error);
  if (!sweep_plan(sw, error)) {
    sweep_mpi_abort(sw, (*error)->message);
    return FALSE;
  }
  if (!g_queue_is_empty(&sw->todo))
    return sweep_run_points(sw, rows, error);
  if (sweep_distributed(sw) && !sweep_loop(sw, error)) {
    /* Nothing to run: the other ranks only hear "no more points". */
    sweep_mpi_abort(sw, (*error)->message);
    return FALSE;
  }
  if (sw->t == NULL) /* no points, or a read-only finished sweep */
    return TRUE;
  ResTable *t = g_steal_pointer(&sw->t);
  *rows = res_table_rows(t);
  return res_table_close(t, error);
}

gboolean sweep_run(const SweepSpec *spec, const SweepHooks *hooks,
                   SweepResult *result, GError **error)
{
  g_return_val_if_fail(spec != NULL && spec->points != NULL, FALSE);
  g_return_val_if_fail(hooks != NULL && hooks->run_point != NULL, FALSE);
  g_return_val_if_fail(result != NULL, FALSE);
  memset(result, 0, sizeof *result);
  Sweep *sw = sweep_new(spec, hooks);
  GError *err = NULL;
  guint64 rows = G_MAXUINT64;
  gboolean ok = sweep_run_all(sw, &rows, &err);
  result->total = sweep_n_points(sw);
  result->done = sw->done;
  result->skipped = sw->skipped;
  result->failed = sw->failed;
  result->unfit = sw->unfit;
  result->rows = rows != G_MAXUINT64 ? rows : sw->existing_rows;
  result->failures = g_steal_pointer(&sw->failures);
  sweep_free(sw);
  if (!ok)
    g_propagate_error(error, err);
  return ok;
}

void sweep_result_clear(SweepResult *r)
{
  if (r->failures != NULL)
    g_ptr_array_unref(r->failures);
  memset(r, 0, sizeof *r);
}

guint js_sweep_take_failed(JsSession *s)
{
  g_return_val_if_fail(s != NULL, 0);
  guint n = s->sweep_failed;
  s->sweep_failed = 0;
  return n;
}

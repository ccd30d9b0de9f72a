/* run/limits.c -- the parts of a run's limits (run/session.h, JsLimits)
 * that are not the Lua VM's: the --max-seconds hard stop, and a sweep's
 * division of the memory limits among its forked workers.  The Lua side
 * (the count hook, the capped allocator) is lua/sandbox.c's.
 *
 * The hard stop: time spent inside C (a long js.simulate, a planner, a
 * sweep's parent waiting for workers) is out of a count hook's reach, so
 * SIGALRM, JS_HARD_STOP_S seconds after the deadline, writes the reason
 * and _exit(1)s.  Its message lives in a static buffer: a signal handler
 * can only reach process-global state, and there is one script run per
 * process.
 */
#include "run/session.h"
#include "run/memory.h"

#include <signal.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static char hard_stop_msg[256];
static gsize hard_stop_len;

static void hard_stop(int sig)
{
  (void)sig;
  ssize_t n = write(STDERR_FILENO, hard_stop_msg, hard_stop_len);
  (void)n;
  _exit(1);
}

/* Arms SIGALRM for the hard stop JS_HARD_STOP_S after the deadline. */
static void arm_alarm(const JsLimits *lim)
{
  if (lim->deadline_us == 0)
    return;
  gint64 left = lim->deadline_us - g_get_monotonic_time() +
                (gint64)JS_HARD_STOP_S * G_USEC_PER_SEC;
  if (left < 1)
    left = 1;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = hard_stop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGALRM, &sa, NULL);
  struct itimerval it;
  memset(&it, 0, sizeof it);
  it.it_value.tv_sec = (time_t)(left / G_USEC_PER_SEC);
  it.it_value.tv_usec = (suseconds_t)(left % G_USEC_PER_SEC);
  setitimer(ITIMER_REAL, &it, NULL);
}

void js_limits_start_clock(JsLimits *lim, const char *stop_message)
{
  lim->deadline_us = 0;
  if (lim->max_seconds <= 0)
    return;
  lim->deadline_us = g_get_monotonic_time() +
                     (gint64)(lim->max_seconds * G_USEC_PER_SEC);
  gsize n = g_strlcpy(hard_stop_msg, stop_message, sizeof hard_stop_msg);
  hard_stop_len = MIN(n, sizeof hard_stop_msg - 1);
  arm_alarm(lim);
}

void js_limits_stop_clock(JsLimits *lim)
{
  if (lim->deadline_us == 0)
    return;
  struct itimerval it;
  memset(&it, 0, sizeof it);
  setitimer(ITIMER_REAL, &it, NULL);
  signal(SIGALRM, SIG_DFL);
}

/* What a worker process owns besides the Lua heap: the stack and the
 * libraries' data pages it writes, malloc's own pages (2.2 MB measured
 * with Debian 12's libraries), kept out of its heap cap; and the least
 * heap room worth starting a worker for. */
#define JS_WORKER_OWN_BYTES ((guint64)3 << 20)
#define JS_WORKER_ROOM_BYTES ((guint64)1 << 20)

gboolean js_limits_share(JsSession *s, guint workers, GError **error)
{
  JsLimits *lim = &s->limits;
  workers = MAX(workers, 1);
  lim->shared_by = workers;
  lim->worker_max_memory = 0;
  lim->worker_heap_limit = lim->heap_limit;
  if (s->max_memory == 0) {
    if (lim->heap_limit > lim->heap_bytes)
      lim->worker_heap_limit =
        lim->heap_bytes + (lim->heap_limit - lim->heap_bytes) / workers;
    return TRUE;
  }
  guint64 resident = js_memory_resident();
  guint64 left = s->max_memory > resident ? s->max_memory - resident : 0;
  guint64 share = left / workers;
  if (share < (guint64)lim->heap_bytes + JS_WORKER_OWN_BYTES +
                  JS_WORKER_ROOM_BYTES) {
    g_autofree char *cap = js_memory_format(s->max_memory);
    g_autofree char *held = js_memory_format(resident);
    g_autofree char *each = js_memory_format(share);
    g_autofree char *heap = js_memory_format(lim->heap_bytes);
    g_set_error(error, JS_MEMORY_ERROR, JS_MEMORY_ERROR_LIMIT,
                "--max-memory %s is shared by this process and its %u "
                "workers: this process holds %s, which leaves %s per "
                "worker, too little for its copy of the script's Lua heap "
                "(%s) and room to run a point; give fewer jobs or a larger "
                "--max-memory", cap, workers, held, each, heap);
    return FALSE;
  }
  share -= JS_WORKER_OWN_BYTES;
  lim->worker_heap_limit = (gsize)MIN(share, (guint64)G_MAXSIZE);
  /* js_memory_limit subtracts the resident bytes, in which the inherited
   * pages count once already; the heap's copy is spent in advance. */
  lim->worker_max_memory = resident + share - lim->heap_bytes;
  return TRUE;
}

void js_limits_after_fork(JsSession *s)
{
  JsLimits *lim = &s->limits;
  if (lim->shared_by > 0) {
    lim->heap_limit = lim->worker_heap_limit;
    if (lim->worker_max_memory > 0)
      s->max_memory = lim->worker_max_memory;
  }
  arm_alarm(lim);
}

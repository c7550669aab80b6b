/* The runtime: a libuv loop on its own thread, and a locked task queue that
 * other threads post to (one uv_async_send wakes the loop for a batch).
 * Posts made on the loop thread itself (a call started from a completion
 * callback) skip the wakeup: a check handle runs them right after the poll
 * callbacks of the same loop turn, and a prepare handle catches any posted
 * later in the turn, before the loop could block. */
#include "runtime/runtime.h"

#include <signal.h>
#include <string.h>

/* SPEC AP-06: bumped in a fork()ed child (atfork handler below). A runtime
 * made under an older value is the parent's: its thread is not here. */
uint32_t grit_rt_fork_gen;

/* Run every queued task, including the ones they post in turn. */
static void rt_run_tasks(grit_runtime *rt) {
  grit_list batch;
  grit_list_init(&batch);
  pthread_mutex_lock(&rt->mu);
  if (!grit_list_empty(&rt->tasks)) {
    /* Move the whole queue at once: one lock per batch, not per task. */
    batch = rt->tasks;
    batch.next->prev = &batch;
    batch.prev->next = &batch;
    grit_list_init(&rt->tasks);
  }
  pthread_mutex_unlock(&rt->mu);
  grit_list *e;
  while ((e = grit_list_pop_head(&batch)) != NULL) {
    grit_task *t = GRIT_CONTAINER_OF(e, grit_task, link);
    /* Out of every list now: a post from here on queues it again. An
     * exchange, not a store, so that fn sees what a post that found it
     * still queued wrote before (no lock per task: issue 24). */
    (void)__atomic_exchange_n(&t->queued, false, __ATOMIC_ACQ_REL);
    t->fn(t);
  }
}

static void rt_run_local(grit_runtime *rt) {
  while (rt->local_posted) {
    rt->local_posted = false;
    rt_run_tasks(rt);
  }
}

static void rt_on_turn(uv_check_t *h) {
  rt_run_local(h->data);
}

static void rt_on_settle(uv_prepare_t *h) {
  rt_run_local(h->data);
}

static bool rt_has_tasks(grit_runtime *rt) {
  pthread_mutex_lock(&rt->mu);
  bool any = !grit_list_empty(&rt->tasks);
  pthread_mutex_unlock(&rt->mu);
  return any;
}

static void rt_drain(uv_async_t *a) {
  grit_runtime *rt = a->data;
  pthread_mutex_lock(&rt->mu);
  bool stopping = rt->stopping;
  pthread_mutex_unlock(&rt->mu);
  rt_run_tasks(rt);
  /* Stopping: the wake handle no longer keeps the loop alive, so uv_run
   * returns once the last connection, timer and resolver has closed. It
   * stays open until then: closing objects may still post to it. */
  if (stopping)
    uv_unref((uv_handle_t *)&rt->wake);
}

bool grit_rt_post(grit_runtime *rt, grit_task *t) {
  if (grit_rt_forked(rt))
    return false; /* the parent's: its lock may be held for ever */
  pthread_mutex_lock(&rt->mu);
  /* A stopped runtime's wake handle is closed: the task is dropped (every
   * object it could serve has already finished on the loop). */
  bool queued =
      !rt->stopped && !__atomic_exchange_n(&t->queued, true, __ATOMIC_ACQ_REL);
  if (queued)
    grit_list_insert_tail(&rt->tasks, &t->link);
  pthread_mutex_unlock(&rt->mu);
  if (!queued)
    return false;
  if (grit_rt_on_loop(rt))
    rt->local_posted = true; /* no syscall: the turn handles run it */
  else
    uv_async_send(&rt->wake);
  return true;
}

bool grit_rt_on_loop(const grit_runtime *rt) {
  /* Once stopped, the thread id may be reused by another thread. */
  return !__atomic_load_n(&rt->stopped, __ATOMIC_ACQUIRE) &&
         pthread_equal(pthread_self(), rt->tid);
}

void grit_rt_ref(grit_runtime *rt) {
  __atomic_add_fetch(&rt->refs, 1, __ATOMIC_RELAXED);
}

void grit_rt_unref(grit_runtime *rt) {
  if (__atomic_sub_fetch(&rt->refs, 1, __ATOMIC_ACQ_REL) != 0)
    return;
  if (!grit_rt_forked(rt)) /* a parent's runtime is abandoned as it is */
    pthread_mutex_destroy(&rt->mu);
  grit_free(rt);
}

static void rt_thread(void *arg) {
  grit_runtime *rt = arg;
#ifdef __GLIBC__
  (void)pthread_setname_np(pthread_self(), "grit-io"); /* top -H, perf */
#endif
  /* A write to a reset peer raises SIGPIPE in the writing thread; here it
   * must come back as EPIPE instead of killing the host program. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  uv_run(&rt->loop, UV_RUN_DEFAULT);
  /* Stopping, with nothing active left. A close callback of the last turn
   * may have posted tasks that the turn handles did not get to: run them
   * (and whatever they start) before the runtime's own handles close. */
  while (rt_has_tasks(rt)) {
    rt_run_tasks(rt);
    uv_run(&rt->loop, UV_RUN_DEFAULT);
  }
  uv_close((uv_handle_t *)&rt->wake, NULL);
  uv_close((uv_handle_t *)&rt->turn, NULL);
  uv_close((uv_handle_t *)&rt->settle, NULL);
  uv_run(&rt->loop, UV_RUN_DEFAULT);
}

/* The turn handles stay started but unreferenced: they never keep the loop
 * alive, and cost one flag test per loop turn. */
static void rt_init_turn(grit_runtime *rt) {
  uv_check_init(&rt->loop, &rt->turn);
  uv_prepare_init(&rt->loop, &rt->settle);
  rt->turn.data = rt;
  rt->settle.data = rt;
  uv_check_start(&rt->turn, rt_on_turn);
  uv_prepare_start(&rt->settle, rt_on_settle);
  uv_unref((uv_handle_t *)&rt->turn);
  uv_unref((uv_handle_t *)&rt->settle);
}

static void rt_fork_handlers(void);

grit_err grit_runtime_create(grit_runtime **out) {
  rt_fork_handlers();
  grit_runtime *rt = grit_calloc(1, sizeof(*rt));
  *out = NULL;
  if (!rt)
    return GRIT_ERR_NOMEM;
  grit_list_init(&rt->tasks);
  rt->refs = 1; /* the owner's: grit_runtime_destroy, or the default slot */
  rt->fork_gen = __atomic_load_n(&grit_rt_fork_gen, __ATOMIC_RELAXED);
  if (uv_loop_init(&rt->loop) != 0)
    goto fail_loop;
  if (uv_async_init(&rt->loop, &rt->wake, rt_drain) != 0)
    goto fail_async;
  rt->wake.data = rt;
  rt_init_turn(rt);
  pthread_mutex_init(&rt->mu, NULL);
  if (uv_thread_create(&rt->thread, rt_thread, rt) != 0)
    goto fail_thread;
  rt->tid = (pthread_t)rt->thread;
  *out = rt;
  return GRIT_OK;

fail_thread:
  pthread_mutex_destroy(&rt->mu);
  uv_close((uv_handle_t *)&rt->wake, NULL);
  uv_close((uv_handle_t *)&rt->turn, NULL);
  uv_close((uv_handle_t *)&rt->settle, NULL);
  uv_run(&rt->loop, UV_RUN_NOWAIT);
fail_async:
  uv_loop_close(&rt->loop);
fail_loop:
  grit_free(rt);
  return GRIT_ERR_SYSTEM;
}

void grit_runtime_destroy(grit_runtime *rt) {
  if (!rt || grit_rt_on_loop(rt))
    return;
  if (grit_rt_forked(rt)) {
    /* In a fork()ed child: the thread is the parent's; nothing to stop,
     * and the parent's memory snapshot is left as it is. */
    return;
  }
  pthread_mutex_lock(&rt->mu);
  rt->stopping = true;
  pthread_mutex_unlock(&rt->mu);
  uv_async_send(&rt->wake);
  uv_thread_join(&rt->thread);
  uv_loop_close(&rt->loop);
  /* Handles that outlived their channel (calls) still hold references:
   * they may post (refused now) and ask grit_rt_on_loop (false). */
  pthread_mutex_lock(&rt->mu);
  __atomic_store_n(&rt->stopped, true, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&rt->mu);
  grit_rt_unref(rt);
}

void grit_rt_channel_opened(grit_runtime *rt) {
  __atomic_add_fetch(&rt->channels, 1, __ATOMIC_ACQ_REL);
}

void grit_rt_channel_closed(grit_runtime *rt) {
  __atomic_sub_fetch(&rt->channels, 1, __ATOMIC_ACQ_REL);
}

/* default_mu guards default_rt and orders channel creation against the
 * zero test of grit_default_runtime_shutdown; shutdown_mu makes concurrent
 * shutdowns wait for the one that stops the thread. */
static pthread_mutex_t default_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t shutdown_mu = PTHREAD_MUTEX_INITIALIZER;
static grit_runtime *default_rt;

grit_err grit_rt_default(grit_runtime **out) {
  pthread_mutex_lock(&default_mu);
  grit_err rv = GRIT_OK;
  if (!default_rt)
    rv = grit_runtime_create(&default_rt);
  if (rv == GRIT_OK)
    grit_rt_channel_opened(default_rt);
  *out = default_rt;
  pthread_mutex_unlock(&default_mu);
  return rv;
}

grit_err grit_rt_default_shutdown(void (*after_stop)(void)) {
  pthread_mutex_lock(&shutdown_mu);
  pthread_mutex_lock(&default_mu);
  grit_runtime *rt = default_rt;
  grit_err rv = GRIT_OK;
  if (rt && grit_rt_on_loop(rt))
    rv = GRIT_ERR_WOULD_DEADLOCK;
  else if (rt && __atomic_load_n(&rt->channels, __ATOMIC_ACQUIRE) != 0)
    rv = GRIT_ERR_BUSY;
  else
    default_rt = NULL; /* the next channel on NULL starts a new one */
  pthread_mutex_unlock(&default_mu);
  if (rv == GRIT_OK) {
    grit_runtime_destroy(rt);
    if (after_stop)
      after_stop(); /* no channel anywhere: metrics too */
  }
  pthread_mutex_unlock(&shutdown_mu);
  return rv;
}

/* ---- fork (SPEC AP-06) ----
 *
 * A fork()ed child has only the thread that called fork(): no runtime
 * thread. Before the fork the global locks are taken, so the child never
 * inherits one held by a thread it does not have; in the child they are
 * released, the default runtime is abandoned (the next channel on it
 * starts a new one) and fork_gen moves on, so objects made before the fork
 * answer GRIT_ERR_SHUTDOWN instead of waiting for a thread that is not
 * there. */
/* The layers above hold their own global locks across a fork through
 * these hooks (set once, before their first object exists). */
static void (*fork_lock_hook)(void);
static void (*fork_unlock_hook)(void);

void grit_rt_fork_hooks(void (*lock)(void), void (*unlock)(void)) {
  pthread_mutex_lock(&default_mu);
  fork_lock_hook = lock;
  fork_unlock_hook = unlock;
  pthread_mutex_unlock(&default_mu);
}

static void rt_atfork_prepare(void) {
  pthread_mutex_lock(&default_mu);
  if (fork_lock_hook)
    fork_lock_hook();
}

static void rt_atfork_parent(void) {
  if (fork_unlock_hook)
    fork_unlock_hook();
  pthread_mutex_unlock(&default_mu);
}

/* The parent's default runtimes, abandoned in this child: kept reachable
 * (a leak checker sees memory left as it was, not lost). */
static grit_runtime *abandoned;

static void rt_atfork_child(void) {
  __atomic_add_fetch(&grit_rt_fork_gen, 1, __ATOMIC_RELAXED);
  if (default_rt) { /* the parent's; never touched here again */
    default_rt->abandoned_next = abandoned;
    abandoned = default_rt;
    default_rt = NULL;
  }
  /* A shutdown under way in another thread of the parent holds it. */
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  memcpy(&shutdown_mu, &fresh, sizeof(fresh));
  if (fork_unlock_hook)
    fork_unlock_hook();
  pthread_mutex_unlock(&default_mu);
}

/* Registered once, by the first runtime: a program that never uses grit
 * pays nothing at fork. */
static void rt_atfork_register(void) {
  pthread_atfork(rt_atfork_prepare, rt_atfork_parent, rt_atfork_child);
}

static void rt_fork_handlers(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, rt_atfork_register);
}

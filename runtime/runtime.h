/*
 * runtime: the loop thread and its task queue. A grit_runtime is one libuv
 * loop on its own thread; other threads hand it work as grit_task posts
 * (one uv_async_send wakes the loop for a batch), and posts made on the
 * loop thread run in the same turn without a wakeup. It also owns the
 * process's shared default runtime. Below channel/, which runs every call
 * on a runtime; it knows nothing of channels or calls beyond a count.
 * Layout: floor 3 of docs/layout.md.
 */
#ifndef GRIT_RUNTIME_H
#define GRIT_RUNTIME_H

#include <pthread.h>
#include <uv.h>

#include "util/util.h"

/* A unit of work posted to the loop. Embedded in the object it serves, so
 * posting never allocates; posting a queued task again is a no-op. */
typedef struct grit_task {
  grit_list link;
  void (*fn)(struct grit_task *t);
  bool queued; /* atomic: set by the post that queues it (under the
                  runtime's mu), cleared by the loop just before fn runs */
} grit_task;

struct grit_runtime {
  uv_loop_t loop;
  uv_async_t wake;     /* posts from other threads */
  uv_check_t turn;     /* posts from the loop thread, after poll callbacks */
  uv_prepare_t settle; /* ... and any left before the loop would block */
  bool local_posted;   /* loop only: a post from the loop thread is queued */
  uv_thread_t thread;
  pthread_t tid;
  pthread_mutex_t mu;
  grit_list tasks;   /* under mu */
  bool stopping;     /* under mu */
  uint32_t channels; /* created and not yet destroyed by the user (atomic) */
  /* AP-06: the owner's reference plus one per channel object (which calls
   * outliving their channel keep alive), so a handle that outlives the
   * runtime's thread never reads freed memory. Atomic. */
  uint32_t refs;
  bool stopped;      /* the thread has ended; posts are refused (atomic) */
  uint32_t fork_gen; /* grit_rt_fork_gen when made: another is a parent's */
  struct grit_runtime *abandoned_next; /* runtime.c, in a fork()ed child */
};

/* Queue |t| unless it is queued already or the runtime has stopped;
 * returns whether it queued it. */
bool grit_rt_post(grit_runtime *rt, grit_task *t);
bool grit_rt_on_loop(const grit_runtime *rt);
/* A reference on |rt|'s memory (not its thread): each channel object holds
 * one until it is freed. The last unref frees a stopped runtime. */
void grit_rt_ref(grit_runtime *rt);
void grit_rt_unref(grit_runtime *rt);
/* SPEC AP-06: bumped in a fork()ed child (runtime.c's atfork handler). */
extern uint32_t grit_rt_fork_gen;
/* |rt| belongs to the parent of this process (it was made before a
 * fork()); its thread does not exist here, so nothing may wait for it or
 * lock what it may have held. Inline: it is on every call's path. */
static inline bool grit_rt_forked(const grit_runtime *rt) {
  return rt->fork_gen != __atomic_load_n(&grit_rt_fork_gen, __ATOMIC_RELAXED);
}
/* The shared default runtime, started on first use (again after
 * grit_default_runtime_shutdown), with one more channel counted on it. */
grit_err grit_rt_default(grit_runtime **out);
/* A channel was created on |rt| / was destroyed by its user. The default
 * runtime stops only while its count is zero. */
void grit_rt_channel_opened(grit_runtime *rt);
void grit_rt_channel_closed(grit_runtime *rt);
/* grit_default_runtime_shutdown's work: stop the default runtime unless a
 * channel still counts on it (GRIT_ERR_BUSY) or the caller is its loop
 * thread (GRIT_ERR_WOULD_DEADLOCK). After a stop, |after_stop| (if not
 * NULL) runs before a concurrent shutdown may proceed: the layer above
 * releases what lives as long as any channel (channel/ frees the metric
 * series). */
grit_err grit_rt_default_shutdown(void (*after_stop)(void));
/* fork() (SPEC AP-06): |lock| runs before a fork (after the runtime's own
 * lock is taken), |unlock| after it in parent and child: the layer above
 * holds its global locks across the fork so the child never inherits one
 * held by a thread it does not have. Set once, before the first channel. */
void grit_rt_fork_hooks(void (*lock)(void), void (*unlock)(void));

#endif

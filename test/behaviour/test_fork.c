/* fork() (SPEC AP-06, issue 23 point 3): a process that used grit forks.
 * In the child the default runtime starts afresh: a call on a new channel
 * works; a call on a channel made before the fork fails at once with
 * GRIT_ERR_SHUTDOWN and a status saying why, never hangs; the parent's
 * channel keeps working, during and after the child's life. Every wait is
 * bounded: the child has an alarm, the parent a deadline on waitpid. */
#include <dirent.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__has_include)
#  if __has_include(<valgrind/valgrind.h>)
#    include <valgrind/valgrind.h>
#  endif
#endif
#ifndef VALGRIND_COUNT_ERRORS
#  define VALGRIND_COUNT_ERRORS 0
#endif

#include "bh.h"

#define CALL_MS 10000

#if defined(__SANITIZE_ADDRESS__)
#  define UNDER_ASAN 1
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer)
#    define UNDER_ASAN 1
#  endif
#endif

#ifdef UNDER_ASAN
/* AddressSanitizer's allocator (libasan of gcc 12, LLVM before 18) takes no
 * locks across fork(): a thread of the parent inside malloc at the instant
 * of the fork leaves a lock the child waits on for ever (seen: the child's
 * new runtime thread hung in the sanitizer's own thread start). glibc's
 * malloc, which a program runs with, has its own fork handlers; the plain
 * and valgrind runs fork at any moment. Under ASan the fork waits (bounded)
 * until every other thread sleeps in a waiting system call, so none is
 * inside the sanitizer's allocator. */
static bool waiting_syscall(long nr) {
  static const long waits[] = {
      SYS_futex,     SYS_epoll_wait, SYS_epoll_pwait,
      SYS_ppoll,     SYS_pselect6,   SYS_clock_nanosleep,
      SYS_nanosleep, SYS_accept4,    SYS_read,
#  ifdef SYS_poll
      SYS_poll,
#  endif
#  ifdef SYS_accept
      SYS_accept,
#  endif
  };
  for (size_t i = 0; i < sizeof(waits) / sizeof(waits[0]); i++)
    if (nr == waits[i])
      return true;
  return false;
}

static bool thread_waiting(const char *tid) {
  char path[320], line[256];
  snprintf(path, sizeof(path), "/proc/self/task/%s/stat", tid);
  FILE *f = fopen(path, "r");
  bool ok = f && fgets(line, sizeof(line), f);
  if (f)
    fclose(f);
  const char *rp = ok ? strrchr(line, ')') : NULL; /* "pid (comm) S ..." */
  if (!rp || rp[1] != ' ' || rp[2] != 'S')
    return false;
  snprintf(path, sizeof(path), "/proc/self/task/%s/syscall", tid);
  f = fopen(path, "r");
  ok = f && fgets(line, sizeof(line), f);
  if (f)
    fclose(f);
  /* "running", or "-1 ..." outside a system call (a page fault) */
  return ok && line[0] >= '0' && line[0] <= '9' &&
         waiting_syscall(strtol(line, NULL, 10));
}

static bool others_waiting(void) {
  char self[32];
  snprintf(self, sizeof(self), "%ld", (long)syscall(SYS_gettid));
  DIR *d = opendir("/proc/self/task");
  if (!d)
    return true; /* no /proc: nothing to wait for */
  bool all = true;
  for (struct dirent *e; all && (e = readdir(d));)
    if (e->d_name[0] != '.' && strcmp(e->d_name, self) != 0)
      all = thread_waiting(e->d_name);
  closedir(d);
  return all;
}

/* Every other thread seen waiting twice, 2 ms apart; at most 10 s. */
static void quiesce_for_fork(void) {
  uint64_t end = test_now_ms() + 10000;
  int seen = 0;
  while (seen < 2 && test_now_ms() < end) {
    seen = others_waiting() ? seen + 1 : 0;
    if (seen < 2)
      usleep(2000);
  }
  if (seen < 2)
    fprintf(stderr, "  other threads still busy after 10 s; forking\n");
}
#else
static void quiesce_for_fork(void) {
}
#endif

/* Child exit codes, one per failed step. */
enum {
  CHILD_OK = 0,
  CHILD_NEW_CHANNEL = 10,
  CHILD_NEW_CALL,
  CHILD_OLD_CALL_RV,
  CHILD_OLD_CALL_STATUS,
  CHILD_OLD_CALL_START,
  CHILD_OLD_STATE,
  CHILD_SHUTDOWN,
  CHILD_OLD_RUNTIME,
  CHILD_MEMORY_ERRORS, /* valgrind saw an invalid access in the child */
};

static int child(h2s_server *srv, grit_channel *inherited,
                 grit_call *inherited_call, grit_runtime *inherited_rt) {
  alarm(60); /* a hang is a failure, not a stuck test */
  /* The inherited channel: a clear error, at once. */
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = CALL_MS};
  grit_status st;
  grit_err rv =
      grit_unary_call(inherited, "/pkg.Svc/Echo", "x", 1, &o, NULL, &st, NULL);
  if (rv != GRIT_ERR_SHUTDOWN)
    return CHILD_OLD_CALL_RV;
  bool said = st.code == GRIT_STATUS_UNAVAILABLE && st.message &&
              strstr(st.message, "fork") != NULL;
  fprintf(stderr, "  child, inherited channel: %s \"%s\"\n",
          grit_status_code_name(st.code), st.message);
  grit_status_free(&st);
  if (!said)
    return CHILD_OLD_CALL_STATUS;
  grit_call *c = NULL;
  if (grit_call_start(inherited, "/pkg.Svc/Echo", &o, NULL, NULL, &c) !=
          GRIT_ERR_SHUTDOWN ||
      c)
    return CHILD_OLD_CALL_START;
  if (grit_channel_get_state(inherited, true) != GRIT_STATE_SHUTDOWN)
    return CHILD_OLD_STATE;
  /* A call made before the fork: its functions answer, none waits. */
  grit_bytes b;
  if (grit_call_recv(inherited_call, &b) != GRIT_ERR_SHUTDOWN ||
      grit_call_send(inherited_call, "x", 1) != GRIT_ERR_SHUTDOWN ||
      grit_call_finish(inherited_call, &st) != GRIT_ERR_SHUTDOWN)
    return CHILD_OLD_CALL_RV;
  grit_status_free(&st);
  grit_call_destroy(inherited_call); /* releases nothing: the parent's */
  grit_channel_destroy(inherited);
  /* An own runtime made before the fork is the parent's too. */
  grit_channel *on_old = NULL;
  char target[64];
  bh_target(target, sizeof(target), &srv, 1);
  if (grit_channel_create(inherited_rt, target, NULL, NULL, &on_old) !=
      GRIT_ERR_SHUTDOWN)
    return CHILD_OLD_RUNTIME;
  grit_runtime_destroy(inherited_rt); /* returns at once */

  /* A new channel on the default runtime, which starts afresh here. */
  grit_channel *ch = bh_channel(&srv, 1, NULL);
  if (!ch)
    return CHILD_NEW_CHANNEL;
  grit_status_code code =
      bh_unary(ch, "/pkg.Svc/Echo", "in-the-child", CALL_MS, NULL);
  grit_channel_destroy(ch);
  if (code != GRIT_STATUS_OK)
    return CHILD_NEW_CALL;
  if (grit_default_runtime_shutdown() != GRIT_OK)
    return CHILD_SHUTDOWN;
  return CHILD_OK;
}

/* The child's exit status within |ms|, or -1 (then it is killed). */
static int wait_child(pid_t pid, uint64_t ms) {
  uint64_t end = test_now_ms() + ms;
  int st = 0;
  while (test_now_ms() < end) {
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid)
      return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    usleep(10000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
  return -1;
}

static void test_fork_child_restarts(void) {
  h2s_server *srv = bh_server("path=/pkg.Svc/Hang repeat=* hang");
  ASSERT_NOT_NULL(srv);
  grit_channel *ch = bh_channel(&srv, 1, NULL);
  ASSERT_NOT_NULL(ch);
  for (int i = 0; i < 3; i++)
    ASSERT_EQ(bh_unary(ch, "/pkg.Svc/Echo", "parent", CALL_MS, NULL),
              GRIT_STATUS_OK);
  grit_runtime *own = NULL;
  ASSERT_OK(grit_runtime_create(&own));
  /* A call in flight across the fork. */
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = CALL_MS};
  grit_call *hang = NULL;
  ASSERT_OK(grit_call_start(ch, "/pkg.Svc/Hang", &o, NULL, NULL, &hang));
  ASSERT_OK(grit_call_close_send(hang));
  ASSERT(h2s_server_wait_requests(srv, 4, CALL_MS));

  /* The child reports through a pipe and ends with SIGKILL: its exit would
   * run a leak check over what it inherited from the parent's threads
   * (the in-process test server's buffers, the abandoned runtime), which
   * it must never touch and cannot free. Its own memory errors are
   * counted by valgrind (VALGRIND_COUNT_ERRORS) and reported. */
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  fflush(NULL);
  quiesce_for_fork();
  pid_t pid = fork();
  ASSERT_CMP(pid, >=, 0);
  if (pid == 0) {
    close(fds[0]);
    unsigned char r = (unsigned char)child(srv, ch, hang, own);
    if (r == CHILD_OK && VALGRIND_COUNT_ERRORS > 0)
      r = CHILD_MEMORY_ERRORS;
    if (write(fds[1], &r, 1) != 1)
      _exit(127);
    kill(getpid(), SIGKILL);
    _exit(126);
  }
  close(fds[1]);
  /* The parent's channel works while the child lives and after. */
  ASSERT_EQ(bh_unary(ch, "/pkg.Svc/Echo", "during", CALL_MS, NULL),
            GRIT_STATUS_OK);
  int st = wait_child(pid, 90000);
  unsigned char res = 255;
  int rc = read(fds[0], &res, 1) == 1 ? res : 200 + (st < 0 ? 0 : st);
  close(fds[0]);
  if (rc != CHILD_OK)
    fprintf(stderr, "  child result %d (status %d)\n", rc, st);
  ASSERT_EQ(rc, CHILD_OK);
  ASSERT_EQ(bh_unary(ch, "/pkg.Svc/Echo", "after", CALL_MS, NULL),
            GRIT_STATUS_OK);
  /* The child's call reached the server, as the parent's did. */
  size_t n = h2s_server_request_count(srv);
  bool saw_child = false;
  for (size_t i = 0; i < n; i++) {
    const h2s_request *r = h2s_server_request(srv, i);
    saw_child |= r && r->msg_bytes == strlen("in-the-child");
  }
  ASSERT(saw_child);
  grit_call_destroy(hang);
  grit_channel_destroy(ch);
  grit_runtime_destroy(own);
  h2s_server_stop(srv);
}

static const test_case tests[] = {
    {"fork_child_restarts", test_fork_child_restarts},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  int rc = test_main(tests, argc, argv);
  grit_default_runtime_shutdown();
  return rc;
}

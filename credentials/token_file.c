/* A bearer token read from a file and read again when the file changes
 * (a Kubernetes projected service-account token is replaced in place, by
 * an atomic rename). One stat per attempt; the read happens only when the
 * file's identity, size or modification time moved. SPEC CR-01. */
#include "credentials/creds_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

grit_err grit_call_credentials_create_token_file(const char *path,
                                                 grit_call_credentials **out) {
  if (out)
    *out = NULL;
  if (!path || !path[0] || !out)
    return GRIT_ERR_INVALID_ARG;
  grit_call_credentials *c = grit_calloc(1, sizeof(*c));
  if (!c)
    return GRIT_ERR_NOMEM;
  c->refs = 1;
  c->kind = CREDS_TOKEN_FILE;
  grit_str_copy(c->type, sizeof(c->type), "token_file");
  c->u.file.path = grit_strdup(path);
  if (!c->u.file.path) {
    grit_free(c);
    return GRIT_ERR_NOMEM;
  }
  pthread_mutex_init(&c->u.file.mu, NULL);
  *out = c;
  return GRIT_OK;
}

void grit_creds_token_file_free(grit_call_credentials *c) {
  if (c->u.file.value) {
    grit_creds_scrub(c->u.file.value, strlen(c->u.file.value));
    grit_free(c->u.file.value);
  }
  grit_free(c->u.file.path);
  pthread_mutex_destroy(&c->u.file.mu);
}

static const char oom_text[] = "out of memory";

static int64_t mtime_ns(const struct stat *st) {
  return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

/* Read the whole file (at most CREDS_TOKEN_FILE_MAX bytes) into |buf|.
 * Returns its length, or -1 with |*why| set. */
static ssize_t read_token(const char *path, uint8_t *buf, const char **why) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *why = strerror(errno);
    return -1;
  }
  size_t got = 0;
  for (;;) {
    ssize_t n = read(fd, buf + got, CREDS_TOKEN_FILE_MAX + 1 - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      *why = strerror(errno);
      close(fd);
      return -1;
    }
    if (n == 0)
      break;
    got += (size_t)n;
    if (got > CREDS_TOKEN_FILE_MAX) {
      *why = "larger than 64 KiB";
      close(fd);
      return -1;
    }
  }
  close(fd);
  return (ssize_t)got;
}

/* Under mu: make c->u.file.value current. Returns NULL, or the reason the
 * token cannot be had (static text; never the content). */
static const char *token_refresh(grit_call_credentials *c) {
  struct stat st;
  if (stat(c->u.file.path, &st) != 0)
    return strerror(errno);
  if (c->u.file.have && st.st_dev == c->u.file.dev &&
      st.st_ino == c->u.file.ino && st.st_size == c->u.file.size &&
      mtime_ns(&st) == c->u.file.mtime_ns)
    return NULL;
  uint8_t *buf = grit_malloc(CREDS_TOKEN_FILE_MAX + 1);
  if (!buf)
    return oom_text;
  const char *why = NULL;
  ssize_t n = read_token(c->u.file.path, buf, &why);
  size_t start = 0, len = 0;
  char *value = NULL;
  if (n >= 0 && grit_creds_token_parse(buf, (size_t)n, &start, &len, &why)) {
    value = grit_creds_bearer_value(buf + start, len);
    if (!value)
      why = oom_text;
  }
  grit_creds_scrub(buf, n > 0 ? (size_t)n : 0);
  grit_free(buf);
  if (!value) {
    c->u.file.have = false; /* try again next attempt */
    return why;
  }
  if (c->u.file.value) {
    grit_creds_scrub(c->u.file.value, strlen(c->u.file.value));
    grit_free(c->u.file.value);
  }
  c->u.file.value = value;
  c->u.file.have = true;
  c->u.file.dev = st.st_dev;
  c->u.file.ino = st.st_ino;
  c->u.file.size = st.st_size;
  c->u.file.mtime_ns = mtime_ns(&st);
  return NULL;
}

void grit_creds_token_file_answer(grit_call_credentials *c,
                                  grit_credentials_request *req) {
  pthread_mutex_lock(&c->u.file.mu);
  const char *why = token_refresh(c);
  if (why) {
    char msg[512];
    snprintf(msg, sizeof(msg), "token file %s: %s", c->u.file.path, why);
    pthread_mutex_unlock(&c->u.file.mu);
    grit_credentials_request_done(req,
                                  why == oom_text
                                      ? GRIT_STATUS_RESOURCE_EXHAUSTED
                                      : GRIT_STATUS_UNAVAILABLE,
                                  msg);
    return;
  }
  grit_err rv = grit_credentials_request_add(
      req, "authorization", c->u.file.value, strlen(c->u.file.value));
  pthread_mutex_unlock(&c->u.file.mu);
  grit_credentials_request_done(
      req, rv == GRIT_OK ? GRIT_STATUS_OK : GRIT_STATUS_RESOURCE_EXHAUSTED,
      rv == GRIT_OK ? NULL : "out of memory");
}

/* Internals of credentials/: the object layout shared by creds.c (kinds),
 * token_file.c and fetch.c. Nothing outside credentials/ includes it. */
#ifndef GRIT_CREDS_INT_H
#define GRIT_CREDS_INT_H

#include "credentials/credentials.h"

#include <pthread.h>
#include <sys/types.h>

typedef enum creds_kind {
  CREDS_PLUGIN,
  CREDS_BEARER,
  CREDS_TOKEN_FILE,
  CREDS_COMPOSITE,
} creds_kind;

#define CREDS_TOKEN_FILE_MAX (64 * 1024)
#define CREDS_MAX_LEAVES 16 /* credentials joined in one composite */

struct grit_call_credentials {
  uint32_t refs; /* atomic */
  creds_kind kind;
  char type[32]; /* for messages and traces; never a secret */
  union {
    struct {
      grit_credentials_plugin p;
      void *user_data;
    } plugin;
    struct {
      char *value; /* "Bearer <token>" */
      size_t len;
    } bearer;
    struct {
      pthread_mutex_t mu; /* attempts on several runtimes share one */
      char *path;
      bool have; /* |value| matches the file identified below */
      dev_t dev;
      ino_t ino;
      off_t size;
      int64_t mtime_ns;
      char *value; /* "Bearer <token>", under mu */
    } file;
    struct {
      grit_call_credentials **items; /* leaves, never composite */
      size_t n;
    } comp;
  } u;
};

/* Overwrite |n| bytes of |p| with zeros in a way the compiler keeps. */
void grit_creds_scrub(void *p, size_t n);
/* "Bearer " + the |len| bytes of |tok|, NUL-terminated; NULL on OOM. */
char *grit_creds_bearer_value(const uint8_t *tok, size_t len);
/* The leaves of |c| into |leaves| (at most |cap|); returns their count. */
size_t grit_creds_leaves(grit_call_credentials *c,
                         grit_call_credentials **leaves, size_t cap);
/* Token file: answer |req| now (token_file.c); free the file state. */
void grit_creds_token_file_answer(grit_call_credentials *c,
                                  grit_credentials_request *req);
void grit_creds_token_file_free(grit_call_credentials *c);

#endif

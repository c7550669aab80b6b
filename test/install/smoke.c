/*
 * Built by check_install.sh against the installed grit with pkg-config
 * alone, then run (under valgrind when it is there): the default runtime
 * starts on the first channel, refuses to stop while a channel exists, stops
 * when none does and again when asked twice, and starts anew for the next
 * channel. Needs no server: channels start IDLE and make no connection.
 * Exit status 0 on success, 1 with a message on stderr otherwise.
 */
#include <grit/grit.h>

#include <stdio.h>
#include <string.h>

static int fails;

static void expect_err(const char *what, grit_err got, grit_err want) {
  if (got != want) {
    fprintf(stderr, "smoke: %s: got %s, want %s\n", what, grit_err_name(got),
            grit_err_name(want));
    fails++;
  }
}

int main(void) {
  if (strcmp(GRIT_VERSION, "") == 0) {
    fprintf(stderr, "smoke: empty GRIT_VERSION\n");
    return 1;
  }
  /* Nothing started yet: nothing to stop. */
  expect_err("shutdown before any channel", grit_default_runtime_shutdown(),
             GRIT_OK);

  for (int round = 0; round < 2; round++) {
    grit_channel *a = NULL, *b = NULL;
    expect_err("create a",
               grit_channel_create(NULL, "127.0.0.1:1", NULL, NULL, &a),
               GRIT_OK);
    expect_err("create b",
               grit_channel_create(NULL, "127.0.0.1:2", NULL, NULL, &b),
               GRIT_OK);
    if (grit_channel_get_state(a, false) != GRIT_STATE_IDLE) {
      fprintf(stderr, "smoke: new channel not IDLE\n");
      fails++;
    }
    expect_err("shutdown with two channels", grit_default_runtime_shutdown(),
               GRIT_ERR_BUSY);
    grit_channel_destroy(a);
    expect_err("shutdown with one channel", grit_default_runtime_shutdown(),
               GRIT_ERR_BUSY);
    grit_channel_destroy(b);
    expect_err("shutdown", grit_default_runtime_shutdown(), GRIT_OK);
    expect_err("shutdown again", grit_default_runtime_shutdown(), GRIT_OK);
  }
  if (fails)
    return 1;
  printf("smoke: grit %s OK\n", GRIT_VERSION);
  return 0;
}

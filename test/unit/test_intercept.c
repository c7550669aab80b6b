/* Unit tests of intercept/ (SPEC IC-01): the order of every event, a call
 * failed by an interceptor, on_done exactly once for those that started,
 * per-call data, metadata changes, and references. */
#include "intercept/intercept.h"

#include <stdio.h>

#include "test/harness.h"

static char trace[512];

static void note(const char *what, const char *who) {
  size_t n = strlen(trace);
  snprintf(trace + n, sizeof(trace) - n, "%s%s:%s", n ? " " : "", what, who);
}

typedef struct rec {
  const char *name;
  grit_status_code fail; /* on_start's answer */
  const char *add_key;   /* added to the metadata in on_start */
  int destroyed;
} rec;

static grit_status_code rec_start(void *ud,
                                  const grit_interceptor_call_info *info,
                                  grit_metadata *md, void **call_data,
                                  const char **message) {
  rec *r = ud;
  note("start", r->name);
  *call_data = (void *)r->name; /* seen again by every later hook */
  if (r->add_key) {
    grit_metadata_remove(md, r->add_key);
    grit_metadata_add(md, r->add_key, r->name, strlen(r->name));
  }
  if (r->fail != GRIT_STATUS_OK)
    *message = "denied by policy";
  (void)info;
  return r->fail;
}

static void rec_send(void *ud, void *cd, const uint8_t *d, size_t n) {
  ASSERT_STR_EQ(cd, ((rec *)ud)->name);
  note("send", ((rec *)ud)->name);
  (void)d;
  (void)n;
}

static void rec_headers(void *ud, void *cd, const grit_metadata *md) {
  (void)cd;
  (void)md;
  note("headers", ((rec *)ud)->name);
}

static void rec_message(void *ud, void *cd, const uint8_t *d, size_t n) {
  (void)cd;
  (void)d;
  (void)n;
  note("recv", ((rec *)ud)->name);
}

static void rec_done(void *ud, void *cd, const grit_status *st) {
  ASSERT_STR_EQ(cd, ((rec *)ud)->name);
  char what[32];
  snprintf(what, sizeof(what), "done%d", (int)st->code);
  note(what, ((rec *)ud)->name);
}

static void rec_destroy(void *ud) {
  ((rec *)ud)->destroyed++;
}

static const grit_interceptor_ops rec_ops = {
    .version = GRIT_INTERCEPTOR_OPS_VERSION,
    .on_start = rec_start,
    .on_send = rec_send,
    .on_headers = rec_headers,
    .on_message = rec_message,
    .on_done = rec_done,
    .destroy = rec_destroy,
};

static const grit_interceptor_call_info info = {
    .method = "/pkg.Svc/M",
    .kind = GRIT_METHOD_UNARY,
};

/* Outbound first to last, inbound last to first; the channel's before the
 * call's. */
static void test_order(void) {
  rec ra = {"a", GRIT_STATUS_OK, "x-who", 0},
      rb = {"b", GRIT_STATUS_OK, NULL, 0},
      rc = {"c", GRIT_STATUS_OK, "x-who", 0};
  grit_interceptor *a, *b, *c;
  ASSERT_OK(grit_interceptor_create(&rec_ops, &ra, &a));
  ASSERT_OK(grit_interceptor_create(&rec_ops, &rb, &b));
  ASSERT_OK(grit_interceptor_create(&rec_ops, &rc, &c));
  grit_interceptor *chan[] = {a, b}, *call[] = {c};
  grit_ic_call *ch;
  ASSERT_OK(grit_ic_call_create(chan, 2, call, 1, &ch));
  grit_metadata *md;
  ASSERT_OK(grit_metadata_create(&md));
  trace[0] = '\0';
  char msg[64];
  ASSERT_EQ(grit_ic_call_start(ch, &info, md, msg, sizeof(msg)),
            GRIT_STATUS_OK);
  grit_ic_call_send(ch, (const uint8_t *)"x", 1);
  grit_ic_call_headers(ch, md);
  grit_ic_call_message(ch, (const uint8_t *)"y", 1);
  grit_status st = {.code = GRIT_STATUS_OK};
  grit_ic_call_done(ch, &st);
  grit_ic_call_done(ch, &st); /* only once */
  ASSERT_STR_EQ(trace, "start:a start:b start:c send:a send:b send:c "
                       "headers:c headers:b headers:a recv:c recv:b recv:a "
                       "done0:c done0:b done0:a");
  /* c replaced a's value: the later interceptor's change wins. */
  ASSERT_EQ(grit_metadata_count(md), 1);
  ASSERT_STR_EQ((const char *)grit_metadata_find(md, "x-who", NULL), "c");
  grit_metadata_destroy(md);
  grit_interceptor_unref(a);
  grit_interceptor_unref(b);
  grit_interceptor_unref(c);
  ASSERT_EQ(ra.destroyed, 0); /* the chain holds them */
  grit_ic_call_destroy(ch);
  ASSERT_EQ(ra.destroyed + rb.destroyed + rc.destroyed, 3);
}

/* A failing on_start ends the chain there: later interceptors never see
 * the call, earlier ones see on_done with the failure. */
static void test_fail_at_start(void) {
  rec ra = {"a", GRIT_STATUS_OK, NULL, 0},
      rb = {"b", GRIT_STATUS_PERMISSION_DENIED, NULL, 0},
      rc = {"c", GRIT_STATUS_OK, NULL, 0};
  grit_interceptor *a, *b, *c;
  ASSERT_OK(grit_interceptor_create(&rec_ops, &ra, &a));
  ASSERT_OK(grit_interceptor_create(&rec_ops, &rb, &b));
  ASSERT_OK(grit_interceptor_create(&rec_ops, &rc, &c));
  grit_interceptor *chan[] = {a, b, c};
  grit_ic_call *ch;
  ASSERT_OK(grit_ic_call_create(chan, 3, NULL, 0, &ch));
  trace[0] = '\0';
  char msg[64];
  ASSERT_EQ(grit_ic_call_start(ch, &info, NULL, msg, sizeof(msg)),
            GRIT_STATUS_PERMISSION_DENIED);
  ASSERT_STR_EQ(msg, "denied by policy");
  grit_status st = {.code = GRIT_STATUS_PERMISSION_DENIED};
  grit_ic_call_done(ch, &st);
  ASSERT_STR_EQ(trace, "start:a start:b done7:b done7:a");
  grit_ic_call_destroy(ch);
  grit_interceptor_unref(a);
  grit_interceptor_unref(b);
  grit_interceptor_unref(c);
}

/* No interceptors: no chain, and every hook is a no-op on NULL. */
static void test_empty(void) {
  grit_ic_call *ch = (void *)1;
  ASSERT_OK(grit_ic_call_create(NULL, 0, NULL, 0, &ch));
  ASSERT_NULL(ch);
  char msg[8];
  ASSERT_EQ(grit_ic_call_start(NULL, &info, NULL, msg, sizeof(msg)),
            GRIT_STATUS_OK);
  grit_ic_call_send(NULL, NULL, 0);
  grit_ic_call_headers(NULL, NULL);
  grit_ic_call_message(NULL, NULL, 0);
  grit_ic_call_done(NULL, NULL);
  grit_ic_call_destroy(NULL);
}

/* Hooks left NULL are skipped, and the slot still reaches on_done. */
static void test_sparse_ops(void) {
  grit_interceptor_ops only_done = {.version = GRIT_INTERCEPTOR_OPS_VERSION,
                                    .on_done = rec_done};
  rec ra = {"a", GRIT_STATUS_OK, NULL, 0};
  grit_interceptor *a, *b;
  ASSERT_OK(grit_interceptor_create(&only_done, NULL, &a));
  ASSERT_OK(grit_interceptor_create(&rec_ops, &ra, &b));
  grit_interceptor *chan[] = {b};
  grit_interceptor *call[] = {a};
  grit_ic_call *ch;
  ASSERT_OK(grit_ic_call_create(chan, 1, call, 1, &ch));
  grit_interceptor_unref(a);
  grit_interceptor_unref(b);
  trace[0] = '\0';
  char msg[8];
  ASSERT_EQ(grit_ic_call_start(ch, &info, NULL, msg, sizeof(msg)),
            GRIT_STATUS_OK);
  grit_ic_call_destroy(ch); /* no done: hooks do not run on destroy */
  ASSERT_STR_EQ(trace, "start:a");
  ASSERT_EQ(ra.destroyed, 1);
}

static void test_args(void) {
  grit_interceptor *ic = (void *)1;
  ASSERT_EQ(grit_interceptor_create(NULL, NULL, &ic), GRIT_ERR_INVALID_ARG);
  ASSERT_NULL(ic);
  grit_interceptor_ops bad = {.version = 9};
  ASSERT_EQ(grit_interceptor_create(&bad, NULL, &ic), GRIT_ERR_INVALID_ARG);
  grit_interceptor_ref(NULL);
  grit_interceptor_unref(NULL);
}

static void test_list(void) {
  rec ra = {"a", GRIT_STATUS_OK, NULL, 0};
  grit_interceptor *a;
  ASSERT_OK(grit_interceptor_create(&rec_ops, &ra, &a));
  grit_ic_list l = {0}, copy;
  ASSERT_OK(grit_ic_list_add(&l, a));
  ASSERT_OK(grit_ic_list_add(&l, a));
  ASSERT_OK(grit_ic_list_copy(&l, &copy));
  ASSERT_EQ(copy.n, 2);
  grit_interceptor_unref(a);
  grit_ic_list_free(&l);
  ASSERT_EQ(ra.destroyed, 0);
  grit_ic_list_free(&copy);
  ASSERT_EQ(ra.destroyed, 1);
  ASSERT_EQ(copy.n, 0);
}

static void test_metadata_remove(void) {
  grit_metadata *md;
  ASSERT_OK(grit_metadata_create(&md));
  ASSERT_OK(grit_metadata_add(md, "k", "1", 1));
  ASSERT_OK(grit_metadata_add(md, "j", "2", 1));
  ASSERT_OK(grit_metadata_add(md, "k", "3", 1));
  ASSERT_EQ(grit_metadata_remove(md, "k"), 2);
  ASSERT_EQ(grit_metadata_count(md), 1);
  ASSERT_STR_EQ((const char *)grit_metadata_find(md, "j", NULL), "2");
  ASSERT_EQ(grit_metadata_remove(md, "absent"), 0);
  ASSERT_EQ(grit_metadata_remove(NULL, "k"), 0);
  grit_metadata_destroy(md);
}

static const test_case tests[] = {
    {"order", test_order},
    {"fail_at_start", test_fail_at_start},
    {"empty", test_empty},
    {"sparse_ops", test_sparse_ops},
    {"args", test_args},
    {"list", test_list},
    {"metadata_remove", test_metadata_remove},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  return test_main(tests, argc, argv);
}

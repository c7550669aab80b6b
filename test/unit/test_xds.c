/* Unit tests of xds/ (SPEC XD-01..XD-03; gRFC A27, A28, A31, A32, A42,
 * A44, A50, A52): resources written field by field with the real envoy
 * field numbers (pbw.h), decoded, validated (what grpc NACKs is refused
 * with the field's path), and routed; the protobuf wire reader; an OOM
 * sweep of decoding. */
#include "util/pbwire.h"
#include "xds/xds.h"

#include <stdio.h>

#include "test/harness.h"
#include "test/unit/pbw.h"

#define TP "type.googleapis.com/"
#define HCM_T                                                                  \
  TP "envoy.extensions.filters.network.http_connection_manager.v3."            \
     "HttpConnectionManager"
#define ROUTER_T TP "envoy.extensions.filters.http.router.v3.Router"

/* ---- builders ---- */

static void filter(pbw *hcm, const char *name, const char *type,
                   bool optional) {
  pbw f = {0}, empty = {0};
  pbw_str(&f, 1, name);
  pbw_any(&f, 4, type, &empty);
  if (optional)
    pbw_varint(&f, 6, 1);
  pbw_msg(hcm, 5, &f);
}

/* RouteMatch with a prefix (kind 1), path (2) or safe_regex (10). */
static void match_path(pbw *m, int kind, const char *p) {
  if (kind == 10) {
    pbw re = {0};
    pbw_str(&re, 2, p);
    pbw_msg(m, 10, &re);
  } else {
    pbw_str(m, (uint32_t)kind, p);
  }
}

static void route_to(pbw *vh, int kind, const char *path, const char *cluster) {
  pbw r = {0}, m = {0}, a = {0};
  match_path(&m, kind, path);
  pbw_msg(&r, 1, &m);
  pbw_str(&a, 1, cluster);
  pbw_msg(&r, 2, &a);
  pbw_msg(vh, 3, &r);
}

static void vhost(pbw *rc, const char *name, const char *domain, pbw *vh) {
  pbw_str(vh, 1, name);
  pbw_str(vh, 2, domain);
  pbw_msg(rc, 2, vh);
}

/* A Listener with |hcm| as its api_listener. */
static pbw listener(const char *name, pbw *hcm) {
  pbw l = {0}, api = {0};
  pbw_str(&l, 1, name);
  pbw_any(&api, 1, HCM_T, hcm);
  pbw_msg(&l, 19, &api);
  return l;
}

/* With GRIT_XDS_SEED_DIR set, every input is also written there as a seed
 * for test/fuzz/fuzz_xds.c (its first byte the kind). */
static void seed_write(xds_kind k, const pbw *w) {
  static int n;
  const char *dir = getenv("GRIT_XDS_SEED_DIR");
  if (!dir)
    return;
  char path[512];
  snprintf(path, sizeof(path), "%s/k%d_%03d", dir, (int)k, n++);
  FILE *f = fopen(path, "wb");
  if (!f)
    return;
  fputc((int)k, f);
  fwrite(w->b, 1, w->n, f);
  fclose(f);
}

static xds_resource *decode(xds_kind k, pbw *w, char *err, size_t errsz) {
  xds_resource *r = NULL;
  seed_write(k, w);
  char name[128];
  grit_err rv = grit_xds_resource_decode(k, w->b, w->n, &r, name, sizeof(name),
                                         err, errsz);
  free(w->b);
  memset(w, 0, sizeof(*w));
  if (rv != GRIT_OK)
    return NULL;
  return r;
}

/* Expect a NACK whose reason contains |want|. */
#define ASSERT_NACK(kind, w, want)                                             \
  do {                                                                         \
    char err_[512];                                                            \
    xds_resource *r_ = decode((kind), (w), err_, sizeof(err_));                \
    if (r_) {                                                                  \
      grit_xds_resource_unref(r_);                                             \
      TEST_FAIL_AT(__FILE__, __LINE__, "accepted, wanted NACK: %s", (want));   \
    }                                                                          \
    if (!strstr(err_, (want)))                                                 \
      TEST_FAIL_AT(__FILE__, __LINE__, "reason \"%s\" lacks \"%s\"", err_,     \
                   (want));                                                    \
  } while (0)

/* ---- the wire reader ---- */

static void test_pbwire(void) {
  static const uint8_t good[] = {0x08, 0x96, 0x01, 0x12, 0x02, 'h',
                                 'i',  0x1d, 1,    2,    3,    4};
  grit_pbr r;
  grit_pbf f;
  grit_pbr_init(&r, good, sizeof(good));
  ASSERT_EQ(grit_pbr_next(&r, &f), 1);
  ASSERT_EQ(f.num, 1);
  ASSERT_EQ(f.v, 150);
  ASSERT_EQ(grit_pbr_next(&r, &f), 1);
  ASSERT_EQ(f.num, 2);
  ASSERT_EQ(f.len, 2);
  ASSERT_MEM_EQ(f.data, "hi", 2);
  ASSERT_EQ(grit_pbr_next(&r, &f), 1);
  ASSERT_EQ(f.wt, GRIT_PB_I32);
  ASSERT_EQ(f.v, 0x04030201);
  ASSERT_EQ(grit_pbr_next(&r, &f), 0);
  static const struct {
    const char *what;
    uint8_t b[12];
    size_t n;
  } bad[] = {
      {"truncated varint", {0x08, 0x96}, 2},
      {"field 0", {0x00, 0x01}, 2},
      {"group", {0x0b}, 1},
      {"length past the end", {0x12, 0x05, 'a'}, 3},
      {"short fixed64", {0x09, 1, 2, 3}, 4},
      {"11-byte varint",
       {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02},
       11},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    grit_pbr_init(&r, bad[i].b, bad[i].n);
    if (grit_pbr_next(&r, &f) != -1)
      TEST_FAIL_AT(__FILE__, __LINE__, "accepted: %s", bad[i].what);
  }
  ASSERT(grit_pb_utf8_ok((const uint8_t *)"caf\xc3\xa9", 5));
  ASSERT(!grit_pb_utf8_ok((const uint8_t *)"\xc0\x80", 2));     /* overlong */
  ASSERT(!grit_pb_utf8_ok((const uint8_t *)"\xed\xa0\x80", 3)); /* surrogate */
  ASSERT(!grit_pb_utf8_ok((const uint8_t *)"\xf4\x90\x80\x80", 4)); /* > max */
  pbw d = {0};
  pbw_duration(&d, 1, 2, 500000000);
  grit_pbr_init(&r, d.b, d.n);
  ASSERT_EQ(grit_pbr_next(&r, &f), 1);
  int64_t ns;
  ASSERT(grit_pb_duration_ns(&f, &ns));
  ASSERT_EQ(ns, 2500000000LL);
  free(d.b);
}

/* ---- Listener ---- */

static pbw inline_rc_listener(void) {
  pbw hcm = {0}, rc = {0}, vh = {0};
  route_to(&vh, 1, "/pkg.Svc/", "cluster-a");
  route_to(&vh, 1, "", "cluster-default");
  vhost(&rc, "vh", "*", &vh);
  pbw_msg(&hcm, 4, &rc);
  filter(&hcm, "router", ROUTER_T, false);
  return listener("svc.example:443", &hcm);
}

static void test_listener_inline(void) {
  pbw l = inline_rc_listener();
  char err[256];
  xds_resource *r = decode(XDS_LISTENER, &l, err, sizeof(err));
  ASSERT_NOT_NULL(r);
  ASSERT_STR_EQ(r->name, "svc.example:443");
  ASSERT_NULL(r->u.listener.rds_name);
  const xds_route_config *rc = r->u.listener.route_config;
  ASSERT_NOT_NULL(rc);
  const xds_vhost *vh = grit_xds_vhost_find(rc, "svc.example");
  ASSERT_NOT_NULL(vh);
  const xds_route *rt = grit_xds_route_find(vh, "/pkg.Svc/Get", NULL, 0);
  ASSERT_STR_EQ(grit_xds_route_cluster(rt, 0), "cluster-a");
  rt = grit_xds_route_find(vh, "/other.Svc/Get", NULL, 0);
  ASSERT_STR_EQ(grit_xds_route_cluster(rt, 0), "cluster-default");
  grit_xds_resource_unref(r);
}

static void test_listener_rds(void) {
  pbw hcm = {0}, rds = {0}, src = {0}, ads = {0};
  pbw_msg(&src, 3, &ads); /* ConfigSource.ads */
  pbw_msg(&rds, 1, &src);
  pbw_str(&rds, 2, "routes-1");
  pbw_msg(&hcm, 3, &rds);
  pbw httpopts = {0};
  pbw_duration(&httpopts, 4, 3, 0);
  pbw_msg(&hcm, 35, &httpopts);
  filter(&hcm, "fault", TP "envoy.extensions.filters.http.fault.v3.HTTPFault",
         true); /* optional and unknown: skipped */
  filter(&hcm, "router", ROUTER_T, false);
  pbw l = listener("svc", &hcm);
  char err[256];
  xds_resource *r = decode(XDS_LISTENER, &l, err, sizeof(err));
  ASSERT_NOT_NULL(r);
  ASSERT_STR_EQ(r->u.listener.rds_name, "routes-1");
  ASSERT(r->u.listener.has_max_stream_duration);
  ASSERT_EQ(r->u.listener.max_stream_duration_ns, 3000000000LL);
  grit_xds_resource_unref(r);
}

static void test_listener_nacks(void) {
  pbw l = {0};
  pbw_str(&l, 1, "no-api");
  ASSERT_NACK(XDS_LISTENER, &l, "no api_listener");

  pbw hcm = {0}, rc = {0};
  pbw_msg(&hcm, 4, &rc);
  l = listener("no-filters", &hcm);
  ASSERT_NACK(XDS_LISTENER, &l, "http_filters is empty");

  pbw_msg(&hcm, 4, &rc);
  filter(&hcm, "fault", TP "envoy.extensions.filters.http.fault.v3.HTTPFault",
         false);
  filter(&hcm, "router", ROUTER_T, false);
  l = listener("required-unknown", &hcm);
  ASSERT_NACK(XDS_LISTENER, &l, "http_filters[0]: filter \"fault\"");

  pbw_msg(&hcm, 4, &rc);
  filter(&hcm, "router", ROUTER_T, false);
  filter(&hcm, "router2", ROUTER_T, false);
  l = listener("router-not-last", &hcm);
  ASSERT_NACK(XDS_LISTENER, &l, "the router filter is not last");

  pbw_msg(&hcm, 4, &rc);
  filter(&hcm, "x", ROUTER_T, false);
  filter(&hcm, "x", ROUTER_T, false);
  l = listener("dup", &hcm);
  ASSERT_NACK(XDS_LISTENER, &l, "duplicate filter name");

  pbw rds = {0}, src = {0}, path = {0};
  pbw_str(&path, 1, "/etc/routes");
  pbw_msg(&src, 1, &path); /* ConfigSource.path: not ads */
  pbw_msg(&rds, 1, &src);
  pbw_str(&rds, 2, "r");
  pbw_msg(&hcm, 3, &rds);
  filter(&hcm, "router", ROUTER_T, false);
  l = listener("path-source", &hcm);
  ASSERT_NACK(XDS_LISTENER, &l, "rds: config_source is not ads or self");

  pbw api = {0}, empty = {0};
  pbw_str(&l, 1, "not-hcm");
  pbw_any(&api, 1, TP "google.protobuf.Empty", &empty);
  pbw_msg(&l, 19, &api);
  ASSERT_NACK(XDS_LISTENER, &l, "not an HttpConnectionManager");

  pbw garbage = {0};
  pbw_raw(&garbage, "\x0a\x05x", 3);
  ASSERT_NACK(XDS_LISTENER, &garbage, "malformed");
}

/* ---- RouteConfiguration ---- */

static xds_resource *rc_decode(pbw *rc, char *err, size_t n) {
  pbw full = {0};
  pbw_str(&full, 1, "rc");
  pbw_raw(&full, rc->b, rc->n);
  free(rc->b);
  memset(rc, 0, sizeof(*rc));
  return decode(XDS_ROUTE_CONFIG, &full, err, n);
}

/* A28: exact, then the longest suffix wildcard, then the longest prefix
 * wildcard, then "*"; case-insensitive. */
static void test_domains(void) {
  pbw rc = {0};
  const char *domains[] = {"*",
                           "foo.*",
                           "foo.bar.*",
                           "*.example.com",
                           "*.b.example.com",
                           "a.example.com"};
  for (size_t i = 0; i < 6; i++) {
    pbw vh = {0};
    route_to(&vh, 1, "", domains[i]);
    vhost(&rc, domains[i], domains[i], &vh);
  }
  char err[256];
  xds_resource *r = rc_decode(&rc, err, sizeof(err));
  ASSERT_NOT_NULL(r);
  const xds_route_config *c = &r->u.route_config;
  static const struct {
    const char *host, *want;
  } cases[] = {
      {"a.example.com", "a.example.com"},
      {"A.Example.COM", "a.example.com"},
      {"x.b.example.com", "*.b.example.com"},
      {"x.example.com", "*.example.com"},
      {"foo.bar.baz", "foo.bar.*"},
      {"foo.qux", "foo.*"},
      {"other", "*"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const xds_vhost *vh = grit_xds_vhost_find(c, cases[i].host);
    ASSERT_NOT_NULL(vh);
    ASSERT_STR_EQ(vh->name, cases[i].want);
  }
  grit_xds_resource_unref(r);
}

static void add_header(pbw *m, const char *name, uint32_t kind,
                       const char *value, bool invert) {
  pbw h = {0};
  pbw_str(&h, 1, name);
  if (kind == 7)
    pbw_varint(&h, 7, 1);
  else if (kind == 6) {
    pbw range = {0};
    pbw_varint(&range, 1, 100);
    pbw_varint(&range, 2, 200);
    pbw_msg(&h, 6, &range);
  } else if (kind == 11) {
    pbw re = {0};
    pbw_str(&re, 2, value);
    pbw_msg(&h, 11, &re);
  } else if (kind == 13) { /* string_match: exact, ignore_case */
    pbw sm = {0};
    pbw_str(&sm, 1, value);
    pbw_varint(&sm, 6, 1);
    pbw_msg(&h, 13, &sm);
  } else {
    pbw_str(&h, kind, value);
  }
  if (invert)
    pbw_varint(&h, 8, 1);
  pbw_msg(m, 6, &h);
}

static void route_headers(pbw *vh, uint32_t kind, const char *value,
                          bool invert, const char *cluster) {
  pbw r = {0}, m = {0}, a = {0};
  pbw_str(&m, 1, "/");
  add_header(&m, "x-h", kind, value, invert);
  pbw_msg(&r, 1, &m);
  pbw_str(&a, 1, cluster);
  pbw_msg(&r, 2, &a);
  pbw_msg(vh, 3, &r);
}

static grit_metadata *md1(const char *k, const char *v) {
  grit_metadata *md;
  grit_metadata_create(&md);
  if (k)
    grit_metadata_add(md, k, v, strlen(v));
  return md;
}

static const char *route_for(const xds_vhost *vh, const char *path,
                             const char *hk, const char *hv) {
  grit_metadata *md = md1(hk, hv);
  const xds_route *r = grit_xds_route_find(vh, path, md, 0);
  grit_metadata_destroy(md);
  return r ? grit_xds_route_cluster(r, 0) : "(none)";
}

static void test_matchers(void) {
  pbw rc = {0}, vh = {0};
  route_headers(&vh, 4, "exact", false, "exact");
  route_headers(&vh, 9, "pre", false, "prefix");
  route_headers(&vh, 10, "fix", false, "suffix");
  route_headers(&vh, 12, "mid", false, "contains");
  route_headers(&vh, 6, NULL, false, "range");
  route_headers(&vh, 11, "r[0-9]+", false, "regex");
  route_headers(&vh, 13, "MiXeD", false, "string-ic");
  {
    pbw r = {0}, m = {0}, a = {0}; /* case-insensitive path */
    pbw_str(&m, 2, "/Pkg.Svc/M");
    pbw_wrapped(&m, 4, 0);
    pbw_msg(&r, 1, &m);
    pbw_str(&a, 1, "path-ic");
    pbw_msg(&r, 2, &a);
    pbw_msg(&vh, 3, &r);
  }
  route_to(&vh, 10, "/re\\.Svc/(Get|Put)", "path-regex");
  route_headers(&vh, 7, NULL, true, "absent");
  route_to(&vh, 1, "/", "fallback");
  vhost(&rc, "vh", "*", &vh);
  char err[256];
  xds_resource *r = rc_decode(&rc, err, sizeof(err));
  if (!r)
    fprintf(stderr, "%s\n", err);
  ASSERT_NOT_NULL(r);
  const xds_vhost *v = &r->u.route_config.vhosts[0];
  ASSERT_STR_EQ(route_for(v, "/a/b", "x-h", "exact"), "exact");
  ASSERT_STR_EQ(route_for(v, "/a/b", "x-h", "prefix-yes"), "prefix");
  ASSERT_STR_EQ(route_for(v, "/a/b", "x-h", "a-fix"), "suffix");
  ASSERT_STR_EQ(route_for(v, "/a/b", "x-h", "a-mid-b"), "contains");
  ASSERT_STR_EQ(route_for(v, "/a/b", "x-h", "150"), "range");
  ASSERT_STR_EQ(route_for(v, "/a/b", "x-h", "200"), "fallback"); /* [100,200) */
  ASSERT_STR_EQ(route_for(v, "/a/b", "x-h", "r42"), "regex");
  ASSERT_STR_EQ(route_for(v, "/a/b", "x-h", "r42x"), "fallback"); /* full */
  ASSERT_STR_EQ(route_for(v, "/a/b", "x-h", "mixed"), "string-ic");
  ASSERT_STR_EQ(route_for(v, "/pkg.svc/m", NULL, NULL), "path-ic");
  ASSERT_STR_EQ(route_for(v, "/re.Svc/Put", NULL, NULL), "path-regex");
  ASSERT_STR_EQ(route_for(v, "/re.Svc/Delete", NULL, NULL), "absent");
  ASSERT_STR_EQ(route_for(v, "/re.Svc/Delete", "x-h", "zz"), "fallback");
  grit_xds_resource_unref(r);
}

static void test_runtime_fraction_and_weights(void) {
  pbw rc = {0}, vh = {0};
  {
    pbw r = {0}, m = {0}, a = {0}, rf = {0}, fp = {0};
    pbw_str(&m, 1, "/");
    pbw_varint(&fp, 1, 25); /* 25 % */
    pbw_msg(&rf, 1, &fp);
    pbw_msg(&m, 9, &rf);
    pbw_msg(&r, 1, &m);
    pbw_str(&a, 1, "quarter");
    pbw_msg(&r, 2, &a);
    pbw_msg(&vh, 3, &r);
  }
  {
    pbw r = {0}, m = {0}, a = {0}, wc = {0};
    pbw_str(&m, 1, "/");
    const char *names[] = {"eighty", "zero", "twenty"};
    uint32_t w[] = {80, 0, 20};
    for (int i = 0; i < 3; i++) {
      pbw cw = {0};
      pbw_str(&cw, 1, names[i]);
      pbw_wrapped(&cw, 2, w[i]);
      pbw_msg(&wc, 1, &cw);
    }
    pbw_msg(&a, 3, &wc);
    pbw_msg(&r, 1, &m);
    pbw_msg(&r, 2, &a);
    pbw_msg(&vh, 3, &r);
  }
  vhost(&rc, "vh", "*", &vh);
  char err[256];
  xds_resource *r = rc_decode(&rc, err, sizeof(err));
  ASSERT_NOT_NULL(r);
  const xds_vhost *v = &r->u.route_config.vhosts[0];
  ASSERT_STR_EQ(
      grit_xds_route_cluster(grit_xds_route_find(v, "/x", NULL, 249999), 0),
      "quarter");
  const xds_route *wr = grit_xds_route_find(v, "/x", NULL, 250000);
  ASSERT_NOT_NULL(wr);
  ASSERT_EQ(wr->nweighted, 2); /* the zero weight is skipped */
  ASSERT_EQ(wr->total_weight, 100);
  ASSERT_STR_EQ(grit_xds_route_cluster(wr, 79), "eighty");
  ASSERT_STR_EQ(grit_xds_route_cluster(wr, 80), "twenty");
  ASSERT_STR_EQ(grit_xds_route_cluster(wr, 199), "twenty");
  grit_xds_resource_unref(r);
}

/* A44: codes from retry_on, num_retries + 1 attempts, backoff defaults;
 * a route without its own policy takes its virtual host's. A31: the
 * grpc_timeout_header_max wins over max_stream_duration. A42 hashes. */
static void test_route_policies(void) {
  pbw rc = {0}, vh = {0};
  {
    pbw r = {0}, m = {0}, a = {0}, rp = {0}, msd = {0}, hp = {0}, hh = {0},
        fs = {0};
    pbw_str(&m, 1, "/own");
    pbw_str(&a, 1, "c");
    pbw_str(&rp, 1, "unavailable, cancelled,retriable-4xx");
    pbw_wrapped(&rp, 2, 3);
    pbw_msg(&a, 9, &rp);
    pbw_duration(&msd, 1, 5, 0);
    pbw_duration(&msd, 2, 2, 0);
    pbw_msg(&a, 36, &msd);
    pbw_str(&hh, 1, "x-user");
    pbw_msg(&hp, 1, &hh);
    pbw_varint(&hp, 4, 1);
    pbw_msg(&a, 15, &hp);
    pbw_str(&fs, 1, "io.grpc.channel_id");
    pbw hp2 = {0};
    pbw_msg(&hp2, 6, &fs);
    pbw_msg(&a, 15, &hp2);
    pbw_msg(&r, 1, &m);
    pbw_msg(&r, 2, &a);
    pbw_msg(&vh, 3, &r);
  }
  route_to(&vh, 1, "/", "inherits");
  pbw vrp = {0}, bo = {0};
  pbw_str(&vrp, 1, "deadline-exceeded");
  pbw_duration(&bo, 1, 0, 100000000);
  pbw_msg(&vrp, 8, &bo);
  pbw_msg(&vh, 16, &vrp);
  vhost(&rc, "vh", "*", &vh);
  char err[256];
  xds_resource *r = rc_decode(&rc, err, sizeof(err));
  ASSERT_NOT_NULL(r);
  const xds_vhost *v = &r->u.route_config.vhosts[0];
  const xds_route *own = &v->routes[0], *inh = &v->routes[1];
  ASSERT(own->has_retry);
  ASSERT_EQ(own->retry.codes,
            (1u << GRIT_STATUS_UNAVAILABLE) | (1u << GRIT_STATUS_CANCELLED));
  ASSERT_EQ(own->retry.max_attempts, 4);
  ASSERT_EQ(own->retry.base_ns, 25000000);
  ASSERT_EQ(own->retry.max_ns, 250000000);
  ASSERT(own->has_max_stream_duration);
  ASSERT_EQ(own->max_stream_duration_ns, 2000000000LL);
  ASSERT_EQ(own->nhash, 2);
  ASSERT_EQ(own->hash[0].kind, XDS_HASH_HEADER);
  ASSERT_STR_EQ(own->hash[0].header, "x-user");
  ASSERT(own->hash[0].terminal);
  ASSERT_EQ(own->hash[1].kind, XDS_HASH_CHANNEL_ID);
  ASSERT(inh->has_retry);
  ASSERT_EQ(inh->retry.codes, 1u << GRIT_STATUS_DEADLINE_EXCEEDED);
  ASSERT_EQ(inh->retry.max_attempts, 2);
  ASSERT_EQ(inh->retry.base_ns, 100000000);
  ASSERT_EQ(inh->retry.max_ns, 1000000000);
  grit_xds_resource_unref(r);
}

static void test_route_nacks_and_skips(void) {
  pbw rc = {0}, vh = {0};
  { /* query parameter matcher: route ignored */
    pbw r = {0}, m = {0}, a = {0}, q = {0};
    pbw_str(&m, 1, "/");
    pbw_str(&q, 1, "q");
    pbw_msg(&m, 7, &q);
    pbw_msg(&r, 1, &m);
    pbw_str(&a, 1, "query");
    pbw_msg(&r, 2, &a);
    pbw_msg(&vh, 3, &r);
  }
  { /* cluster_header: route ignored */
    pbw r = {0}, m = {0}, a = {0};
    pbw_str(&m, 1, "/");
    pbw_str(&a, 2, "x-cluster");
    pbw_msg(&r, 1, &m);
    pbw_msg(&r, 2, &a);
    pbw_msg(&vh, 3, &r);
  }
  route_to(&vh, 1, "/", "kept");
  vhost(&rc, "vh", "*", &vh);
  char err[256];
  xds_resource *r = rc_decode(&rc, err, sizeof(err));
  ASSERT_NOT_NULL(r);
  ASSERT_EQ(r->u.route_config.vhosts[0].nroutes, 1);
  grit_xds_resource_unref(r);

  static const struct {
    const char *regex, *why;
  } bad_re[] = {
      {"(a)\\1", "backreferences"}, {"a(?=b)", "lookaround"},
      {"(?>a)", "atomic"},          {"a*+", "possessive"},
      {"(a", "invalid regex"},
  };
  for (size_t i = 0; i < sizeof(bad_re) / sizeof(bad_re[0]); i++) {
    pbw rc2 = {0}, vh2 = {0};
    route_to(&vh2, 10, bad_re[i].regex, "c");
    vhost(&rc2, "vh", "*", &vh2);
    pbw full = {0};
    pbw_str(&full, 1, "rc");
    pbw_raw(&full, rc2.b, rc2.n);
    free(rc2.b);
    ASSERT_NACK(XDS_ROUTE_CONFIG, &full, bad_re[i].why);
  }

  pbw rc3 = {0}, vh3 = {0}, rt = {0}, m = {0}, a = {0}, wc = {0}, cw = {0};
  pbw_str(&m, 1, "/");
  pbw_str(&cw, 1, "zero");
  pbw_wrapped(&cw, 2, 0);
  pbw_msg(&wc, 1, &cw);
  pbw_msg(&a, 3, &wc);
  pbw_msg(&rt, 1, &m);
  pbw_msg(&rt, 2, &a);
  pbw_msg(&vh3, 3, &rt);
  vhost(&rc3, "vh", "*", &vh3);
  pbw full = {0};
  pbw_str(&full, 1, "rc");
  pbw_raw(&full, rc3.b, rc3.n);
  free(rc3.b);
  ASSERT_NACK(XDS_ROUTE_CONFIG, &full,
              "virtual_hosts[0].routes[0].route: weighted_clusters: no "
              "cluster with a weight");

  pbw rc4 = {0}, vh4 = {0}, rt4 = {0}, m4 = {0}, a4 = {0}, rp4 = {0};
  pbw_str(&m4, 1, "/");
  pbw_str(&a4, 1, "c");
  pbw_str(&rp4, 1, "unavailable");
  pbw_wrapped(&rp4, 2, 0);
  pbw_msg(&a4, 9, &rp4);
  pbw_msg(&rt4, 1, &m4);
  pbw_msg(&rt4, 2, &a4);
  pbw_msg(&vh4, 3, &rt4);
  vhost(&rc4, "vh", "*", &vh4);
  pbw full4 = {0};
  pbw_str(&full4, 1, "rc");
  pbw_raw(&full4, rc4.b, rc4.n);
  free(rc4.b);
  ASSERT_NACK(XDS_ROUTE_CONFIG, &full4, "num_retries = 0");
}

/* ---- Cluster ---- */

static void eds_config(pbw *cl, const char *service) {
  pbw ecc = {0}, src = {0}, ads = {0};
  pbw_msg(&src, 3, &ads);
  pbw_msg(&ecc, 1, &src);
  if (service)
    pbw_str(&ecc, 2, service);
  pbw_msg(cl, 3, &ecc);
}

static void test_cluster_eds_legacy_lb(void) {
  pbw cl = {0}, ring = {0}, cb = {0}, th = {0}, od = {0};
  pbw_str(&cl, 1, "c1");
  pbw_varint(&cl, 2, 3); /* EDS */
  eds_config(&cl, "svc-eds");
  pbw_varint(&cl, 6, 2); /* RING_HASH */
  pbw_wrapped(&ring, 1, 2048);
  pbw_wrapped(&ring, 4, 4096);
  pbw_msg(&cl, 23, &ring);
  pbw_wrapped(&th, 4, 77);
  pbw_msg(&cb, 1, &th);
  pbw_msg(&cl, 10, &cb);
  pbw_wrapped(&od, 4, 50);
  pbw_wrapped(&od, 17, 100);
  pbw_msg(&cl, 19, &od);
  char err[256];
  xds_resource *r = decode(XDS_CLUSTER, &cl, err, sizeof(err));
  if (!r)
    fprintf(stderr, "%s\n", err);
  ASSERT_NOT_NULL(r);
  const xds_cluster *c = &r->u.cluster;
  ASSERT_EQ(c->type, XDS_CLUSTER_EDS);
  ASSERT_STR_EQ(c->eds_service_name, "svc-eds");
  ASSERT_EQ(c->lb.kind, XDS_LB_RING_HASH);
  ASSERT_EQ(c->lb.min_ring, 2048);
  ASSERT_EQ(c->lb.max_ring, 4096);
  ASSERT_EQ(c->max_requests, 77);
  ASSERT(c->has_outlier);
  ASSERT_EQ(c->outlier.max_ejection_percent, 50);
  ASSERT(c->outlier.success_rate); /* enforcing_success_rate defaults 100 */
  ASSERT(c->outlier.failure_percentage);
  ASSERT_EQ(c->outlier.fp_threshold, 85);
  ASSERT_EQ(c->outlier.interval_ns, 10000000000LL);
  grit_xds_resource_unref(r);
}

/* A52: the first policy grit knows wins; wrr_locality wraps its child. */
static void test_cluster_typed_lb(void) {
  pbw cl = {0}, lbp = {0};
  pbw_str(&cl, 1, "c2");
  pbw_varint(&cl, 2, 3);
  eds_config(&cl, NULL);
  {
    pbw pol = {0}, tec = {0}, empty = {0};
    pbw_str(&tec, 1, "unknown");
    pbw_any(&tec, 2, TP "com.example.FancyLb", &empty);
    pbw_msg(&pol, 4, &tec);
    pbw_msg(&lbp, 1, &pol);
  }
  {
    pbw wrr = {0}, child = {0}, cpol = {0}, ctec = {0}, wrrl = {0}, pol = {0},
        tec = {0};
    pbw_wrapped(&wrr, 1, 1);
    pbw_duration(&wrr, 3, 5, 0);
    pbw_duration(&wrr, 5, 0, 500000000);
    pbw_str(&ctec, 1, "wrr");
    pbw_any(&ctec, 2,
            TP "envoy.extensions.load_balancing_policies."
               "client_side_weighted_round_robin.v3."
               "ClientSideWeightedRoundRobin",
            &wrr);
    pbw_msg(&cpol, 4, &ctec);
    pbw_msg(&child, 1, &cpol);
    pbw_msg(&wrrl, 1, &child);
    pbw_str(&tec, 1, "wrr_locality");
    pbw_any(&tec, 2,
            TP "envoy.extensions.load_balancing_policies.wrr_locality.v3."
               "WrrLocality",
            &wrrl);
    pbw_msg(&pol, 4, &tec);
    pbw_msg(&lbp, 1, &pol);
  }
  pbw_msg(&cl, 41, &lbp);
  char err[256];
  xds_resource *r = decode(XDS_CLUSTER, &cl, err, sizeof(err));
  if (!r)
    fprintf(stderr, "%s\n", err);
  ASSERT_NOT_NULL(r);
  const xds_cluster *c = &r->u.cluster;
  ASSERT_NULL(c->eds_service_name);
  ASSERT_EQ(c->lb.kind, XDS_LB_WRR);
  ASSERT(c->lb.enable_oob);
  ASSERT_EQ(c->lb.blackout_ns, 5000000000LL);
  ASSERT_EQ(c->lb.update_ns, 500000000);
  ASSERT_EQ(c->max_requests, 1024);
  ASSERT(!c->has_outlier);
  grit_xds_resource_unref(r);
}

static void test_cluster_logical_dns_and_nacks(void) {
  pbw cl = {0}, cla = {0}, loc = {0}, lbe = {0}, ep = {0}, addr = {0}, sa = {0};
  pbw_str(&cl, 1, "dns");
  pbw_varint(&cl, 2, 2);
  pbw_str(&sa, 2, "backend.internal");
  pbw_varint(&sa, 3, 8443);
  pbw_msg(&addr, 1, &sa);
  pbw_msg(&ep, 1, &addr);
  pbw_msg(&lbe, 1, &ep);
  pbw_msg(&loc, 2, &lbe);
  pbw_msg(&cla, 2, &loc);
  pbw_msg(&cl, 33, &cla);
  pbw_varint(&cl, 6, 1); /* LEAST_REQUEST, default choice count */
  char err[256];
  xds_resource *r = decode(XDS_CLUSTER, &cl, err, sizeof(err));
  ASSERT_NOT_NULL(r);
  ASSERT_EQ(r->u.cluster.type, XDS_CLUSTER_LOGICAL_DNS);
  ASSERT_STR_EQ(r->u.cluster.dns_host, "backend.internal");
  ASSERT_EQ(r->u.cluster.dns_port, 8443);
  ASSERT_EQ(r->u.cluster.lb.kind, XDS_LB_LEAST_REQUEST);
  ASSERT_EQ(r->u.cluster.lb.choice_count, 2);
  grit_xds_resource_unref(r);

  pbw c2 = {0};
  pbw_str(&c2, 1, "static");
  pbw_varint(&c2, 2, 0);
  ASSERT_NACK(XDS_CLUSTER, &c2, "cluster type 0 is not supported");

  pbw c3 = {0}, ecc = {0}, src = {0}, path = {0};
  pbw_str(&c3, 1, "eds-path");
  pbw_varint(&c3, 2, 3);
  pbw_str(&path, 1, "/x");
  pbw_msg(&src, 1, &path);
  pbw_msg(&ecc, 1, &src);
  pbw_msg(&c3, 3, &ecc);
  ASSERT_NACK(XDS_CLUSTER, &c3, "not ads or self");

  pbw c4 = {0}, ring = {0};
  pbw_str(&c4, 1, "ring");
  pbw_varint(&c4, 2, 3);
  eds_config(&c4, NULL);
  pbw_varint(&c4, 6, 2);
  pbw_wrapped(&ring, 1, 9000000);
  pbw_msg(&c4, 23, &ring);
  ASSERT_NACK(XDS_CLUSTER, &c4, "load_balancing_policy: ring size");

  pbw c5 = {0}, od = {0};
  pbw_str(&c5, 1, "od");
  pbw_varint(&c5, 2, 3);
  eds_config(&c5, NULL);
  pbw_wrapped(&od, 16, 101);
  pbw_msg(&c5, 19, &od);
  ASSERT_NACK(XDS_CLUSTER, &c5, "outlier_detection");

  pbw c6 = {0}, lbp = {0}, pol = {0}, tec = {0}, empty = {0};
  pbw_str(&c6, 1, "nolb");
  pbw_varint(&c6, 2, 3);
  eds_config(&c6, NULL);
  pbw_any(&tec, 2, TP "com.example.Unknown", &empty);
  pbw_msg(&pol, 4, &tec);
  pbw_msg(&lbp, 1, &pol);
  pbw_msg(&c6, 41, &lbp);
  ASSERT_NACK(XDS_CLUSTER, &c6, "no supported policy");

  pbw c7 = {0}, ct = {0};
  pbw_str(&c7, 1, "agg");
  pbw_str(&ct, 1, "envoy.clusters.aggregate");
  pbw_msg(&c7, 38, &ct);
  ASSERT_NACK(XDS_CLUSTER, &c7, "aggregate");
}

/* ---- ClusterLoadAssignment ---- */

static void endpoint(pbw *loc, const char *ip, uint32_t port, int health,
                     uint32_t weight) {
  pbw lbe = {0}, ep = {0}, addr = {0}, sa = {0};
  pbw_str(&sa, 2, ip);
  pbw_varint(&sa, 3, port);
  pbw_msg(&addr, 1, &sa);
  pbw_msg(&ep, 1, &addr);
  pbw_msg(&lbe, 1, &ep);
  if (health)
    pbw_varint(&lbe, 2, (uint64_t)health);
  if (weight)
    pbw_wrapped(&lbe, 4, weight);
  pbw_msg(loc, 2, &lbe);
}

static void locality(pbw *cla, const char *zone, uint32_t weight, uint32_t prio,
                     pbw *loc) {
  pbw id = {0};
  pbw_str(&id, 1, "region");
  pbw_str(&id, 2, zone);
  pbw_msg(loc, 1, &id);
  if (weight)
    pbw_wrapped(loc, 3, weight);
  if (prio)
    pbw_varint(loc, 5, prio);
  pbw_msg(cla, 2, loc);
}

static void test_endpoints(void) {
  pbw cla = {0}, l0 = {0}, l1 = {0}, lz = {0}, pol = {0}, drop = {0}, pct = {0};
  pbw_str(&cla, 1, "svc-eds");
  endpoint(&l0, "127.0.0.1", 5001, 1, 0);
  endpoint(&l0, "127.0.0.2", 5002, 2, 3);
  locality(&cla, "a", 2, 0, &l0);
  endpoint(&l1, "::1", 5003, 0, 0);
  locality(&cla, "b", 1, 1, &l1);
  endpoint(&lz, "127.0.0.9", 5009, 0, 0);
  locality(&cla, "zero-weight", 0, 0, &lz);
  pbw_str(&drop, 1, "lb");
  pbw_varint(&pct, 1, 5);
  pbw_varint(&pct, 2, 1); /* TEN_THOUSAND: 0.05 % */
  pbw_msg(&drop, 2, &pct);
  pbw_msg(&pol, 2, &drop);
  pbw_msg(&cla, 4, &pol);
  char err[256];
  xds_resource *r = decode(XDS_ENDPOINTS, &cla, err, sizeof(err));
  if (!r)
    fprintf(stderr, "%s\n", err);
  ASSERT_NOT_NULL(r);
  const xds_endpoints *e = &r->u.endpoints;
  ASSERT_EQ(e->nlocalities, 2);
  ASSERT_EQ(e->npriorities, 2);
  ASSERT_STR_EQ(e->localities[0].zone, "a");
  ASSERT_EQ(e->localities[0].weight, 2);
  ASSERT_EQ(e->localities[0].nendpoints, 2);
  ASSERT_EQ(e->localities[0].endpoints[1].weight, 3);
  ASSERT_EQ(e->localities[0].endpoints[1].health, XDS_HEALTH_UNHEALTHY);
  ASSERT_EQ(e->localities[0].endpoints[0].weight, 1);
  ASSERT_EQ(e->localities[1].priority, 1);
  ASSERT_STR_EQ(e->localities[1].endpoints[0].host, "::1");
  ASSERT_EQ(e->ndrops, 1);
  ASSERT_EQ(e->drops[0].per_million, 500);
  ASSERT_STR_EQ(e->drops[0].category, "lb");
  grit_xds_resource_unref(r);

  pbw c1 = {0}, a1 = {0}, lbe1 = {0}, ep1 = {0}, ad1 = {0}, sa1 = {0};
  pbw_str(&c1, 1, "zero");
  pbw_str(&sa1, 2, "127.0.0.1");
  pbw_varint(&sa1, 3, 1);
  pbw_msg(&ad1, 1, &sa1);
  pbw_msg(&ep1, 1, &ad1);
  pbw_msg(&lbe1, 1, &ep1);
  pbw_wrapped(&lbe1, 4, 0); /* load_balancing_weight {value: 0} */
  pbw_msg(&a1, 2, &lbe1);
  locality(&c1, "a", 1, 0, &a1);
  ASSERT_NACK(XDS_ENDPOINTS, &c1, "weight 0");

  pbw c2 = {0}, a2 = {0}, b2 = {0};
  pbw_str(&c2, 1, "dup");
  endpoint(&a2, "127.0.0.1", 1, 0, 0);
  locality(&c2, "a", 1, 0, &a2);
  endpoint(&b2, "127.0.0.1", 1, 0, 0);
  locality(&c2, "b", 1, 0, &b2);
  ASSERT_NACK(XDS_ENDPOINTS, &c2, "duplicate endpoint 127.0.0.1:1");

  pbw c3 = {0}, a3 = {0};
  pbw_str(&c3, 1, "gap");
  endpoint(&a3, "127.0.0.1", 1, 0, 0);
  locality(&c3, "a", 1, 1, &a3);
  ASSERT_NACK(XDS_ENDPOINTS, &c3, "priority 0 missing");

  pbw c4 = {0}, a4 = {0};
  pbw_str(&c4, 1, "host");
  endpoint(&a4, "backend.example", 1, 0, 0);
  locality(&c4, "a", 1, 0, &a4);
  ASSERT_NACK(XDS_ENDPOINTS, &c4,
              "endpoints[0].lb_endpoints[0]: endpoint "
              "address \"backend.example\" is not an IP");

  pbw c5 = {0}, a5 = {0}, b5 = {0};
  pbw_str(&c5, 1, "duploc");
  endpoint(&a5, "127.0.0.1", 1, 0, 0);
  locality(&c5, "a", 1, 0, &a5);
  endpoint(&b5, "127.0.0.2", 1, 0, 0);
  locality(&c5, "a", 1, 0, &b5);
  ASSERT_NACK(XDS_ENDPOINTS, &c5, "duplicate locality");

  pbw c6 = {0};
  ASSERT_NACK(XDS_ENDPOINTS, &c6, "no name");
}

/* 1 000 endpoints (issue 27): all decoded in document order; duplicates
 * among many are found (sorted, not pairwise) and the one named is the
 * first in document order that has a duplicate, as before. */
static void many_endpoints(pbw *cla, int dup_a, int dup_b) {
  pbw a = {0}, b = {0};
  char ip[32];
  pbw_str(cla, 1, "many");
  for (int i = 0; i < 500; i++) {
    snprintf(ip, sizeof(ip), "127.0.0.%d", i % 250 + 1);
    endpoint(&a, ip, (uint32_t)(1000 + i / 250), 0, 0);
  }
  locality(cla, "a", 1, 0, &a);
  for (int i = 0; i < 500; i++) {
    /* b[dup_b] repeats a[dup_a]; a[dup_b] is also repeated, later. */
    int j = i == dup_b ? dup_a : i == dup_b + 1 ? dup_b : -1;
    if (j >= 0)
      snprintf(ip, sizeof(ip), "127.0.0.%d", j % 250 + 1);
    else
      snprintf(ip, sizeof(ip), "127.0.1.%d", i % 250 + 1);
    endpoint(&b, ip, j >= 0 ? (uint32_t)(1000 + j / 250) : (uint32_t)(2000 + i),
             0, 0);
  }
  locality(cla, "b", 1, 0, &b);
}

static void test_endpoints_many(void) {
  pbw cla = {0};
  many_endpoints(&cla, -1, -10);
  char err[256];
  xds_resource *r = decode(XDS_ENDPOINTS, &cla, err, sizeof(err));
  ASSERT_NOT_NULL(r);
  const xds_endpoints *e = &r->u.endpoints;
  ASSERT_EQ(e->nlocalities, 2);
  ASSERT_EQ(e->localities[0].nendpoints, 500);
  ASSERT_EQ(e->localities[1].nendpoints, 500);
  ASSERT_STR_EQ(e->localities[0].endpoints[251].host, "127.0.0.2");
  ASSERT_EQ(e->localities[0].endpoints[251].port, 1001);
  ASSERT_EQ(e->localities[1].endpoints[499].port, 2499);
  grit_xds_resource_unref(r);

  /* b[400] repeats a[260] (127.0.0.11:1001), b[401] repeats a[400]
   * (127.0.0.151:1001): a[260] is named, the first with a duplicate. */
  pbw d = {0};
  many_endpoints(&d, 260, 400);
  ASSERT_NACK(XDS_ENDPOINTS, &d, "duplicate endpoint 127.0.0.11:1001");
  /* Within one locality, and the same address on another port is fine. */
  pbw one = {0}, l = {0};
  pbw_str(&one, 1, "one");
  endpoint(&l, "10.0.0.1", 80, 0, 0);
  endpoint(&l, "10.0.0.1", 81, 0, 0);
  endpoint(&l, "10.0.0.2", 80, 0, 0);
  endpoint(&l, "10.0.0.1", 81, 0, 0);
  locality(&one, "z", 1, 0, &l);
  ASSERT_NACK(XDS_ENDPOINTS, &one, "duplicate endpoint 10.0.0.1:81");
}

static void test_any_unwrap(void) {
  pbw res = {0}, inner = {0}, wrapper = {0}, val = {0};
  pbw_str(&val, 1, "payload");
  pbw_any(&inner, 2, TP "envoy.config.cluster.v3.Cluster", &val);
  pbw_str(&inner, 3, "name");
  pbw_any(&wrapper, 1, TP "envoy.service.discovery.v3.Resource", &inner);
  /* |wrapper| holds one field (1) that is the Any: unwrap its bytes. */
  grit_pbr r;
  grit_pbf f;
  grit_pbr_init(&r, wrapper.b, wrapper.n);
  ASSERT_EQ(grit_pbr_next(&r, &f), 1);
  const char *t;
  size_t tl, vl;
  const uint8_t *v;
  ASSERT(grit_xds_any_unwrap(f.data, f.len, &t, &tl, &v, &vl));
  ASSERT_EQ(grit_xds_kind_of(t, tl), XDS_CLUSTER);
  ASSERT_EQ(vl, 9);
  free(wrapper.b);
  free(res.b);
  ASSERT_EQ(grit_xds_kind_of("x", 1), -1);
}

/* ---- OOM sweep over decoding every kind ---- */

static long oom_count, oom_at;
static bool oom_on;
static void *oom_malloc(size_t n, void *ud) {
  (void)ud;
  return oom_on && ++oom_count == oom_at ? NULL : malloc(n);
}
static void oom_free(void *p, void *ud) {
  (void)ud;
  free(p);
}
static void *oom_calloc(size_t n, size_t m, void *ud) {
  (void)ud;
  return oom_on && ++oom_count == oom_at ? NULL : calloc(n, m);
}
static void *oom_realloc(void *p, size_t n, void *ud) {
  (void)ud;
  return oom_on && ++oom_count == oom_at ? NULL : realloc(p, n);
}
static const grit_allocator oom_alloc = {NULL, oom_malloc, oom_free, oom_calloc,
                                         oom_realloc};

static void test_oom_sweep(void) {
  pbw l = inline_rc_listener();
  pbw cla = {0}, loc = {0};
  pbw_str(&cla, 1, "e");
  endpoint(&loc, "127.0.0.1", 80, 0, 0);
  endpoint(&loc, "127.0.0.2", 80, 0, 0); /* the duplicate check's array */
  locality(&cla, "z", 1, 0, &loc);
  pbw rc = {0}, vh = {0};
  route_to(&vh, 10, "/a.B/[A-Z]+", "regex");
  vhost(&rc, "vh", "*", &vh);
  pbw rcf = {0};
  pbw_str(&rcf, 1, "rc");
  pbw_raw(&rcf, rc.b, rc.n);
  free(rc.b);
  struct {
    xds_kind k;
    pbw *w;
  } inputs[] = {
      {XDS_LISTENER, &l}, {XDS_ENDPOINTS, &cla}, {XDS_ROUTE_CONFIG, &rcf}};
  grit_set_allocator(&oom_alloc);
  for (size_t i = 0; i < 3; i++) {
    oom_count = 0;
    oom_at = 0;
    oom_on = true;
    xds_resource *r;
    char err[128], name[64];
    grit_err rv =
        grit_xds_resource_decode(inputs[i].k, inputs[i].w->b, inputs[i].w->n,
                                 &r, name, sizeof(name), err, sizeof(err));
    long total = oom_count;
    oom_on = false;
    ASSERT_OK(rv);
    grit_xds_resource_unref(r);
    long nomem = 0;
    for (long at = 1; at <= total; at++) {
      oom_count = 0;
      oom_at = at;
      oom_on = true;
      rv = grit_xds_resource_decode(inputs[i].k, inputs[i].w->b, inputs[i].w->n,
                                    &r, name, sizeof(name), err, sizeof(err));
      oom_on = false;
      if (rv == GRIT_OK)
        grit_xds_resource_unref(r);
      else if (rv == GRIT_ERR_NOMEM)
        nomem++;
      else
        TEST_FAIL_AT(__FILE__, __LINE__, "input %zu, allocation %ld: %s (%s)",
                     i, at, grit_err_name(rv), err);
    }
    ASSERT_CMP(nomem, >, 0);
    free(inputs[i].w->b);
  }
  grit_set_allocator(NULL);
}

/* A52, A62 (issue 27): a typed PickFirst (shuffle_address_list) and a bare
 * RoundRobin span each priority's endpoints; inside WrrLocality a policy
 * goes per locality; a malformed PickFirst is refused. */
static xds_resource *typed_cluster(const char *type, const pbw *cfg,
                                   bool in_wrr_locality, char *err,
                                   size_t errsz) {
  pbw cl = {0}, lbp = {0}, pol = {0}, tec = {0}, copy = {0};
  if (cfg && cfg->n) {
    copy.b = malloc(cfg->n);
    memcpy(copy.b, cfg->b, cfg->n);
    copy.n = copy.cap = cfg->n;
  }
  pbw_str(&cl, 1, "c3");
  pbw_varint(&cl, 2, 3);
  eds_config(&cl, NULL);
  pbw_str(&tec, 1, "p");
  pbw_any(&tec, 2, type, &copy);
  pbw_msg(&pol, 4, &tec);
  if (in_wrr_locality) {
    pbw child = {0}, wrrl = {0}, wpol = {0}, wtec = {0};
    pbw_msg(&child, 1, &pol);
    pbw_msg(&wrrl, 1, &child);
    pbw_str(&wtec, 1, "wrr_locality");
    pbw_any(&wtec, 2,
            TP "envoy.extensions.load_balancing_policies.wrr_locality.v3."
               "WrrLocality",
            &wrrl);
    pbw_msg(&wpol, 4, &wtec);
    pbw_msg(&lbp, 1, &wpol);
  } else {
    pbw_msg(&lbp, 1, &pol);
  }
  pbw_msg(&cl, 41, &lbp);
  return decode(XDS_CLUSTER, &cl, err, errsz);
}

static void test_cluster_pick_first_per_priority(void) {
  const char *pf =
      TP "envoy.extensions.load_balancing_policies.pick_first.v3.PickFirst";
  const char *rr =
      TP "envoy.extensions.load_balancing_policies.round_robin.v3.RoundRobin";
  char err[256];
  pbw shuffle = {0};
  pbw_varint(&shuffle, 1, 1);
  xds_resource *r = typed_cluster(pf, &shuffle, false, err, sizeof(err));
  ASSERT_NOT_NULL(r);
  ASSERT_EQ(r->u.cluster.lb.kind, XDS_LB_PICK_FIRST);
  ASSERT(r->u.cluster.lb.shuffle);
  ASSERT(r->u.cluster.lb.per_priority);
  grit_xds_resource_unref(r);
  r = typed_cluster(pf, NULL, true, err, sizeof(err));
  ASSERT_NOT_NULL(r);
  ASSERT_EQ(r->u.cluster.lb.kind, XDS_LB_PICK_FIRST);
  ASSERT(!r->u.cluster.lb.shuffle);
  ASSERT(!r->u.cluster.lb.per_priority);
  grit_xds_resource_unref(r);
  r = typed_cluster(rr, NULL, false, err, sizeof(err));
  ASSERT_NOT_NULL(r);
  ASSERT_EQ(r->u.cluster.lb.kind, XDS_LB_ROUND_ROBIN);
  ASSERT(r->u.cluster.lb.per_priority);
  grit_xds_resource_unref(r);
  pbw bad = {0};
  pbw_str(&bad, 1, "yes");
  r = typed_cluster(pf, &bad, false, err, sizeof(err));
  ASSERT_NULL(r);
  ASSERT(strstr(err, "PickFirst: malformed") != NULL);
  free(shuffle.b);
  free(bad.b);
}

static const test_case tests[] = {
    {"pbwire", test_pbwire},
    {"listener_inline", test_listener_inline},
    {"listener_rds", test_listener_rds},
    {"listener_nacks", test_listener_nacks},
    {"domains", test_domains},
    {"matchers", test_matchers},
    {"runtime_fraction_and_weights", test_runtime_fraction_and_weights},
    {"route_policies", test_route_policies},
    {"route_nacks_and_skips", test_route_nacks_and_skips},
    {"cluster_eds_legacy_lb", test_cluster_eds_legacy_lb},
    {"cluster_typed_lb", test_cluster_typed_lb},
    {"cluster_logical_dns_and_nacks", test_cluster_logical_dns_and_nacks},
    {"endpoints", test_endpoints},
    {"endpoints_many", test_endpoints_many},
    {"any_unwrap", test_any_unwrap},
    {"oom_sweep", test_oom_sweep},
    {"cluster_pick_first_per_priority", test_cluster_pick_first_per_priority},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  return test_main(tests, argc, argv);
}

/* grit call: everything it prints on stdout, plain or as JSON lines.
 *
 * Plain: "header k: v" lines (--show-headers), one "response (N bytes):
 * HEX" line per response message as it arrives, then "status:", "peer:",
 * "latency:" and "trailer k: v" lines. JSON: one object per line, each
 * with exactly one of "headers", "response", "code" (the call's end) or
 * "summary" besides "call_id", so stdout holds nothing but JSON. */
#include "call.h"

#include "pbjson/pbjson.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Length of the well-formed UTF-8 sequence at |s| (|n| bytes left), or 0:
 * no overlong forms, surrogates or code points past U+10FFFF (RFC 3629
 * §4). */
static size_t utf8_len(const unsigned char *s, size_t n) {
  size_t len;
  uint32_t cp;
  if (s[0] < 0x80)
    return 1;
  if (s[0] >= 0xc2 && s[0] <= 0xdf) {
    len = 2;
    cp = s[0] & 0x1f;
  } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
    len = 3;
    cp = s[0] & 0x0f;
  } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
    len = 4;
    cp = s[0] & 0x07;
  } else {
    return 0;
  }
  if (len > n)
    return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;
    cp = cp << 6 | (s[i] & 0x3f);
  }
  if ((len == 3 && cp < 0x800) || (cp >= 0xd800 && cp <= 0xdfff) ||
      (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
    return 0;
  return len;
}

/* A JSON string (RFC 8259 §7): UTF-8 text passes through, control
 * characters are escaped and a byte that is not UTF-8 becomes U+FFFD. */
static void print_json_string(FILE *f, const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  fputc('"', f);
  for (size_t i = 0; i < n;) {
    size_t len = utf8_len(u + i, n - i);
    if (u[i] == '"' || u[i] == '\\')
      fprintf(f, "\\%c", u[i]);
    else if (u[i] < 0x20 || u[i] == 0x7f)
      fprintf(f, "\\u%04x", u[i]);
    else if (len == 0)
      fputs("\\ufffd", f);
    else
      fwrite(u + i, 1, len, f);
    i += len ? len : 1;
  }
  fputc('"', f);
}

static void print_json_cstr(FILE *f, const char *s) {
  print_json_string(f, s, strlen(s));
}

static void print_hex(FILE *f, const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    fprintf(f, "%02x", p[i]);
}

/* A metadata value as gRPC shows it: "-bin" values carry bytes, shown in
 * base64 (SPEC HS-06); others are printable ASCII. */
static void print_md_value(FILE *f, bool json, const char *k, const uint8_t *v,
                           size_t vl) {
  if (tool_is_bin_key(k)) {
    if (json)
      fputc('"', f);
    tool_print_base64(f, v, vl);
    if (json)
      fputc('"', f);
  } else if (json) {
    print_json_string(f, (const char *)v, vl);
  } else {
    fwrite(v, 1, vl, f);
  }
}

/* Plain: a "|word| k: v" line per pair. JSON: an object with one member
 * per key, in first-seen order; a key sent more than once has an array of
 * its values (JSON objects must not repeat a key, RFC 8259 §4). */
static void print_md(FILE *f, bool json, const char *word,
                     const grit_metadata *md) {
  size_t n = grit_metadata_count(md);
  if (json)
    fputc('{', f);
  bool first = true;
  for (size_t i = 0; i < n; i++) {
    const char *k;
    const uint8_t *v;
    size_t vl;
    grit_metadata_get(md, i, &k, &v, &vl);
    if (!json) {
      fprintf(f, "%s %s: ", word, k);
      print_md_value(f, false, k, v, vl);
      fputc('\n', f);
      continue;
    }
    bool seen = false, again = false;
    for (size_t j = 0; j < n; j++) {
      const char *k2;
      const uint8_t *v2;
      size_t vl2;
      grit_metadata_get(md, j, &k2, &v2, &vl2);
      if (strcmp(k, k2) == 0) {
        seen = seen || j < i;
        again = again || j > i;
      }
    }
    if (seen)
      continue; /* printed with the first of its key */
    fprintf(f, "%s", first ? "" : ",");
    first = false;
    print_json_cstr(f, k);
    fputc(':', f);
    if (!again) {
      print_md_value(f, true, k, v, vl);
      continue;
    }
    fputc('[', f);
    for (size_t j = i, m = 0; j < n; j++) {
      const char *k2;
      const uint8_t *v2;
      size_t vl2;
      grit_metadata_get(md, j, &k2, &v2, &vl2);
      if (strcmp(k, k2) != 0)
        continue;
      fprintf(f, "%s", m++ ? "," : "");
      print_md_value(f, true, k2, v2, vl2);
    }
    fputc(']', f);
  }
  if (json)
    fputc('}', f);
}

/* The trailer grpc-status-details-bin (a google.rpc.Status), if any. */
static bool status_details(const grit_metadata *md, const uint8_t **v,
                           size_t *vl) {
  for (size_t i = 0; md && i < grit_metadata_count(md); i++) {
    const char *k;
    grit_metadata_get(md, i, &k, v, vl);
    if (strcmp(k, "grpc-status-details-bin") == 0)
      return true;
  }
  return false;
}

/* "call_id" on header and response lines when known: a streaming call
 * learns its id only at its end (grit_call_info). */
static void print_call_id(uint64_t call_id) {
  if (call_id)
    printf("\"call_id\":%" PRIu64 ",", call_id);
}

void out_headers(const call_out *o, uint64_t call_id,
                 const grit_metadata *headers) {
  if (o->json) {
    fputc('{', stdout);
    print_call_id(call_id);
    printf("\"headers\":");
    print_md(stdout, true, NULL, headers);
    printf("}\n");
  } else {
    print_md(stderr, false, "header", headers);
  }
}

void out_response(const call_out *o, uint64_t call_id, const uint8_t *p,
                  size_t len) {
  /* With message types: the proto3 JSON object, alone on its line or as
   * the line's "response" (hex if it does not decode). */
  char *obj = types_response_json(o->types, p, len, o->resolve_any);
  if (obj) {
    if (o->json) {
      fputc('{', stdout);
      print_call_id(call_id);
      printf("\"response\":%s}\n", obj);
    } else {
      printf("%s\n", obj);
    }
    free(obj);
    return;
  }
  if (o->json) {
    fputc('{', stdout);
    print_call_id(call_id);
    printf("\"response\":\"");
  } else {
    printf("response (%zu bytes): ", len);
  }
  print_hex(stdout, p, len);
  printf(o->json ? "\"}\n" : "\n");
}

/* ---- attempt timelines (--attempts) ---- */

static const char *kind_name(grit_attempt_kind k) {
  switch (k) {
  case GRIT_ATTEMPT_FIRST:
    return "first";
  case GRIT_ATTEMPT_RETRY:
    return "retry";
  case GRIT_ATTEMPT_HEDGE:
    return "hedge";
  case GRIT_ATTEMPT_TRANSPARENT:
    return "transparent";
  }
  return "?";
}

/* The reason in plain words, from the public GRIT_REASON_MAP. */
static const char *reason_text(grit_attempt_reason r) {
  switch (r) {
#define REASON_TEXT(name, val, text)                                           \
  case GRIT_REASON_##name:                                                     \
    return text;
    GRIT_REASON_MAP(REASON_TEXT)
#undef REASON_TEXT
  }
  return "?";
}

static uint64_t first_start(const att_rec *a, size_t n) {
  uint64_t t = n ? a[0].start_us : 0;
  for (size_t i = 1; i < n; i++)
    t = a[i].start_us < t ? a[i].start_us : t;
  return t;
}

static void print_json_timeline(FILE *f, const att_rec *a, size_t n) {
  uint64_t t0 = first_start(a, n);
  fprintf(f, ",\"timeline\":[");
  for (size_t i = 0; i < n; i++) {
    fprintf(f, "%s{\"attempt\":%u,\"kind\":\"%s\",\"peer\":", i ? "," : "",
            a[i].attempt, kind_name(a[i].kind));
    print_json_cstr(f, a[i].peer);
    fprintf(f,
            ",\"start_us\":%" PRIu64 ",\"duration_us\":%" PRIu64
            ",\"code\":%d,\"code_name\":\"%s\",\"message\":",
            a[i].start_us - t0, a[i].end_us - a[i].start_us, a[i].code,
            grit_status_code_name(a[i].code));
    print_json_cstr(f, a[i].message);
    fprintf(f, ",\"backoff_ms\":%" PRIu64 ",\"pushback\":%s,\"reason\":\"%s\"",
            a[i].backoff_ms, a[i].pushback ? "true" : "false",
            grit_attempt_reason_name(a[i].reason));
    fprintf(f, ",\"skipped\":");
    print_json_cstr(f, a[i].skipped);
    fprintf(f, ",\"picked_by\":");
    print_json_cstr(f, a[i].picked_by);
    fprintf(f, ",\"request_encoding\":");
    print_json_cstr(f, a[i].req_enc);
    fprintf(f, ",\"response_encoding\":");
    print_json_cstr(f, a[i].resp_enc);
    if (a[i].trace_id[0]) /* OB-02, gRFC A72 */
      fprintf(f,
              ",\"trace_id\":\"%s\",\"span_id\":\"%s\""
              ",\"previous_rpc_attempts\":%u,\"transparent_retry\":%s",
              a[i].trace_id, a[i].span_id, a[i].previous_rpc_attempts,
              a[i].transparent_retry ? "true" : "false");
    fprintf(f, "}");
  }
  fprintf(f, "]");
}

/* One line per attempt: number, kind, peer, start offset and duration,
 * status, the wait before it, and the reason when nothing followed. */
static void print_plain_timeline(FILE *f, const call_result *r) {
  const att_rec *a = r->att;
  size_t n = r->n_att;
  grit_attempt_reason why = att_call_reason(a, n, r->st->code);
  fprintf(f, "call %" PRIu64 ": %s after %zu attempt%s (%s: %s)%s%s\n",
          r->info->call_id, grit_status_code_name(r->st->code), n,
          n == 1 ? "" : "s", grit_attempt_reason_name(why), reason_text(why),
          n && a[0].trace_id[0] ? ", trace " : "", n ? a[0].trace_id : "");
  uint64_t t0 = first_start(a, n);
  for (size_t i = 0; i < n; i++) {
    char wait[48] = "";
    if (a[i].backoff_ms || a[i].pushback)
      snprintf(wait, sizeof(wait), "  after %s %" PRIu64 " ms",
               a[i].pushback                     ? "pushback"
               : a[i].kind == GRIT_ATTEMPT_HEDGE ? "hedgingDelay"
                                                 : "backoff",
               a[i].backoff_ms);
    fprintf(f, "  #%-2u %-11s %-21s +%7.1f ms %7.1f ms  %s%s%s%s", a[i].attempt,
            kind_name(a[i].kind), a[i].peer[0] ? a[i].peer : "-",
            (double)(a[i].start_us - t0) / 1000.0,
            (double)(a[i].end_us - a[i].start_us) / 1000.0,
            grit_status_code_name(a[i].code), a[i].message[0] ? " \"" : "",
            a[i].message, a[i].message[0] ? "\"" : "");
    fprintf(f, "%s", wait);
    fprintf(f, "  encoding %s -> %s", a[i].req_enc,
            a[i].resp_enc[0] ? a[i].resp_enc : "identity");
    if (a[i].reason != GRIT_REASON_NONE)
      fprintf(f, "  -> %s", grit_attempt_reason_name(a[i].reason));
    if (a[i].span_id[0])
      fprintf(f, "  span %s", a[i].span_id);
    fprintf(f, "\n");
    if (a[i].picked_by[0])
      fprintf(f, "      picked by %s\n", a[i].picked_by);
    if (a[i].skipped[0])
      fprintf(f, "      skipped: %s\n", a[i].skipped);
  }
}

/* ---- a call's end ---- */

static void print_json_result(const call_out *o, const call_result *r) {
  const grit_status *st = r->st;
  const grit_call_info *info = r->info;
  FILE *f = stdout;
  fprintf(f, "{\"call_id\":%" PRIu64 ",\"code\":%d,\"code_name\":\"%s\"",
          info->call_id, st->code, grit_status_code_name(st->code));
  fprintf(f, ",\"message\":");
  print_json_cstr(f, st->message ? st->message : "");
  fprintf(f, ",\"latency_us\":%" PRIu64 ",\"peer\":", r->latency_us);
  print_json_cstr(f, r->peer);
  fprintf(f,
          ",\"attempts\":%u,\"transparent_retries\":%u"
          ",\"hedges\":%u,\"backoff_ms\":%" PRIu64 ",\"reason\":\"%s\""
          ",\"responses\":%" PRIu64,
          info->attempts, info->transparent_retries, info->hedges,
          info->backoff_ms,
          grit_attempt_reason_name(att_call_reason(r->att, r->n_att, st->code)),
          r->responses);
  fprintf(f, ",\"request_encoding\":");
  print_json_cstr(f, info->request_encoding);
  fprintf(f, ",\"response_encoding\":");
  print_json_cstr(f, info->response_encoding);
  if (o->attempts)
    print_json_timeline(f, r->att, r->n_att);
  fprintf(f, ",\"trailers\":");
  print_md(f, true, NULL, st->trailers);
  const uint8_t *dv;
  size_t dl;
  if (status_details(st->trailers, &dv, &dl)) {
    char err[256];
    char *js = pbj_status_json(dv, dl, err, sizeof(err));
    fprintf(f, ",\"status_details\":");
    if (js)
      fputs(js, f);
    else
      print_json_cstr(f, err); /* why it does not decode */
    free(js);
  }
  fprintf(f, "}\n");
}

void out_result(const call_out *o, const call_result *r) {
  if (o->json) {
    print_json_result(o, r);
    return;
  }
  /* Plain: the status and everything about the call on stderr, so that
   * stdout holds only response data (grit call ... | jq). */
  const grit_status *st = r->st;
  const char *msg = st->message ? st->message : "";
  FILE *f = stderr;
  fprintf(f, "status: %s (%d)%s%s\n", grit_status_code_name(st->code), st->code,
          msg[0] ? " " : "", msg);
  fprintf(f, "peer: %s\nlatency: %" PRIu64 " us\n", r->peer[0] ? r->peer : "-",
          r->latency_us);
  print_md(f, false, "trailer", st->trailers);
  const uint8_t *dv;
  size_t dl;
  if (status_details(st->trailers, &dv, &dl)) {
    char err[256];
    char *text = pbj_status_text(dv, dl, err, sizeof(err));
    if (text)
      fputs(text, f);
    else
      fprintf(f, "status details: do not decode (%s)\n", err);
    free(text);
  }
  if (o->attempts)
    print_plain_timeline(f, r);
}

void out_timeline(const call_out *o, const call_result *r) {
  if (o->attempts && !o->json)
    print_plain_timeline(stderr, r);
}

/* ---- the summary of --count runs ---- */

void tally_add(call_tally *t, grit_status_code code, const char *peer) {
  if (code >= 0 && code < GRIT_STATUS_COUNT)
    t->codes[code]++;
  if (!peer[0])
    return;
  for (int i = 0; i < MAX_PEERS; i++) {
    if (t->peers[i][0] == '\0')
      snprintf(t->peers[i], sizeof(t->peers[i]), "%s", peer);
    if (strcmp(t->peers[i], peer) == 0) {
      t->peer_calls[i]++;
      return;
    }
  }
}

/* With --json the summary is one more JSON line, {"summary":{...}}. */
static void print_json_summary(const call_tally *t, double qps,
                               const tool_pcts *p) {
  printf("{\"summary\":{\"calls\":%" PRIu64 ",\"ok\":%" PRIu64 ",\"failed\":{",
         t->count, t->codes[0]);
  bool first = true;
  for (int c = 1; c < GRIT_STATUS_COUNT; c++) {
    if (t->codes[c]) {
      printf("%s\"%s\":%" PRIu64, first ? "" : ",",
             grit_status_code_name((grit_status_code)c), t->codes[c]);
      first = false;
    }
  }
  printf("},\"qps\":%.0f,\"p50_us\":%" PRIu64 ",\"p90_us\":%" PRIu64
         ",\"p99_us\":%" PRIu64 ",\"p999_us\":%" PRIu64 ",\"max_us\":%" PRIu64
         ",\"peers\":{",
         qps, p->p50, p->p90, p->p99, p->p999, p->max);
  for (int i = 0; i < MAX_PEERS && t->peers[i][0]; i++) {
    printf("%s", i ? "," : "");
    print_json_cstr(stdout, t->peers[i]);
    printf(":%" PRIu64, t->peer_calls[i]);
  }
  printf("}}}\n");
}

void out_summary(const call_out *o, const call_tally *t, uint64_t *lat_us,
                 uint64_t elapsed_us) {
  tool_pcts p = tool_percentiles(lat_us, (size_t)t->count);
  double qps = elapsed_us ? (double)t->count * 1e6 / (double)elapsed_us : 0;
  if (o->json) {
    print_json_summary(t, qps, &p);
    return;
  }
  printf("calls=%" PRIu64 " ok=%" PRIu64, t->count, t->codes[0]);
  printf(" failed={");
  bool first = true;
  for (int c = 1; c < GRIT_STATUS_COUNT; c++) {
    if (t->codes[c]) {
      printf("%s%s:%" PRIu64, first ? "" : ",",
             grit_status_code_name((grit_status_code)c), t->codes[c]);
      first = false;
    }
  }
  printf("} qps=%.0f p50_us=%" PRIu64 " p90_us=%" PRIu64 " p99_us=%" PRIu64
         " p999_us=%" PRIu64 " max_us=%" PRIu64 "\n",
         qps, p.p50, p.p90, p.p99, p.p999, p.max);
  printf("peers:");
  for (int i = 0; i < MAX_PEERS && t->peers[i][0]; i++)
    printf(" %s=%" PRIu64, t->peers[i], t->peer_calls[i]);
  printf("\n");
}

/* ---- --show-config (issue 20) ---- */

/* Unix ms as ISO 8601 UTC with milliseconds, or "never". */
static void format_wall_ms(uint64_t ms, char *buf, size_t len) {
  if (ms == 0) {
    snprintf(buf, len, "never");
    return;
  }
  time_t s = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&s, &tm);
  char day[32];
  strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(buf, len, "%s.%03uZ", day, (unsigned)(ms % 1000));
}

void out_service_config(const call_out *o,
                        const grit_service_config_info *info) {
  FILE *f = stdout;
  char applied[48], rejected[48];
  format_wall_ms(info->applied_at_ms, applied, sizeof(applied));
  format_wall_ms(info->rejected_at_ms, rejected, sizeof(rejected));
  const char *src = grit_config_source_name(info->source);
  if (o->json) {
    fprintf(f, "{\"service_config\":%s,\"source\":\"%s\",\"applied_at\":",
            info->json ? info->json : "null", src);
    print_json_cstr(f, applied);
    fprintf(f, ",\"hash\":\"%016" PRIx64 "\",\"last_rejection\":", info->hash);
    if (info->last_rejection)
      print_json_cstr(f, info->last_rejection);
    else
      fputs("null", f);
    fprintf(f, ",\"rejected_at\":");
    print_json_cstr(f, rejected);
    fprintf(f, "}\n");
    return;
  }
  if (info->json)
    fprintf(
        f, "service config: source %s, applied %s, hash %016" PRIx64 "\n  %s\n",
        src, applied, info->hash, info->json);
  else
    fprintf(f, "service config: none (the empty config)\n");
  if (info->last_rejection)
    fprintf(f, "last rejection: %s (at %s)\n", info->last_rejection, rejected);
  else
    fprintf(f, "last rejection: none\n");
}

/* ---- --show-xds (issue 27) ---- */

void out_xds_status(const call_out *o, const char *bootstrap) {
  grit_error_detail d = {0};
  char *text = NULL;
  grit_err rv = grit_xds_client_status(bootstrap, &d, &text);
  if (rv != GRIT_OK) {
    fprintf(stderr, "grit: --show-xds: %s%s%s%s%s\n", grit_strerror(rv),
            d.path[0] || d.reason[0] ? ": " : "", d.path,
            d.path[0] && d.reason[0] ? ": " : "", d.reason);
    return;
  }
  if (o->json) {
    json_t *j = json_loads(text, 0, NULL);
    char *line = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    printf("{\"xds_client\":%s}\n", line ? line : text);
    free(line);
    json_decref(j);
  } else {
    printf("xds client:\n%s\n", text);
  }
  grit_free(text);
}

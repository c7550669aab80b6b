/* grit call: where the request messages come from. Each --data value is
 * one message; "--data -" stands for the lines of stdin, one message per
 * line, read while the call runs (so a bidi stream can answer line by
 * line). For --data-json, stdin holds JSON values one after another with
 * any whitespace (or none) between them, not only one per line. Values
 * and lines go through one decoder (hex, @FILE or JSON). */
#include "call.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct req_item {
  bool is_stdin;
  uint8_t *data;
  size_t len;
} req_item;

struct req_source {
  req_decode_fn decode;
  req_item *items;
  size_t n, next;
  bool stdin_eof;
  bool json_frames; /* stdin holds JSON values, not lines */
  char *line;       /* bytes read from stdin, not yet a whole line */
  size_t line_len, line_cap;
  size_t line_end; /* bytes of the line read_line returned, its end too */
  size_t line_no;
  int wake[2]; /* req_source_cancel writes to wake[1] */
};

bool req_decode_hex_or_file(const char *text, uint8_t **out, size_t *len,
                            const char **why) {
  if (text[0] == '@') {
    char *b = tool_read_file(text + 1, len);
    *out = (uint8_t *)b;
    *why = "cannot read the file";
    return b != NULL;
  }
  *why = "not hex (want hex digits, blanks allowed, or @FILE)";
  return tool_parse_hex(text, out, len);
}

req_source *req_source_create(req_decode_fn decode) {
  req_source *s = calloc(1, sizeof(*s));
  if (!s)
    return NULL;
  s->decode = decode;
  s->json_frames = decode == req_decode_json;
  s->wake[0] = s->wake[1] = -1;
  return s;
}

void req_source_destroy(req_source *s) {
  if (!s)
    return;
  for (size_t i = 0; i < s->n; i++)
    free(s->items[i].data);
  free(s->items);
  free(s->line);
  if (s->wake[0] >= 0) {
    close(s->wake[0]);
    close(s->wake[1]);
  }
  free(s);
}

bool req_source_add(req_source *s, const char *arg) {
  req_item it = {.is_stdin = strcmp(arg, "-") == 0};
  const char *why = NULL;
  if (it.is_stdin) {
    if (s->wake[0] < 0 && pipe(s->wake) != 0) {
      fprintf(stderr, "grit: pipe: %s\n", strerror(errno));
      return false;
    }
  } else if (!s->decode(arg, &it.data, &it.len, &why)) {
    /* tool_read_file has said why already. */
    if (arg[0] != '@')
      fprintf(stderr, "grit: %s is %s: %s\n",
              s->decode == req_decode_json ? "--data-json" : "--data", why,
              arg);
    return false;
  }
  req_item *v = realloc(s->items, (s->n + 1) * sizeof(*v));
  if (!v) {
    free(it.data);
    fprintf(stderr, "grit: out of memory\n");
    return false;
  }
  s->items = v;
  s->items[s->n++] = it;
  return true;
}

size_t req_source_fixed_count(const req_source *s) {
  size_t k = 0;
  for (size_t i = 0; i < s->n; i++)
    k += !s->items[i].is_stdin;
  return k;
}

bool req_source_uses_stdin(const req_source *s) {
  return s->wake[0] >= 0;
}

void req_source_single(const req_source *s, const uint8_t **data, size_t *len) {
  *data = s->n ? s->items[0].data : NULL;
  *len = s->n ? s->items[0].len : 0;
}

void req_source_cancel(req_source *s) {
  if (s->wake[1] >= 0) {
    ssize_t w = write(s->wake[1], "x", 1);
    (void)w; /* a full pipe has been woken already */
  }
}

static bool is_json_ws(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The end of the JSON value at the start of |p| (|n| bytes, no leading
 * whitespace): just past its closing '}', ']' or '"', or for a bare
 * scalar the whitespace after it (or |n| at end of input). 0: not whole
 * yet. Only framing: the decoder judges the text. */
static size_t json_value_end(const char *p, size_t n, bool eof) {
  int depth = 0;
  bool in_str = false;
  for (size_t i = 0; i < n; i++) {
    char c = p[i];
    if (in_str) {
      if (c == '\\') {
        i++;
      } else if (c == '"') {
        in_str = false;
        if (depth == 0)
          return i + 1;
      }
      continue;
    }
    if (c == '"')
      in_str = true;
    else if (c == '{' || c == '[')
      depth++;
    else if (c == '}' || c == ']') {
      if (--depth <= 0)
        return i + 1;
    } else if (depth == 0 && i > 0 && (is_json_ws(c) || c == '{' || c == '['))
      return i;
  }
  return eof ? n : 0;
}

/* The next line of stdin, without its "\n" (or "\r\n"), NUL-terminated in
 * s->line; a last line without "\n" counts. With json_frames, the next
 * JSON value instead (whitespace before it dropped; not NUL-terminated).
 * 1: a line; 0: end of input; -1: cancelled or a read error (message
 * printed). */
static int read_line(req_source *s, size_t *len) {
  size_t scanned = 0;
  for (;;) {
    if (s->json_frames) {
      size_t ws = 0;
      while (ws < s->line_len && is_json_ws(s->line[ws]))
        ws++;
      if (ws) {
        memmove(s->line, s->line + ws, s->line_len - ws);
        s->line_len -= ws;
      }
      size_t end =
          s->line_len ? json_value_end(s->line, s->line_len, s->stdin_eof) : 0;
      if (end) {
        s->line_end = end;
        *len = end;
        return 1;
      }
    }
    /* s->line is NULL until the first read. */
    char *nl = !s->json_frames && s->line_len > scanned
                   ? memchr(s->line + scanned, '\n', s->line_len - scanned)
                   : NULL;
    if (!s->json_frames && (nl || (s->stdin_eof && s->line_len > 0))) {
      size_t n = nl ? (size_t)(nl - s->line) : s->line_len;
      s->line_end = nl ? n + 1 : n;
      *len = n && s->line[n - 1] == '\r' ? n - 1 : n;
      return 1;
    }
    if (s->stdin_eof)
      return 0;
    scanned = s->line_len;
    if (s->line_cap - s->line_len < 4096) {
      size_t cap = s->line_cap ? s->line_cap * 2 : 8192;
      char *b = realloc(s->line, cap);
      if (!b) {
        fprintf(stderr, "grit: out of memory reading stdin\n");
        return -1;
      }
      s->line = b;
      s->line_cap = cap;
    }
    /* Wait for input or for req_source_cancel: a call that ended must not
     * wait for a terminal. */
    struct pollfd p[2] = {{.fd = STDIN_FILENO, .events = POLLIN},
                          {.fd = s->wake[0], .events = POLLIN}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      fprintf(stderr, "grit: poll: %s\n", strerror(errno));
      return -1;
    }
    if (p[1].revents)
      return -1;
    ssize_t got = read(STDIN_FILENO, s->line + s->line_len,
                       s->line_cap - s->line_len - 1);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0) {
      fprintf(stderr, "grit: reading stdin: %s\n", strerror(errno));
      return -1;
    }
    if (got == 0)
      s->stdin_eof = true;
    s->line_len += (size_t)got;
  }
}

/* Drop the line read_line returned from s->line. */
static void consume_line(req_source *s) {
  memmove(s->line, s->line + s->line_end, s->line_len - s->line_end);
  s->line_len -= s->line_end;
}

req_next req_source_next(req_source *s, uint8_t **data, size_t *len) {
  while (s->next < s->n) {
    req_item *it = &s->items[s->next];
    if (!it->is_stdin) {
      s->next++;
      *data = malloc(it->len ? it->len : 1);
      if (!*data)
        return REQ_BAD;
      if (it->len)
        memcpy(*data, it->data, it->len);
      *len = it->len;
      return REQ_MESSAGE;
    }
    size_t n;
    int r = read_line(s, &n);
    if (r < 0)
      return REQ_CANCELLED;
    if (r == 0) {
      s->next++; /* a second "-" then reads nothing */
      continue;
    }
    s->line_no++;
    /* A JSON value may be followed at once by the next one: decode a
     * copy. */
    char *text = strndup(s->line, n);
    if (!text) {
      fprintf(stderr, "grit: out of memory reading stdin\n");
      return REQ_BAD;
    }
    const char *why = NULL;
    bool ok = s->decode(text, data, len, &why);
    if (!ok && text[0] != '@')
      fprintf(stderr, "grit: stdin %s %zu is %s: %s\n",
              s->json_frames ? "message" : "line", s->line_no, why, text);
    free(text);
    consume_line(s);
    return ok ? REQ_MESSAGE : REQ_BAD;
  }
  return REQ_END;
}

bool req_source_collect(req_source *s) {
  req_item *v = NULL;
  size_t n = 0;
  uint8_t *data;
  size_t len;
  req_next r;
  while ((r = req_source_next(s, &data, &len)) == REQ_MESSAGE) {
    req_item *nv = realloc(v, (n + 1) * sizeof(*nv));
    if (!nv) {
      free(data);
      fprintf(stderr, "grit: out of memory\n");
      r = REQ_BAD;
      break;
    }
    v = nv;
    v[n++] = (req_item){.data = data, .len = len};
  }
  if (r != REQ_END) {
    for (size_t i = 0; i < n; i++)
      free(v[i].data);
    free(v);
    return false;
  }
  for (size_t i = 0; i < s->n; i++)
    free(s->items[i].data);
  free(s->items);
  s->items = v;
  s->n = n;
  s->next = 0;
  if (s->wake[0] >= 0) { /* stdin is read: no longer a source */
    close(s->wake[0]);
    close(s->wake[1]);
    s->wake[0] = s->wake[1] = -1;
  }
  return true;
}

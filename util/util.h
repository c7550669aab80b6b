/*
 * util: the internal library every grit module uses. Allocation wrappers
 * (all memory goes through the hook set by grit_set_allocator), refcounted
 * slices, intrusive lists, the monotonic clock, a seedable PRNG, tracing and
 * error details. It depends on libc only and knows nothing of gRPC.
 * Layout: floor 0 of docs/layout.md.
 */
#ifndef GRIT_UTIL_H
#define GRIT_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grit/grit.h"

/* Allocation through the process allocator (util/mem.c). Sizes of zero are
 * legal and may return NULL. grit_free(NULL) is a no-op. */
void *grit_malloc(size_t size);
void *grit_calloc(size_t n, size_t size);
void *grit_realloc(void *p, size_t size);
char *grit_strdup(const char *s);
char *grit_strndup(const char *s, size_t n);
void *grit_memdup(const void *p, size_t n);
/* The nghttp2-shaped allocator struct in force, for handing to dependencies
 * that accept one (nghttp2_session_client_new3). */
const grit_allocator *grit_allocator_get(void);

/* Fill a caller-allocated result struct that begins with a size_t |size|
 * (docs/abi.md) from grit's own |src| of |src_size| bytes: the bytes after
 * |size| that fit in the caller's size are copied, any tail grit does not
 * know is zeroed, |size| is kept. GRIT_ERR_INVALID_ARG (nothing written)
 * when the caller's size is smaller than the size field: not set. */
grit_err grit_sized_fill(void *dst, const void *src, size_t src_size);
/* The size a caller-allocated sized struct declares (its first size_t). */
size_t grit_sized_size(const void *dst);

/* Copy the string |src| into |dst| of |cap| > 0 bytes, truncating, always
 * NUL-terminated; returns the length copied. */
size_t grit_str_copy(char *dst, size_t cap, const char *src);

/* A refcounted immutable byte buffer. grit_slice_new returns one reference
 * with writable data; once shared it must not be written. The header and
 * the bytes are one allocation. Refcounts are atomic: a slice made on a user
 * thread may be released on the loop thread. */
typedef struct grit_slice {
  uint32_t refs;
  size_t len;
  uint8_t *data;
} grit_slice;

grit_slice *grit_slice_new(size_t len);
grit_slice *grit_slice_from_copy(const void *p, size_t len);
/* A reference to the one shared empty slice (len 0; no allocation, never
 * fails, never written); released with grit_slice_unref like any. */
grit_slice *grit_slice_empty(void);
grit_slice *grit_slice_ref(grit_slice *s);
void grit_slice_unref(grit_slice *s);

/* Intrusive circular doubly linked list, libuv QUEUE style. A list head and
 * an element are the same type; an empty head points at itself. */
typedef struct grit_list {
  struct grit_list *next, *prev;
} grit_list;

#define GRIT_CONTAINER_OF(ptr, type, field)                                    \
  ((type *)((char *)(ptr)-offsetof(type, field)))
#define GRIT_LIST_FOREACH(it, head)                                            \
  for ((it) = (head)->next; (it) != (head); (it) = (it)->next)

/* Inline: a unary call makes about 40 of these (issue 24), each a few
 * stores, where a call cost as much as the work. */
static inline void grit_list_init(grit_list *head) {
  head->next = head;
  head->prev = head;
}

static inline bool grit_list_empty(const grit_list *head) {
  return head->next == head;
}

static inline void grit_list_insert_tail(grit_list *head, grit_list *elem) {
  elem->prev = head->prev;
  elem->next = head;
  head->prev->next = elem;
  head->prev = elem;
}

static inline void grit_list_insert_head(grit_list *head, grit_list *elem) {
  grit_list_insert_tail(head->next, elem); /* before the first */
}

/* Leaves elem as an empty list. */
static inline void grit_list_remove(grit_list *elem) {
  elem->prev->next = elem->next;
  elem->next->prev = elem->prev;
  grit_list_init(elem);
}

/* NULL when empty. */
static inline grit_list *grit_list_pop_head(grit_list *head) {
  if (grit_list_empty(head))
    return NULL;
  grit_list *e = head->next;
  grit_list_remove(e);
  return e;
}

/* Growable byte buffer (value type in caller storage). */
typedef struct grit_buf {
  uint8_t *data;
  size_t len, cap;
} grit_buf;

void grit_buf_init(grit_buf *b);
void grit_buf_free(grit_buf *b);
grit_err grit_buf_append(grit_buf *b, const void *p, size_t n);
grit_err grit_buf_appendf(grit_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
grit_err grit_buf_reserve(grit_buf *b, size_t extra);

/* Monotonic clock. Pure modules never call these; they take now_ms. */
uint64_t grit_clock_now_ms(void);
uint64_t grit_clock_now_us(void);
/* Saturating time arithmetic: huge timeouts and durations near the
 * service config maximum (SPEC SC-06) stay huge instead of wrapping. */
uint64_t grit_add_sat_u64(uint64_t a, uint64_t b);
uint64_t grit_ns_to_ms_ceil(int64_t ns); /* 0 for ns <= 0 */
int64_t grit_ms_to_ns_sat(uint64_t ms);

/* Seedable PRNG (xoshiro256**). Value type; grit_rng_seed with the same
 * seed replays the same sequence. */
typedef struct grit_rng {
  uint64_t s[4];
} grit_rng;

void grit_rng_seed(grit_rng *r, uint64_t seed);
void grit_rng_seed_os(grit_rng *r); /* from getrandom(); clock on failure */
uint64_t grit_rng_next(grit_rng *r);
double grit_rng_uniform(grit_rng *r, double lo, double hi); /* [lo, hi) */
uint32_t grit_rng_below(grit_rng *r, uint32_t n);           /* [0, n) */

/* Tracing to stderr (SPEC MX-04). GRIT_TRACE=retry,hedging,transport,lb,
 * dns,config,channel or all; GRIT_VERBOSITY=debug|info|error|none (default
 * info when GRIT_TRACE is set). An unknown category is reported once on
 * stderr. The environment is read once. */
typedef enum grit_trace_flag {
  GRIT_TRACE_RETRY = 1u << 0,
  GRIT_TRACE_HEDGING = 1u << 1,
  GRIT_TRACE_TRANSPORT = 1u << 2,
  GRIT_TRACE_LB = 1u << 3,
  GRIT_TRACE_DNS = 1u << 4,
  GRIT_TRACE_CONFIG = 1u << 5,
  GRIT_TRACE_CHANNEL = 1u << 6,
} grit_trace_flag;

typedef enum grit_trace_level {
  GRIT_LEVEL_DEBUG = 0,
  GRIT_LEVEL_INFO = 1,
  GRIT_LEVEL_ERROR = 2,
  /* An operator's line (SPEC DNS-10): printed whatever GRIT_TRACE says,
   * unless GRIT_VERBOSITY=none. Use for events rare by construction
   * (once per change), never per call or per lookup. */
  GRIT_LEVEL_NOTICE = 3,
} grit_trace_level;

bool grit_trace_on(grit_trace_flag flag, grit_trace_level level);
/* |ts| (CLOCK_REALTIME) as ISO 8601 UTC with milliseconds,
 * "2026-11-25T23:59:01.123Z", the trace lines' timestamp. Returns its
 * length, or 0 (|buf| "") when |len| < GRIT_TRACE_TIMESTAMP_LEN or the time
 * is out of range. */
#define GRIT_TRACE_TIMESTAMP_LEN 32
struct timespec;
size_t grit_trace_timestamp(const struct timespec *ts, char *buf, size_t len);
void grit_trace_log(grit_trace_flag flag, grit_trace_level level,
                    const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The categories on (GRIT_TRACE), with GRIT_TRACE_GATE_READY once the
 * environment was read: GRIT_TRACE reads it first, so a category that is
 * off costs one load and no call on the call path (issue 24). */
extern unsigned grit_trace_gate;
#define GRIT_TRACE_GATE_READY (1u << 31)

#define GRIT_TRACE(flag, level, ...)                                           \
  do {                                                                         \
    unsigned grit_tg_ = __atomic_load_n(&grit_trace_gate, __ATOMIC_RELAXED);   \
    if ((!(grit_tg_ & GRIT_TRACE_GATE_READY) ||                                \
         (level) == GRIT_LEVEL_NOTICE || (grit_tg_ & (unsigned)(flag))) &&     \
        grit_trace_on((flag), (level)))                                        \
      grit_trace_log((flag), (level), __VA_ARGS__);                            \
  } while (0)

/* Error detail helpers: set the code, the JSON path and a formatted reason
 * into a caller's grit_error_detail (NULL is allowed and ignored). */
void grit_error_set(grit_error_detail *d, grit_err code, const char *path,
                    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Metadata internals (util/metadata.c implements the public grit_metadata
 * functions too). add_unchecked skips key/value validation, for received
 * headers; keys are stored as given. */
grit_err grit_metadata_add_unchecked(grit_metadata *md, const char *key,
                                     size_t key_len, const void *value,
                                     size_t len);
grit_err grit_metadata_copy(const grit_metadata *src, grit_metadata **out);
/* A shared empty list, for handing out where no metadata came: borrowed
 * by every user; never add to it or destroy it. */
grit_metadata *grit_metadata_empty(void);
/* Whether |key| (|len| bytes) is a valid key an application may set. */
bool grit_metadata_key_ok(const char *key, size_t len, bool allow_reserved);
/* Total bytes of keys and values, as HPACK would count them (+32 each). */
size_t grit_metadata_wire_size(const grit_metadata *md);

/* Fill a status (caller storage) with a copy of |message| and an empty or
 * copied trailer list. Returns GRIT_OK, or GRIT_ERR_NOMEM with the status
 * still valid: code set, a static message saying so if the copy failed,
 * the shared empty list if the trailers could not be copied (both known
 * to grit_status_free). */
grit_err grit_status_set(grit_status *st, grit_status_code code,
                         const char *message, const grit_metadata *trailers);

/* Assertion that stays on in release builds for invariants whose violation
 * would corrupt memory. */
#define GRIT_ASSERT(cond)                                                      \
  do {                                                                         \
    if (!(cond))                                                               \
      grit_assert_fail(#cond, __FILE__, __LINE__);                             \
  } while (0)
_Noreturn void grit_assert_fail(const char *expr, const char *file, int line);

#endif

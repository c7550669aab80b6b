/* Shared by the pbjson fuzz targets: the pool of kitchen.proto
 * (test/pbjson/), built once from a descriptor set compiled in. */
#ifndef GRIT_FUZZ_PBJSON_H
#define GRIT_FUZZ_PBJSON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pbjson/pbjson.h"

extern const unsigned char kitchen_protoset[];
extern const size_t kitchen_protoset_len;

#define KITCHEN "grit.test.Kitchen"

static inline pbj_pool *kitchen_pool(void) {
  static pbj_pool *pool;
  if (!pool) {
    char err[256];
    pool = pbj_pool_create();
    if (!pool || !pbj_pool_add_set(pool, kitchen_protoset, kitchen_protoset_len,
                                   err, sizeof(err))) {
      fprintf(stderr, "kitchen pool: %s\n", err);
      abort();
    }
  }
  return pool;
}

/* JSON text -> wire -> JSON must give the same text back: the printer's
 * output is a fixed point of the codec. */
static inline void check_fixed_point(const char *json) {
  pbj_pool *pool = kitchen_pool();
  char err[512];
  uint8_t *wire;
  size_t n;
  if (!pbj_from_json(pool, KITCHEN, json, strlen(json), &wire, &n, err,
                     sizeof(err)))
    return; /* e.g. fields printed under their number */
  char *again = pbj_to_json(pool, KITCHEN, wire, n, err, sizeof(err));
  if (!again || strcmp(again, json) != 0) {
    fprintf(stderr, "not a fixed point:\n%s\n%s\n", json, again ? again : err);
    abort();
  }
  free(again);
  free(wire);
}

#endif

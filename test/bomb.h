/*
 * A gzip bomb for tests (SPEC CP-03): |mib| MiB of zeros in about 1 KiB
 * per MiB. Deflate cannot do better than about 1032:1, so 1 GiB takes
 * about 1 MiB. Built without compressing the whole: one 1 MiB block
 * after a full flush is self-contained and byte-aligned, so it is
 * repeated, and the gzip trailer (CRC-32, size) is computed by
 * crc32_combine. Returns a malloc'd buffer and its length, NULL on error.
 */
#ifndef GRIT_TEST_BOMB_H
#define GRIT_TEST_BOMB_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static inline uint8_t *bomb_gzip(unsigned mib, size_t *out_len) {
  enum { CHUNK = 1 << 20 };
  uint8_t *zeros = calloc(1, CHUNK);
  uint8_t *first = malloc(CHUNK), *block = malloc(CHUNK);
  uint8_t *res = NULL;
  z_stream z;
  memset(&z, 0, sizeof(z));
  if (!zeros || !first || !block || mib < 2 ||
      deflateInit2(&z, 9, Z_DEFLATED, 31, 9, Z_DEFAULT_STRATEGY) != Z_OK)
    goto done;
  z.next_in = zeros; /* header + the first MiB */
  z.avail_in = CHUNK;
  z.next_out = first;
  z.avail_out = CHUNK;
  deflate(&z, Z_FULL_FLUSH);
  size_t first_len = CHUNK - z.avail_out;
  z.next_in = zeros; /* one more MiB: the block that repeats */
  z.avail_in = CHUNK;
  z.next_out = block;
  z.avail_out = CHUNK;
  deflate(&z, Z_FULL_FLUSH);
  size_t block_len = CHUNK - z.avail_out;
  deflateEnd(&z);
  /* An empty final stored block, then CRC-32 and ISIZE. */
  static const uint8_t last[] = {0x03, 0x00};
  size_t total = first_len + block_len * (mib - 1) + sizeof(last) + 8;
  res = malloc(total);
  if (!res)
    goto done;
  size_t k = 0;
  memcpy(res, first, first_len);
  k = first_len;
  for (unsigned i = 1; i < mib; i++, k += block_len)
    memcpy(res + k, block, block_len);
  memcpy(res + k, last, sizeof(last));
  k += sizeof(last);
  uLong one = crc32(0, zeros, CHUNK), crc = one;
  for (unsigned i = 1; i < mib; i++)
    crc = crc32_combine(crc, one, CHUNK);
  uint32_t size = (uint32_t)((uint64_t)mib << 20);
  for (int i = 0; i < 4; i++)
    res[k++] = (uint8_t)(crc >> (8 * i));
  for (int i = 0; i < 4; i++)
    res[k++] = (uint8_t)(size >> (8 * i));
  *out_len = k;
done:
  free(zeros);
  free(first);
  free(block);
  return res;
}

#endif

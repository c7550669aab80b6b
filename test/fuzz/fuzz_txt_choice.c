/* libFuzzer target: DNS TXT extraction and choice (SPEC DNS-02..DNS-04),
 * and the `grit config check --dns` report. */
#include "service_config/service_config.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* Split the input at 0x01 bytes into TXT strings; 0x02 starts a record. */
  grit_txt_chunk chunks[64];
  size_t n = 0, start = 0;
  bool rec = true;
  for (size_t i = 0; i <= size && n < 64; i++) {
    if (i == size || data[i] == 1 || data[i] == 2) {
      chunks[n++] = (grit_txt_chunk){
          .data = data + start, .len = i - start, .record_start = rec};
      rec = i < size && data[i] == 2;
      start = i + 1;
    }
  }
  char *value = NULL;
  size_t len = 0;
  grit_err rv = grit_svccfg_txt_extract(chunks, n, &value, &len);
  GRIT_ASSERT(rv == GRIT_OK || rv == GRIT_ERR_NOT_FOUND ||
              rv == GRIT_ERR_NOMEM);
  /* Without a grpc_config= record, choose from the raw input instead. */
  const char *txt = value ? value : (const char *)data;
  size_t txt_len = value ? len : size;

  grit_rng rng;
  grit_rng_seed(&rng, size);
  char *chosen = NULL;
  size_t chosen_len = 0;
  grit_error_detail d;
  rv = grit_svccfg_choose_txt(txt, txt_len, "host", &rng, &chosen, &chosen_len,
                              &d);
  if (rv == GRIT_OK) {
    GRIT_ASSERT(chosen && strlen(chosen) == chosen_len);
    grit_svccfg *cfg = grit_svccfg_parse(chosen, chosen_len, NULL, NULL);
    grit_svccfg_unref(cfg);
  } else {
    GRIT_ASSERT(chosen == NULL);
    GRIT_ASSERT(rv == GRIT_ERR_NOT_FOUND || rv == GRIT_ERR_INVALID_CONFIG ||
                rv == GRIT_ERR_NOMEM);
  }
  grit_free(chosen);

  char *report = NULL;
  rv = grit_service_config_check_txt(txt, txt_len, NULL, &report);
  GRIT_ASSERT(rv == GRIT_ERR_NOMEM || report != NULL);
  grit_free(report);
  report = NULL;
  rv = grit_service_config_check_txt_for(txt, txt_len, "web1", "Go", &report);
  GRIT_ASSERT(rv == GRIT_ERR_NOMEM || report != NULL);
  grit_free(report);
  grit_free(value);
  return 0;
}

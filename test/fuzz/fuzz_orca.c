/* libFuzzer target: the hand-written xds.data.orca.v3.OrcaLoadReport
 * decoder (SPEC LP-01; gRFC A51), with and without the maps, on arbitrary
 * bytes; the public view of what decodes; and the OrcaLoadReportRequest
 * encoder on an interval taken from the input. */
#include "lb/lb.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  grit_orca_report with, without;
  grit_err a = grit_orca_decode(data, size, true, &with);
  grit_err b = grit_orca_decode(data, size, false, &without);
  /* The maps never change whether the message is valid. */
  GRIT_ASSERT(a == GRIT_ERR_NOMEM || a == b);
  if (a == GRIT_OK) {
    GRIT_ASSERT(memcmp(&with.cpu_utilization, &without.cpu_utilization,
                       sizeof(double)) == 0);
    GRIT_ASSERT(with.rps == without.rps);
    GRIT_ASSERT(without.metrics == NULL && without.n_named_metrics == 0);
    grit_load_report pub;
    grit_orca_to_public(&with, "peer", false, &pub);
    size_t total = pub.n_request_cost + pub.n_utilization + pub.n_named_metrics;
    for (size_t i = 0; i < pub.n_named_metrics; i++)
      GRIT_ASSERT(pub.named_metrics[i].name != NULL);
    GRIT_ASSERT(total == 0 || with.metrics != NULL);
    grit_orca_report_free(&with);
  } else {
    GRIT_ASSERT(with.metrics == NULL && with.names == NULL);
  }
  uint64_t ms = 0;
  for (size_t i = 0; i < size && i < 8; i++)
    ms = ms << 8 | data[i];
  grit_slice *s = grit_orca_encode_request(ms % (1ULL << 40));
  if (s) {
    uint32_t body = (uint32_t)s->data[1] << 24 | (uint32_t)s->data[2] << 16 |
                    (uint32_t)s->data[3] << 8 | s->data[4];
    GRIT_ASSERT(body == s->len - 5);
    GRIT_ASSERT(s->data[5] == 0x0a); /* report_interval */
    grit_slice_unref(s);
  }
  return 0;
}

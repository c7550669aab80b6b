/* The public side of the metric labels and sources (SPEC OP-01): thin
 * wrappers over the registry, any thread. */
#include "observe/observe.h"

grit_err grit_metrics_set_max_targets(size_t n) {
  grit_obs_set_max_targets(n);
  return GRIT_OK;
}

grit_err grit_metrics_set_target_filter(grit_metrics_target_filter_cb cb,
                                        void *user_data) {
  grit_obs_set_target_filter(cb, user_data);
  return GRIT_OK;
}

grit_err grit_metrics_register_method(const char *method) {
  return grit_obs_method_register(method);
}

grit_err grit_metrics_add_source(grit_metrics_source_cb cb, void *user_data) {
  return grit_obs_add_source(cb, user_data);
}

grit_err grit_metrics_remove_source(grit_metrics_source_cb cb,
                                    void *user_data) {
  return grit_obs_remove_source(cb, user_data);
}

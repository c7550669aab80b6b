/*
 * The declarative script: an ordered list of steps, each good for |repeat|
 * requests on its path (or any). A request takes the first step with uses
 * left that matches its path; when none does, it gets the default action.
 * Test threads edit the script while the server thread consumes it, so all
 * of it sits under srv->mu.
 */
#include "h2s_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Takes ownership of |step|'s strings. Caller holds srv->mu. */
static void script_append_owned(h2s_server *srv, h2s_step *step) {
  if (srv->n_slots == srv->cap_slots) {
    srv->cap_slots = srv->cap_slots ? srv->cap_slots * 2 : 16;
    srv->slots = h2s_xrealloc(srv->slots, srv->cap_slots * sizeof(h2s_slot));
  }
  h2s_slot *slot = &srv->slots[srv->n_slots++];
  slot->step = *step;
  slot->left = step->repeat ? step->repeat : 1;
}

int h2s_server_script_add(h2s_server *srv, const h2s_step *steps, size_t n) {
  uv_mutex_lock(&srv->mu);
  for (size_t i = 0; i < n; i++) {
    h2s_step copy = steps[i];
    copy.path = h2s_xstrdup(steps[i].path);
    h2s_action_copy(&copy.action, &steps[i].action);
    script_append_owned(srv, &copy);
  }
  uv_mutex_unlock(&srv->mu);
  return 0;
}

/* Split |text| into lines at '\n' and ';'; parse all before adding any. */
int h2s_server_script_add_text(h2s_server *srv, const char *text) {
  size_t cap = 1;
  for (const char *p = text; *p; p++)
    cap += *p == '\n' || *p == ';';
  h2s_step *steps = h2s_xcalloc(cap, sizeof(*steps));
  size_t n = 0;
  int rv = 0;
  const char *p = text;
  while (*p && rv == 0) {
    size_t len = strcspn(p, "\n;");
    char *line = h2s_xmalloc(len + 1);
    memcpy(line, p, len);
    line[len] = '\0';
    char *hash = strchr(line, '#');
    if (hash)
      *hash = '\0';
    if (line[strspn(line, " \t\r,")] != '\0') {
      char err[128];
      rv = h2s_step_parse(line, &steps[n], err, sizeof(err));
      if (rv == 0)
        n++;
      else if (!srv->cfg.quiet)
        fprintf(stderr, "h2server: script line \"%s\": %s\n", line, err);
    }
    free(line);
    p += len;
    if (*p)
      p++;
  }
  uv_mutex_lock(&srv->mu);
  for (size_t i = 0; i < n; i++) {
    if (rv == 0)
      script_append_owned(srv, &steps[i]);
    else
      h2s_step_free(&steps[i]);
  }
  uv_mutex_unlock(&srv->mu);
  free(steps);
  return rv;
}

void h2s_script_free(h2s_server *srv) {
  for (size_t i = 0; i < srv->n_slots; i++)
    h2s_step_free(&srv->slots[i].step);
  free(srv->slots);
  srv->slots = NULL;
  srv->n_slots = srv->cap_slots = 0;
}

void h2s_server_script_clear(h2s_server *srv) {
  uv_mutex_lock(&srv->mu);
  h2s_script_free(srv);
  uv_mutex_unlock(&srv->mu);
}

size_t h2s_server_script_left(h2s_server *srv) {
  size_t n = 0;
  uv_mutex_lock(&srv->mu);
  for (size_t i = 0; i < srv->n_slots; i++)
    n += srv->slots[i].left > 0;
  uv_mutex_unlock(&srv->mu);
  return n;
}

void h2s_server_set_default(h2s_server *srv, const h2s_action *act) {
  h2s_action copy;
  h2s_action_copy(&copy, act ? act : &(h2s_action){0});
  uv_mutex_lock(&srv->mu);
  h2s_action_free(&srv->dflt);
  srv->dflt = copy;
  uv_mutex_unlock(&srv->mu);
}

bool h2s_script_take(h2s_server *srv, const char *path, h2s_action *out) {
  bool found = false;
  uv_mutex_lock(&srv->mu);
  for (size_t i = 0; i < srv->n_slots && !found; i++) {
    h2s_slot *slot = &srv->slots[i];
    if (slot->left == 0)
      continue;
    if (slot->step.path && (!path || strcmp(slot->step.path, path) != 0))
      continue;
    if (slot->left != H2S_FOREVER)
      slot->left--;
    h2s_action_copy(out, &slot->step.action);
    found = true;
  }
  if (!found)
    h2s_action_copy(out, &srv->dflt);
  uv_mutex_unlock(&srv->mu);
  return found;
}

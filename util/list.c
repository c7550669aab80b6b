/* Intrusive circular doubly linked list. */
#include "util/util.h"

void grit_list_init(grit_list *head) {
  head->next = head;
  head->prev = head;
}

bool grit_list_empty(const grit_list *head) {
  return head->next == head;
}

void grit_list_insert_tail(grit_list *head, grit_list *elem) {
  elem->prev = head->prev;
  elem->next = head;
  head->prev->next = elem;
  head->prev = elem;
}

void grit_list_insert_head(grit_list *head, grit_list *elem) {
  grit_list_insert_tail(head->next, elem); /* before the first */
}

void grit_list_remove(grit_list *elem) {
  elem->prev->next = elem->next;
  elem->next->prev = elem->prev;
  grit_list_init(elem);
}

grit_list *grit_list_pop_head(grit_list *head) {
  if (grit_list_empty(head))
    return NULL;
  grit_list *e = head->next;
  grit_list_remove(e);
  return e;
}

/* Shared by the lb module files only: address-list reconciliation. */
#ifndef GRIT_LB_INT_H
#define GRIT_LB_INT_H

#include "lb/lb.h"

/* A list of subchannels indexed like the address list they came from. */
typedef struct grit_lb_sclist {
  grit_subchannel **scs;
  size_t n;
} grit_lb_sclist;

/* Build |out| for |addrs|, moving subchannels of |old| whose address is
 * still present (so their connections survive) and creating the rest.
 * Subchannels left in |old| are destroyed. */
grit_err grit_lb_sclist_reconcile(grit_lb_sclist *old, const grit_addr *addrs,
                                  size_t n, const grit_subchannel_args *a,
                                  grit_subchannel_state_cb cb, void *ud,
                                  grit_lb_sclist *out);
void grit_lb_sclist_free(grit_lb_sclist *l);
/* Index of |sc| in |l|, or l->n. */
size_t grit_lb_sclist_index(const grit_lb_sclist *l, const grit_subchannel *sc);

#endif

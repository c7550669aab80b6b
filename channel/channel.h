/*
 * channel: the public API's implementation. Channel arguments, config
 * selection, the LB policy in use, calls, their attempts and deadlines,
 * and what they report. It sits above every library module: it runs on a
 * runtime/ loop, resolves names with resolver/ and includes the other
 * modules' headers; nothing in the library includes it. Everything it
 * offers is behind include/grit/grit.h.
 * Layout: floor 4 of docs/layout.md.
 */
#ifndef GRIT_CHANNEL_H
#define GRIT_CHANNEL_H

#include "resolver/resolver.h"
#include "runtime/runtime.h"

#endif

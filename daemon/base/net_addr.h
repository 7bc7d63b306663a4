/*
 * net_addr.h - an IP address as users write it in --listen and the config
 * file: dotted IPv4, or IPv6 with or without brackets ("[::1]", "::1").
 * Only numeric addresses: a host name would make where we listen depend on
 * DNS, and whether it is loopback on what the resolver says today.
 */
#ifndef HEAPPROF_NET_ADDR_H
#define HEAPPROF_NET_ADDR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

/* Fills `ss` with `host` and `port`; returns AF_INET or AF_INET6, or
 * -EINVAL if `host` is not a numeric IP address. */
int net_addr_parse(const char *host, uint16_t port, struct sockaddr_storage *ss);

/* Whether the parsed address is a loopback one (127/8 or ::1). */
bool net_addr_is_loopback(const struct sockaddr_storage *ss);

#endif

/*
 * net_addr.c - numeric IPv4 and IPv6 addresses, brackets taken off (see
 * net_addr.h).
 */
#include "net_addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

int net_addr_parse(const char *host, uint16_t port, struct sockaddr_storage *ss)
{
    struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    char h[INET6_ADDRSTRLEN + 2];
    memset(ss, 0, sizeof(*ss));
    if (!host || strlen(host) >= sizeof(h))
        return -EINVAL;
    snprintf(h, sizeof(h), "%s", host);
    size_t len = strlen(h);
    if (len >= 2 && h[0] == '[' && h[len - 1] == ']') { /* [::1] */
        memmove(h, h + 1, len - 2);
        h[len - 2] = '\0';
    }
    if (inet_pton(AF_INET, h, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons(port);
        return AF_INET;
    }
    if (inet_pton(AF_INET6, h, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(port);
        return AF_INET6;
    }
    return -EINVAL;
}

bool net_addr_is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
    if (ss->ss_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)ss)->sin6_addr);
    return false;
}

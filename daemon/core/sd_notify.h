/*
 * sd_notify.h - tells systemd (Type=notify) that heapprofd is ready, or
 * reloading, through the datagram socket in $NOTIFY_SOCKET; written here
 * rather than linking libsystemd for one message.
 */
#ifndef HEAPPROF_SD_NOTIFY_H
#define HEAPPROF_SD_NOTIFY_H

/* Sends `state` (e.g. "READY=1"); 0 if sent or if not run by systemd, else -errno. */
int sd_notify_send(const char *state);

#endif

/*
 * handshake.c - the stdio line protocol of the test workloads (see
 * handshake.h), written with system calls only so it never calls malloc.
 */
#include "handshake.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Writes all of buf to fd, retrying short writes; exits on error. */
static void write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            _exit(3);
        buf += n;
        len -= (size_t)n;
    }
}

void handshake_ready(void)
{
    char line[32] = "ready ";
    char digits[16];
    size_t nd = 0;
    unsigned long pid = (unsigned long)getpid();

    do {
        digits[nd++] = (char)('0' + pid % 10);
        pid /= 10;
    } while (pid > 0);
    size_t len = strlen(line);
    while (nd > 0)
        line[len++] = digits[--nd];
    line[len++] = '\n';
    write_all(STDOUT_FILENO, line, len);
}

int handshake_wait_line(void)
{
    for (;;) {
        char c;
        ssize_t n = read(STDIN_FILENO, &c, 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 0;
        if (c == '\n')
            return 1;
    }
}

void handshake_done(void)
{
    write_all(STDOUT_FILENO, "done\n", 5);
}

void handshake_die(const char *message)
{
    write_all(STDERR_FILENO, message, strlen(message));
    write_all(STDERR_FILENO, "\n", 1);
    exit(2);
}

void handshake_touch(void *p, size_t size)
{
    if (p == NULL)
        handshake_die("workload: an allocation failed");
    ((volatile char *)p)[0] = 1;
    ((volatile char *)p)[size - 1] = 2;
}

/*
 * token.c - the bearer token of a TCP listener with --token-file: read
 * from a file only its owner may read, compared in constant time (see
 * access.h). Whoever holds it is trusted with every process.
 */
#include "access.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int access_token_matches(const char *authorization, const char *token)
{
    static const char scheme[] = "Bearer ";
    if (!authorization || strncmp(authorization, scheme, sizeof(scheme) - 1) != 0)
        return 0;
    const char *given = authorization + sizeof(scheme) - 1;
    size_t n = strlen(token), m = strlen(given);
    /* Compare every byte whatever the lengths, so timing tells nothing. */
    unsigned diff = (unsigned)(n ^ m);
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)token[i] ^ (unsigned char)(i < m ? given[i] : 0);
    return diff == 0;
}

int access_read_token(const char *path, char *out, size_t len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        int e = errno;
        snprintf(err, errlen, "token file %s: %s", path, strerror(e));
        return -e;
    }
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && (st.st_mode & 0077)) {
        fclose(f);
        snprintf(err, errlen, "token file %s is readable by others: chmod 600 it", path);
        return -EPERM;
    }
    char line[ACCESS_MAX_TOKEN + 2];
    int ok = fgets(line, sizeof(line), f) != NULL;
    fclose(f);
    line[ok ? strcspn(line, "\r\n") : 0] = '\0';
    if (!ok || strlen(line) < 16 || strlen(line) >= len || strlen(line) > ACCESS_MAX_TOKEN) {
        snprintf(err, errlen, "token file %s: want one line of 16 to %d characters", path,
                 ACCESS_MAX_TOKEN);
        return -EINVAL;
    }
    snprintf(out, len, "%s", line);
    return 0;
}

/*
 * pprof_gzip.c - gzip (RFC 1952) of a buffer with zlib: profiles are served
 * gzipped, as Go's net/http/pprof does and as `go tool pprof` expects.
 *
 * The output goes through a fixed chunk on the stack, so this needs nothing
 * from pprof_buf beyond appending; zlib's 32-bit counts are fed in slices.
 */
#include <errno.h>
#include <limits.h>
#include <zlib.h>

#include "pprof.h"

/* Bytes of compressed output handed to the buffer at a time. */
#define GZIP_CHUNK 16384
/* windowBits for deflateInit2: the largest window (15), plus 16 for a gzip wrapper. */
#define GZIP_WINDOW_BITS (15 + 16)
/* zlib's default memLevel. */
#define GZIP_MEM_LEVEL 8

int pprof_gzip(const uint8_t *data, size_t len, struct pprof_buf *out)
{
    if ((!data && len) || !out)
        return -EINVAL;
    z_stream zs = {0};
    if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, GZIP_WINDOW_BITS, GZIP_MEM_LEVEL,
                     Z_DEFAULT_STRATEGY) != Z_OK)
        return -ENOMEM;
    size_t start_len = out->len;
    size_t left = len;
    int err = 0, zerr;
    zs.next_in = (Bytef *)data; /* zlib's API is not const-correct; it only reads input */
    do {
        if (zs.avail_in == 0 && left) {
            zs.avail_in = left > UINT_MAX ? UINT_MAX : (uInt)left;
            left -= zs.avail_in;
        }
        uint8_t chunk[GZIP_CHUNK];
        zs.next_out = chunk;
        zs.avail_out = sizeof(chunk);
        zerr = deflate(&zs, left || zs.avail_in > 0 ? Z_NO_FLUSH : Z_FINISH);
        if (zerr == Z_STREAM_ERROR) {
            err = -EIO;
            break;
        }
        err = pprof_buf_append(out, chunk, sizeof(chunk) - zs.avail_out);
    } while (!err && zerr != Z_STREAM_END);
    deflateEnd(&zs);
    if (err)
        out->len = start_len;
    return err;
}

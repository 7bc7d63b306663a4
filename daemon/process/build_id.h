/*
 * build_id.h - the GNU build ID (NT_GNU_BUILD_ID) as every part of the
 * daemon keeps it: at most BUILD_ID_MAX_BYTES bytes, shown as lowercase hex
 * (the form pprof, debuginfod and /usr/lib/debug/.build-id use).
 */
#ifndef HEAPPROF_BUILD_ID_H
#define HEAPPROF_BUILD_ID_H

#include <stddef.h>
#include <stdint.h>

/* The longest build ID we keep: GNU ld makes 20-byte SHA-1 IDs, other
 * tools 16 (md5, uuid) or 32 (sha256), and ld --build-id=0xHEX any length;
 * 64 bytes hold them all with room. A longer one is treated as none. */
#define BUILD_ID_MAX_BYTES 64

/* Room for the hex form of the longest build ID and its NUL. */
#define BUILD_ID_HEX_SIZE (2 * BUILD_ID_MAX_BYTES + 1)

/* Writes the `len` bytes of `id` (len <= BUILD_ID_MAX_BYTES) as lowercase
 * hex and a NUL into `hex`, which holds BUILD_ID_HEX_SIZE bytes. */
void build_id_hex(const uint8_t *id, size_t len, char hex[BUILD_ID_HEX_SIZE]);

#endif

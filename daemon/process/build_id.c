/*
 * build_id.c - build IDs in hex (see build_id.h).
 */
#include "build_id.h"

void build_id_hex(const uint8_t *id, size_t len, char hex[BUILD_ID_HEX_SIZE])
{
    static const char digits[] = "0123456789abcdef";
    if (len > BUILD_ID_MAX_BYTES)
        len = BUILD_ID_MAX_BYTES;
    for (size_t i = 0; i < len; i++) {
        hex[2 * i] = digits[id[i] >> 4];
        hex[2 * i + 1] = digits[id[i] & 0xf];
    }
    hex[2 * len] = '\0';
}

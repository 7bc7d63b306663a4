/*
 * web_assets.h - the files of heapprofd's web page (web/ and the viewer
 * vendored in third_party/), built into the binary so that the page works
 * offline and from any install without a file to find at run time.
 */
#ifndef HEAPPROF_WEB_ASSETS_H
#define HEAPPROF_WEB_ASSETS_H

#include <stddef.h>

/* One file served as it is. */
struct web_asset {
    const char *path;         /* the URL path it is served at */
    const char *content_type;
    const unsigned char *data; /* static: lives as long as the program */
    const unsigned char *end;  /* one past its last byte */
};

/* The asset served at URL path `path`, or NULL. */
const struct web_asset *web_asset_find(const char *path);

#endif

/*
 * web_assets.c - the web page's files, embedded at build time with the
 * assembler's .incbin (see web_assets.h). CMake passes the source folder in
 * HEAPPROF_SOURCE_DIR and lists the files as this object's dependencies, so
 * editing a page rebuilds it. Each file gets a NUL after it, which is not
 * served: only the length counts.
 *
 * Why not a generated C array: .incbin takes the file as it is, needs no
 * generator, and compiles a 280 KiB file in no time.
 */
#include "web_assets.h"

#include <string.h>

#ifndef HEAPPROF_SOURCE_DIR
#error "HEAPPROF_SOURCE_DIR must name the source tree (daemon/http/CMakeLists.txt sets it)"
#endif

/* Embeds `file` (relative to the source tree) as the bytes from `name` to `name`_end. */
#define EMBED(name, file)                                                                          \
    __asm__(".pushsection .rodata\n"                                                               \
            ".balign 16\n" #name ":\n"                                                             \
            ".incbin \"" HEAPPROF_SOURCE_DIR "/" file "\"\n" #name "_end:\n"                       \
            ".byte 0\n"                                                                            \
            ".popsection\n");                                                                      \
    extern const unsigned char name[] __attribute__((visibility("hidden")));                       \
    extern const unsigned char name##_end[] __attribute__((visibility("hidden")))

EMBED(asset_index_html, "web/index.html");
EMBED(asset_process_html, "web/process.html");
EMBED(asset_css, "web/heapprofd.css");
EMBED(asset_format_js, "web/format.js");
EMBED(asset_chart_js, "web/chart.js");
EMBED(asset_index_js, "web/index.js");
EMBED(asset_process_js, "web/process.js");
EMBED(asset_d3_js, "third_party/d3/d3.min.js");
EMBED(asset_flamegraph_js, "third_party/d3-flame-graph/d3-flamegraph.min.js");

#define HTML "text/html; charset=utf-8"
#define JS "text/javascript; charset=utf-8"
#define CSS "text/css; charset=utf-8"
#define ASSET(url, type, name) {url, type, name, name##_end}

/* Every file, by the URL path it is served at. */
static const struct web_asset ASSETS[] = {
    ASSET("/", HTML, asset_index_html),
    ASSET("/process", HTML, asset_process_html),
    ASSET("/static/heapprofd.css", CSS, asset_css),
    ASSET("/static/format.js", JS, asset_format_js),
    ASSET("/static/chart.js", JS, asset_chart_js),
    ASSET("/static/index.js", JS, asset_index_js),
    ASSET("/static/process.js", JS, asset_process_js),
    ASSET("/static/d3.min.js", JS, asset_d3_js),
    ASSET("/static/d3-flamegraph.min.js", JS, asset_flamegraph_js),
};

const struct web_asset *web_asset_find(const char *path)
{
    for (size_t i = 0; i < sizeof(ASSETS) / sizeof(ASSETS[0]); i++)
        if (strcmp(path, ASSETS[i].path) == 0)
            return &ASSETS[i];
    return NULL;
}

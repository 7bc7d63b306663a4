/*
 * sampler_image.h - the in-process sampler as the daemon sees it: the ELF
 * object built from sampler/ and embedded in heapprofd, its loadable
 * segments and the addresses of its symbols (relative to where it is
 * mapped).
 */
#ifndef HEAPPROF_SAMPLER_IMAGE_H
#define HEAPPROF_SAMPLER_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#define SAMPLER_MAX_SEGMENTS 8
#define SAMPLER_MAX_SYMBOLS 128

struct sampler_segment {
    uint64_t vaddr, memsz, filesz, offset;
    int prot; /* PROT_READ|PROT_WRITE|PROT_EXEC */
};

/* The parsed sampler; points into the embedded bytes, owns nothing. */
struct sampler_image {
    const uint8_t *elf;
    size_t elf_len;
    struct sampler_segment seg[SAMPLER_MAX_SEGMENTS];
    size_t nseg;
    uint64_t span; /* bytes to reserve: the segments' end, page aligned */
    struct {
        char name[40];
        uint64_t vaddr, size;
    } sym[SAMPLER_MAX_SYMBOLS];
    size_t nsym;
    uint8_t build_id[32]; /* its GNU build ID: an earlier daemon's sampler is adopted only
                           * when its note holds these bytes */
    size_t build_id_len;
    uint64_t build_id_vaddr; /* where those bytes are, relative to the base */
};

/* The sampler embedded in this binary, parsed once; NULL with a reason in
 * `err` if it is malformed (a build error). Thread-safe. */
const struct sampler_image *sampler_image_get(char *err, size_t errlen);

/* The address of symbol `name` relative to the sampler's base; 0 if absent. */
uint64_t sampler_image_symbol(const struct sampler_image *img, const char *name);

/* The file offset of the code at `vaddr` (for uprobes on the mapped file). */
int sampler_image_file_offset(const struct sampler_image *img, uint64_t vaddr, uint64_t *off);

/* The file offsets of the three report functions (hp_sampler.h), where
 * their probes go; -ENOENT if one is missing (a build error). */
int sampler_image_report_offsets(const struct sampler_image *img, uint64_t *alloc,
                                 uint64_t *free_, uint64_t *alloc_opt);

#endif

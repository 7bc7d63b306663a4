/*
 * sampler_image.c - parses the embedded sampler object (see
 * sampler_image.h) with libelf, once.
 */
#include "sampler_image.h"

#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "hp_sampler.h"

extern const unsigned char hp_sampler_elf[];
extern const size_t hp_sampler_elf_len;

static struct sampler_image image;
static char image_err[256];
static pthread_once_t image_once = PTHREAD_ONCE_INIT;

#define PAGE 4096ULL

static int read_segments(Elf *elf, struct sampler_image *img)
{
    size_t n;
    if (elf_getphdrnum(elf, &n) != 0)
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
            continue;
        if (img->nseg == SAMPLER_MAX_SEGMENTS || ph.p_offset + ph.p_filesz > img->elf_len)
            return -EINVAL;
        struct sampler_segment *s = &img->seg[img->nseg++];
        s->vaddr = ph.p_vaddr;
        s->memsz = ph.p_memsz;
        s->filesz = ph.p_filesz;
        s->offset = ph.p_offset;
        s->prot = ((ph.p_flags & PF_R) ? PROT_READ : 0) | ((ph.p_flags & PF_W) ? PROT_WRITE : 0) |
                  ((ph.p_flags & PF_X) ? PROT_EXEC : 0);
        uint64_t end = (ph.p_vaddr + ph.p_memsz + PAGE - 1) & ~(PAGE - 1);
        if (end > img->span)
            img->span = end;
    }
    return img->nseg ? 0 : -EINVAL;
}

/* Keeps the sampler's own symbols (hp_*) from .symtab; refuses an object
 * that would need dynamic relocations, which nobody would apply. */
static int read_symbols(Elf *elf, struct sampler_image *img)
{
    Elf_Scn *scn = NULL;
    int have_symtab = 0;
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh))
            return -EINVAL;
        if ((sh.sh_type == SHT_RELA || sh.sh_type == SHT_REL) && sh.sh_size)
            return -ENOEXEC;
        if (sh.sh_type != SHT_SYMTAB)
            continue;
        have_symtab = 1;
        Elf_Data *d = elf_getdata(scn, NULL);
        size_t count = sh.sh_entsize ? sh.sh_size / sh.sh_entsize : 0;
        for (size_t i = 0; d && i < count; i++) {
            GElf_Sym sym;
            if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF)
                continue;
            const char *name = elf_strptr(elf, sh.sh_link, sym.st_name);
            if (!name || strncmp(name, "hp_", 3) != 0 || strlen(name) >= sizeof(img->sym[0].name))
                continue;
            if (img->nsym == SAMPLER_MAX_SYMBOLS)
                return -E2BIG;
            snprintf(img->sym[img->nsym].name, sizeof(img->sym[0].name), "%s", name);
            img->sym[img->nsym].vaddr = sym.st_value;
            img->sym[img->nsym].size = sym.st_size;
            img->nsym++;
        }
    }
    return have_symtab ? 0 : -ENOENT;
}

/* The NT_GNU_BUILD_ID note's bytes and where they are mapped. */
static int read_build_id(Elf *elf, struct sampler_image *img)
{
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE || !(sh.sh_flags & SHF_ALLOC))
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        GElf_Nhdr nh;
        size_t off = 0, name_off, desc_off, next;
        while (d && (next = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
            if (nh.n_type == NT_GNU_BUILD_ID && nh.n_descsz <= sizeof(img->build_id) &&
                nh.n_descsz > 0) {
                memcpy(img->build_id, (const uint8_t *)d->d_buf + desc_off, nh.n_descsz);
                img->build_id_len = nh.n_descsz;
                img->build_id_vaddr = sh.sh_addr + desc_off;
                return 0;
            }
            off = next;
        }
    }
    return -ENOENT;
}

static void parse_once(void)
{
    elf_version(EV_CURRENT);
    image.elf = hp_sampler_elf;
    image.elf_len = hp_sampler_elf_len;
    Elf *elf = elf_memory((char *)hp_sampler_elf, hp_sampler_elf_len);
    int e = elf ? read_segments(elf, &image) : -EINVAL;
    if (e == 0)
        e = read_symbols(elf, &image);
    if (e == 0)
        e = read_build_id(elf, &image);
    if (e)
        snprintf(image_err, sizeof(image_err), "the embedded sampler object is malformed: %s",
                 strerror(-e));
    if (elf)
        elf_end(elf);
}

const struct sampler_image *sampler_image_get(char *err, size_t errlen)
{
    pthread_once(&image_once, parse_once);
    if (image_err[0]) {
        snprintf(err, errlen, "%s", image_err);
        return NULL;
    }
    return &image;
}

uint64_t sampler_image_symbol(const struct sampler_image *img, const char *name)
{
    for (size_t i = 0; i < img->nsym; i++)
        if (strcmp(img->sym[i].name, name) == 0)
            return img->sym[i].vaddr;
    return 0;
}

int sampler_image_file_offset(const struct sampler_image *img, uint64_t vaddr, uint64_t *off)
{
    for (size_t i = 0; i < img->nseg; i++) {
        const struct sampler_segment *s = &img->seg[i];
        if (vaddr >= s->vaddr && vaddr < s->vaddr + s->filesz) {
            *off = s->offset + (vaddr - s->vaddr);
            return 0;
        }
    }
    return -ENOENT;
}

int sampler_image_report_offsets(const struct sampler_image *img, uint64_t *alloc,
                                 uint64_t *free_, uint64_t *alloc_opt)
{
    const char *const names[3] = {HP_REPORT_ALLOC_SYM, HP_REPORT_FREE_SYM,
                                  HP_REPORT_ALLOC_OPT_SYM};
    uint64_t *const out[3] = {alloc, free_, alloc_opt};
    for (int i = 0; i < 3; i++)
        if (sampler_image_file_offset(img, sampler_image_symbol(img, names[i]), out[i]) != 0)
            return -ENOENT;
    return 0;
}

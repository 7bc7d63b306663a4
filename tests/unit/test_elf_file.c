/*
 * test_elf_file.c - elf_file checked against readelf's view of the same files.
 *
 * The expected values are computed at test time (readelf, gcc, /proc/self),
 * so the tests hold on any Debian build of libc, not just the one seen today.
 */
#include "check.h"
#include "elf_file.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"

/* A PT_LOAD as readelf prints it. */
struct load {
    uint64_t offset, vaddr, filesz;
};

/* Runs a shell command and keeps the first `cap - 1` bytes of its output. */
static int run(const char *cmd, char *buf, size_t cap)
{
    FILE *f = popen(cmd, "r");
    size_t len = 0, r;

    if (!f)
        return -errno;
    while (len + 1 < cap && (r = fread(buf + len, 1, cap - 1 - len, f)) > 0)
        len += r;
    buf[len] = '\0';
    return pclose(f) == 0 ? 0 : -EIO;
}

/* The build ID `readelf -n` prints for `path`, or "" if none. */
static void readelf_build_id(const char *path, char *hex, size_t cap)
{
    char cmd[PATH_MAX + 64], out[8192];
    snprintf(cmd, sizeof(cmd), "readelf -n '%s'", path);
    hex[0] = '\0';
    if (run(cmd, out, sizeof(out)) != 0)
        return;
    const char *p = strstr(out, "Build ID: ");
    if (p) {
        p += strlen("Build ID: ");
        snprintf(hex, cap, "%.*s", (int)strspn(p, "0123456789abcdef"), p);
    }
}

/* Value and size of the symbol `name` (exactly as readelf spells it, with version) from `flags`. */
static int readelf_symbol(const char *path, const char *flags, const char *name, uint64_t *vaddr,
                          uint64_t *size)
{
    char cmd[PATH_MAX + 64], line[1024];
    int found = -ENOENT;

    snprintf(cmd, sizeof(cmd), "readelf -W %s '%s'", flags, path);
    FILE *f = popen(cmd, "r");
    if (!f)
        return -errno;
    while (fgets(line, sizeof(line), f)) {
        char val[32], sz[32], type[16], bind[16], vis[16], ndx[16], sym[512];
        if (sscanf(line, "%*s %31s %31s %15s %15s %15s %15s %511s", val, sz, type, bind, vis, ndx,
                   sym) == 7 &&
            strcmp(sym, name) == 0 && strcmp(ndx, "UND") != 0) {
            *vaddr = strtoull(val, NULL, 16);
            *size = strtoull(sz, NULL, 0); /* readelf prints big sizes as 0x... */
            found = 0;
            break;
        }
    }
    pclose(f);
    return found;
}

/* The PT_LOADs `readelf -lW` prints for `path`; returns how many. */
static size_t readelf_loads(const char *path, struct load *v, size_t cap)
{
    char cmd[PATH_MAX + 64], line[512];
    size_t n = 0;

    snprintf(cmd, sizeof(cmd), "readelf -lW '%s'", path);
    FILE *f = popen(cmd, "r");
    if (!f)
        return 0;
    while (n < cap && fgets(line, sizeof(line), f)) {
        char kind[16];
        uint64_t paddr, memsz;
        if (sscanf(line, " %15s %" SCNx64 " %" SCNx64 " %" SCNx64 " %" SCNx64 " %" SCNx64, kind,
                   &v[n].offset, &v[n].vaddr, &paddr, &v[n].filesz, &memsz) == 6 &&
            strcmp(kind, "LOAD") == 0)
            n++;
    }
    pclose(f);
    return n;
}

/* A function of this binary for it to find by address; kept out of line on purpose. */
__attribute__((noinline)) int a_function_of_the_test_binary(int x)
{
    return x * 3 + 1;
}

static void libc_build_id_matches_readelf(void)
{
    struct elf_file *ef = NULL;
    char want[128], got[128];

    readelf_build_id(LIBC, want, sizeof(want));
    CHECK(strlen(want) == 40);
    CHECK_INT_EQ(elf_file_open(LIBC, &ef), 0);
    if (!ef)
        return;
    CHECK_INT_EQ(elf_file_build_id(ef, got, sizeof(got)), 0);
    CHECK_STR_EQ(got, want);
    CHECK_INT_EQ(elf_file_build_id(ef, got, 40), -ENOSPC);
    CHECK_INT_EQ(elf_file_type(ef), 3 /* ET_DYN */);
    CHECK(elf_file_is_dynamic(ef));
    elf_file_close(ef);
}

static void malloc_is_where_readelf_puts_it(void)
{
    struct elf_file *ef = NULL;
    struct elf_symbol s = {0};
    struct load loads[16];
    uint64_t want_vaddr = 0, want_size = 0, off = 0, back = 0;

    CHECK_INT_EQ(readelf_symbol(LIBC, "--dyn-syms", "malloc@@GLIBC_2.2.5", &want_vaddr, &want_size),
                 0);
    size_t nloads = readelf_loads(LIBC, loads, 16);
    CHECK(nloads > 0);
    CHECK_INT_EQ(elf_file_open(LIBC, &ef), 0);
    if (!ef)
        return;
    CHECK_INT_EQ(elf_file_find_function(ef, "malloc", true, &s), 0);
    CHECK_STR_EQ(s.name, "malloc");
    CHECK_U64_EQ(s.vaddr, want_vaddr);
    CHECK_U64_EQ(s.size, want_size);

    uint64_t want_off = UINT64_MAX;
    for (size_t i = 0; i < nloads; i++)
        if (want_vaddr >= loads[i].vaddr && want_vaddr < loads[i].vaddr + loads[i].filesz)
            want_off = loads[i].offset + (want_vaddr - loads[i].vaddr);
    CHECK_INT_EQ(elf_file_vaddr_to_offset(ef, s.vaddr, &off), 0);
    CHECK_U64_EQ(off, want_off);
    CHECK_U64_EQ(s.file_offset, want_off);
    CHECK_INT_EQ(elf_file_offset_to_vaddr(ef, off, &back), 0);
    CHECK_U64_EQ(back, s.vaddr);

    CHECK(elf_file_exports_function(ef, "malloc"));
    CHECK(elf_file_exports_function(ef, "free"));
    CHECK(!elf_file_exports_function(ef, "no_such_function_here"));
    CHECK_INT_EQ(elf_file_find_function(ef, "no_such_function_here", false, &s), -ENOENT);
    elf_file_close(ef);
}

static void a_hidden_version_loses_to_the_default_one(void)
{
    struct elf_file *ef = NULL;
    struct elf_symbol s = {0};
    uint64_t want = 0, old = 0, size = 0;

    /* libc keeps memcpy@GLIBC_2.2.5 (hidden, memmove semantics) beside memcpy@@GLIBC_2.14. */
    CHECK_INT_EQ(readelf_symbol(LIBC, "--dyn-syms", "memcpy@@GLIBC_2.14", &want, &size), 0);
    CHECK_INT_EQ(readelf_symbol(LIBC, "--dyn-syms", "memcpy@GLIBC_2.2.5", &old, &size), 0);
    CHECK(want != old);
    CHECK_INT_EQ(elf_file_open(LIBC, &ef), 0);
    if (!ef)
        return;
    CHECK_INT_EQ(elf_file_find_function(ef, "memcpy", true, &s), 0);
    CHECK_U64_EQ(s.vaddr, want);
    CHECK_INT_EQ(elf_file_find_function(ef, "memcpy", false, &s), 0);
    CHECK_U64_EQ(s.vaddr, want);
    elf_file_close(ef);
}

static void an_address_inside_malloc_names_malloc_or_an_alias(void)
{
    struct elf_file *ef = NULL;
    struct elf_symbol m = {0}, s = {0};

    CHECK_INT_EQ(elf_file_open(LIBC, &ef), 0);
    if (!ef)
        return;
    CHECK_INT_EQ(elf_file_find_function(ef, "malloc", true, &m), 0);
    CHECK_INT_EQ(elf_file_symbolize(ef, m.vaddr + 10, &s), 0);
    CHECK(s.name && (strcmp(s.name, "malloc") == 0 || strcmp(s.name, "__libc_malloc") == 0));
    CHECK_U64_EQ(s.vaddr, m.vaddr);
    CHECK_INT_EQ(elf_file_symbolize(ef, 0, &s), -ENOENT);
    elf_file_close(ef);
}

static void elf_file_read_gives_the_bytes_at_a_vaddr(void)
{
    struct elf_file *ef = NULL;
    struct elf_symbol m = {0};
    unsigned char got[16], want[16];

    CHECK_INT_EQ(elf_file_open(LIBC, &ef), 0);
    if (!ef)
        return;
    CHECK_INT_EQ(elf_file_find_function(ef, "malloc", true, &m), 0);
    CHECK_INT_EQ(elf_file_read(ef, m.vaddr, got, sizeof(got)), 0);
    FILE *f = fopen(LIBC, "rb");
    CHECK(f != NULL);
    if (f) {
        CHECK_INT_EQ(fseek(f, (long)m.file_offset, SEEK_SET), 0);
        CHECK_INT_EQ(fread(want, 1, sizeof(want), f), sizeof(want));
        CHECK(memcmp(got, want, sizeof(got)) == 0);
        fclose(f);
    }
    CHECK_INT_EQ(elf_file_read(ef, UINT64_MAX - 4, got, sizeof(got)), -ENOENT);
    elf_file_close(ef);
}

/* Finds the mapping of this process holding `addr`: its path and the file offset of addr. */
static int own_mapping(uint64_t addr, char *path, size_t cap, uint64_t *file_off)
{
    char line[PATH_MAX + 128];
    int found = -ENOENT;
    FILE *f = fopen("/proc/self/maps", "r");

    if (!f)
        return -errno;
    while (fgets(line, sizeof(line), f)) {
        uint64_t start, end, off;
        int pos = 0;
        if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %*s %" SCNx64 " %*s %*s %n", &start, &end, &off,
                   &pos) < 3 ||
            pos == 0 || addr < start || addr >= end)
            continue;
        line[strcspn(line, "\n")] = '\0';
        snprintf(path, cap, "%s", line + pos);
        *file_off = addr - start + off;
        found = 0;
        break;
    }
    fclose(f);
    return found;
}

static void the_test_binary_names_its_own_function(void)
{
    char path[PATH_MAX], exe[PATH_MAX];
    uint64_t addr = (uint64_t)(uintptr_t)&a_function_of_the_test_binary, off = 0, vaddr = 0;
    struct elf_file *ef = NULL;
    struct elf_symbol s = {0};

    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    CHECK(n > 0);
    exe[n > 0 ? n : 0] = '\0';
    CHECK_INT_EQ(own_mapping(addr, path, sizeof(path), &off), 0);
    CHECK_STR_EQ(path, exe);
    CHECK_INT_EQ(elf_file_open(exe, &ef), 0);
    if (!ef)
        return;
    CHECK_INT_EQ(elf_file_offset_to_vaddr(ef, off, &vaddr), 0);
    CHECK_INT_EQ(elf_file_symbolize(ef, vaddr, &s), 0);
    CHECK_STR_EQ(s.name, "a_function_of_the_test_binary");
    CHECK_U64_EQ(s.vaddr, vaddr);
    CHECK_INT_EQ(elf_file_symbolize(ef, vaddr + 1, &s), 0);
    CHECK_STR_EQ(s.name, "a_function_of_the_test_binary");
    CHECK_U64_EQ(s.file_offset, off);

    /* Every PT_LOAD maps vaddr to offset as readelf says, and back. */
    struct load loads[16];
    size_t nloads = readelf_loads(exe, loads, 16);
    CHECK(nloads >= 2);
    for (size_t i = 0; i < nloads; i++) {
        uint64_t mid = loads[i].vaddr + loads[i].filesz / 2, o = 0, v = 0;
        CHECK_INT_EQ(elf_file_vaddr_to_offset(ef, mid, &o), 0);
        CHECK_U64_EQ(o, loads[i].offset + loads[i].filesz / 2);
        CHECK_INT_EQ(elf_file_offset_to_vaddr(ef, o, &v), 0);
        CHECK_U64_EQ(v, mid);
    }
    elf_file_close(ef);
}

static void dt_needed_of_the_test_binary_has_libelf_and_libc(void)
{
    char exe[PATH_MAX];
    struct elf_file *ef = NULL;
    bool libelf = false, libc = false;

    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    exe[n > 0 ? n : 0] = '\0';
    CHECK_INT_EQ(elf_file_open(exe, &ef), 0);
    if (!ef)
        return;
    for (size_t i = 0; i < elf_file_needed_count(ef); i++) {
        libelf |= strcmp(elf_file_needed(ef, i), "libelf.so.1") == 0;
        libc |= strcmp(elf_file_needed(ef, i), "libc.so.6") == 0;
    }
    CHECK(libelf);
    CHECK(libc);
    CHECK(elf_file_needed(ef, elf_file_needed_count(ef)) == NULL);
    elf_file_close(ef);
}

static void a_text_file_is_not_elf_and_a_missing_one_is_enoent(void)
{
    struct elf_file *ef = NULL;

    CHECK_INT_EQ(elf_file_open("/etc/passwd", &ef), -ENOEXEC);
    CHECK_INT_EQ(elf_file_open("/nonexistent/heapprof/nothing.so", &ef), -ENOENT);
    CHECK(ef == NULL);
    elf_file_close(NULL);
}

/* Writes `text` to `dir`/`name`. */
static int write_file(const char *dir, const char *name, const char *text)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        return -errno;
    fputs(text, f);
    return fclose(f) == 0 ? 0 : -EIO;
}

static void files_built_here_show_versions_and_missing_build_ids(void)
{
    char dir[] = "/tmp/heapprof_elf_XXXXXX", cmd[1024], path[PATH_MAX], hex[128];
    struct elf_file *ef = NULL;
    struct elf_symbol s = {0};
    uint64_t def = 0, old = 0, size = 0;

    CHECK(mkdtemp(dir) != NULL);
    CHECK_INT_EQ(write_file(dir, "main.c", "int main(void) { return 0; }\n"), 0);
    CHECK_INT_EQ(write_file(dir, "v.c",
                            "__asm__(\".symver foo_old, foo@V1\");\n"
                            "__asm__(\".symver foo_new, foo@@V2\");\n"
                            "int foo_old(void) { return 1; }\n"
                            "int foo_new(void) { return 2; }\n"),
                 0);
    CHECK_INT_EQ(write_file(dir, "v.map",
                            "V1 { global: foo; local: *; };\n"
                            "V2 { global: foo; } V1;\n"),
                 0);
    snprintf(cmd, sizeof(cmd),
             "cd %s && gcc -Wl,--build-id=none -o nobuildid main.c && "
             "gcc -shared -fPIC -Wl,--version-script=v.map -o libv.so v.c",
             dir);
    CHECK_INT_EQ(system(cmd), 0);

    snprintf(path, sizeof(path), "%s/nobuildid", dir);
    CHECK_INT_EQ(elf_file_open(path, &ef), 0);
    if (ef)
        CHECK_INT_EQ(elf_file_build_id(ef, hex, sizeof(hex)), -ENOENT);
    elf_file_close(ef);
    ef = NULL;

    snprintf(path, sizeof(path), "%s/libv.so", dir);
    CHECK_INT_EQ(readelf_symbol(path, "--dyn-syms", "foo@@V2", &def, &size), 0);
    CHECK_INT_EQ(readelf_symbol(path, "--dyn-syms", "foo@V1", &old, &size), 0);
    CHECK(def != old);
    CHECK_INT_EQ(elf_file_open(path, &ef), 0);
    if (ef) {
        CHECK_INT_EQ(elf_file_find_function(ef, "foo", true, &s), 0);
        CHECK_U64_EQ(s.vaddr, def);
        /* .symtab spells the versions into the names: "foo@V1", "foo@@V2". */
        CHECK_INT_EQ(elf_file_find_function(ef, "foo", false, &s), 0);
        CHECK_U64_EQ(s.vaddr, def);
        CHECK_STR_EQ(s.name, "foo");
        /* The global alias names the address, not the local foo_old. */
        CHECK_INT_EQ(elf_file_symbolize(ef, old, &s), 0);
        CHECK_STR_EQ(s.name, "foo");
        CHECK_INT_EQ(elf_file_find_function(ef, "foo_old", false, &s), 0);
        CHECK_U64_EQ(s.vaddr, old);
        CHECK_INT_EQ(elf_file_find_function(ef, "foo_old", true, &s), -ENOENT);
    }
    elf_file_close(ef);

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    CHECK_INT_EQ(system(cmd), 0);
}

int main(void)
{
    RUN_TEST(libc_build_id_matches_readelf);
    RUN_TEST(malloc_is_where_readelf_puts_it);
    RUN_TEST(a_hidden_version_loses_to_the_default_one);
    RUN_TEST(an_address_inside_malloc_names_malloc_or_an_alias);
    RUN_TEST(elf_file_read_gives_the_bytes_at_a_vaddr);
    RUN_TEST(the_test_binary_names_its_own_function);
    RUN_TEST(dt_needed_of_the_test_binary_has_libelf_and_libc);
    RUN_TEST(a_text_file_is_not_elf_and_a_missing_one_is_enoent);
    RUN_TEST(files_built_here_show_versions_and_missing_build_ids);
    return check_exit_code();
}

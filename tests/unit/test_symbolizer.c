/*
 * test_symbolizer.c - the symbolizer against addr2line on programs built at
 * test time: every call site's inlined calls, names, files and lines; debug
 * files found by build ID (in a process root) and by .gnu_debuglink; names
 * from .dynsym alone and from MiniDebugInfo; the bounds of the symbol
 * cache and of each file's memo of named addresses; and what the cache says
 * of a file it cannot reach.
 */
#include "check.h"
#include "proc_maps.h"
#include "symbol_cache.h"
#include "symbol_memo.h"
#include "symbolizer.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Call sites checked per program at most (the programs have a few dozen). */
#define MAX_SITES 256

/* The test programs: inline chains through templates and std::vector, with
 * linkage names throughout and no global constructors (addr2line names an
 * inlined function without a linkage name after its caller's symbol, so it
 * is no oracle for those); hidden() is local, for the MiniDebugInfo check. */
static const char PROG[] =
    "#include <cstdlib>\n"
    "#include <vector>\n"
    "namespace demo {\n"
    "template <typename T> struct Box {\n"
    "  T *items[8]; int n = 0;\n"
    "  __attribute__((noinline)) void add() { items[n++] = static_cast<T "
    "*>(std::malloc(sizeof(T))); }\n"
    "};\n"
    "inline __attribute__((always_inline)) void *inner(std::size_t n) { return std::malloc(n); }\n"
    "inline __attribute__((always_inline)) void *outer(std::size_t n) { return inner(n + 1); }\n"
    "__attribute__((noinline)) void *twice(std::size_t n) { return outer(n); }\n"
    "__attribute__((noinline)) void push(std::vector<int> &v, int i) { v.push_back(i); }\n"
    "}\n"
    "__attribute__((noinline)) static long hidden(int x) { return x * 3 + (long)std::malloc(1); }\n"
    "int main(int argc, char **) {\n"
    "  demo::Box<long> b; b.add(); demo::twice(argc);\n"
    "  std::vector<int> v; demo::push(v, argc);\n"
    "  return (int)hidden(argc);\n"
    "}\n";

static const char LAMBDA[] = "#include <cstdlib>\n"
                             "void *volatile sink;\n"
                             "int main(int argc, char **) {\n"
                             "  auto f = [](int n) { return std::malloc(n); };\n"
                             "  sink = f(argc);\n"
                             "  return 0;\n"
                             "}\n";

/* The scratch directory of this run. */
static char dir[] = "/tmp/heapprof-symbolizer-XXXXXX";

/* Runs a shell command; 0 if it exited with 0. */
static int sh(const char *fmt, const char *arg)
{
    char cmd[8192];
    snprintf(cmd, sizeof(cmd), fmt, arg, arg, arg, arg, arg, arg, arg, arg);
    return system(cmd) == 0 ? 0 : -1;
}

/* Writes `text` to DIR/name. */
static int write_file(const char *name, const char *text)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fputs(text, f);
    return fclose(f) == 0 ? 0 : -1;
}

/* The addresses of the last byte of every call instruction in `bin`: the
 * addresses a profile looks up (return address - 1). */
static size_t call_sites(const char *bin, uint64_t *out, size_t cap)
{
    char cmd[PATH_MAX + 64], line[1024];
    snprintf(cmd, sizeof(cmd), "objdump -d -w --no-show-raw-insn '%s'", bin);
    FILE *f = popen(cmd, "r");
    size_t n = 0;
    int after_call = 0;
    while (f && fgets(line, sizeof(line), f)) {
        unsigned long long a;
        char colon;
        if (sscanf(line, " %llx%c", &a, &colon) != 2 || colon != ':' || line[0] != ' ')
            continue;
        if (after_call && n < cap)
            out[n++] = a - 1;
        after_call = strstr(line, "\tcall") != NULL;
    }
    if (f)
        pclose(f);
    return n;
}

/* Compares our lines at each address with `addr2line -a -f -i -C`. */
static void check_against_addr2line(struct symbolizer *z, const char *bin, const uint64_t *pcs,
                                    size_t n)
{
    char *cmd = malloc(64 + PATH_MAX + n * 20);
    if (!cmd)
        return;
    int len = sprintf(cmd, "addr2line -a -f -i -C -e '%s'", bin);
    for (size_t i = 0; i < n; i++)
        len += sprintf(cmd + len, " 0x%" PRIx64, pcs[i]);
    FILE *f = popen(cmd, "r");
    free(cmd);
    char line[4096];
    size_t site = (size_t)-1, k = 0, compared = 0;
    struct sym_frame fr = {.n = 0};
    while (f && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "0x", 2) == 0) { /* the next address */
            if (site != (size_t)-1)
                CHECK_INT_EQ(k, fr.n);
            sym_frame_free(&fr);
            site++;
            k = 0;
            CHECK_INT_EQ(symbolizer_lookup(z, pcs[site], &fr), 0);
            continue;
        }
        char where[4096];
        if (!fgets(where, sizeof(where), f))
            break;
        where[strcspn(where, "\n")] = '\0';
        char *disc = strstr(where, " (discriminator");
        if (disc)
            *disc = '\0';
        char *colon = strrchr(where, ':');
        if (!colon || k >= fr.n) {
            fprintf(stderr, "  at 0x%" PRIx64 ": addr2line has more lines (%s %s)\n", pcs[site],
                    line, where);
            k++;
            continue;
        }
        *colon = '\0';
        const struct sym_line *l = &fr.lines[k++];
        if (strcmp(line, "??") != 0)
            CHECK_STR_EQ(l->system_name, line);
        /* Code without line information (crt files): addr2line shows a
         * file from the symbol table's STT_FILE entries, or "??" */
        if (atoll(colon + 1) > 0) {
            CHECK_STR_EQ(l->file, where);
            CHECK_INT_EQ(l->line, atoll(colon + 1));
            compared++;
        }
    }
    if (site != (size_t)-1)
        CHECK_INT_EQ(k, fr.n);
    sym_frame_free(&fr);
    if (f)
        pclose(f);
    CHECK(compared >= n / 2);
}

/* Opens `name` in the scratch dir as the process with root `root` sees it at `as`. */
static struct symbolizer *open_in(const char *name, const char *root, const char *as)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    struct symbolizer *z = NULL;
    CHECK_INT_EQ(symbolizer_open(path, root, as ? as : path, &z), 0);
    return z;
}

/* Whether some call site of `z` has a line named `name` (display name). */
static int has_function(struct symbolizer *z, const uint64_t *pcs, size_t n, const char *name,
                        int *with_file)
{
    int found = 0;
    for (size_t i = 0; i < n && !found; i++) {
        struct sym_frame fr;
        if (symbolizer_lookup(z, pcs[i], &fr) != 0)
            continue;
        for (size_t k = 0; k < fr.n; k++) {
            if (strcmp(fr.lines[k].name, name) == 0) {
                found = 1;
                *with_file = fr.lines[k].file[0] != '\0';
            }
        }
        sym_frame_free(&fr);
    }
    return found;
}

static void lines_and_inlined_calls_match_addr2line(void)
{
    char bin[PATH_MAX];
    uint64_t pcs[MAX_SITES];
    snprintf(bin, sizeof(bin), "%s/prog", dir);
    size_t n = call_sites(bin, pcs, MAX_SITES);
    CHECK(n >= 5);
    struct symbolizer *z = open_in("prog", "", NULL);
    if (!z)
        return;
    CHECK(symbolizer_build_id(z)[0] != '\0');
    check_against_addr2line(z, bin, pcs, n);
    /* The two forced-inline functions are frames of their own, innermost first. */
    int found = 0;
    for (size_t i = 0; i < n; i++) {
        struct sym_frame fr;
        CHECK_INT_EQ(symbolizer_lookup(z, pcs[i], &fr), 0);
        if (fr.n == 3 && strcmp(fr.lines[0].name, "demo::inner") == 0) {
            CHECK_STR_EQ(fr.lines[1].name, "demo::outer");
            CHECK_STR_EQ(fr.lines[2].name, "demo::twice");
            CHECK(fr.from_dwarf);
            found = 1;
        }
        sym_frame_free(&fr);
    }
    CHECK(found);
    symbolizer_close(z);
}

/*
 * Runs `setup` (a shell command with DIR as its one %s) to strip a copy of
 * prog and put its debug information aside, opens the copy `file` as seen
 * in root DIR/`root` at path `as` (NULL: where it is), and checks that its
 * call sites are named as addr2line names prog's, from a debug file whose
 * path holds `debug_path`.
 */
static void check_named_from_debug_file(const char *setup, const char *file, const char *root,
                                        const char *as, const char *debug_path)
{
    uint64_t pcs[MAX_SITES];
    char bin[PATH_MAX], root_path[PATH_MAX];
    snprintf(bin, sizeof(bin), "%s/prog", dir);
    size_t n = call_sites(bin, pcs, MAX_SITES);
    CHECK_INT_EQ(sh(setup, dir), 0);
    snprintf(root_path, sizeof(root_path), "%s%s%s", root[0] ? dir : "", root[0] ? "/" : "", root);
    struct symbolizer *z = open_in(file, root_path, as);
    if (!z)
        return;
    check_against_addr2line(z, bin, pcs, n);
    if (!strstr(symbolizer_debug_path(z), debug_path)) {
        fprintf(stderr, "%s:%d: debug file of %s is \"%s\", not under \"%s\"\n", __FILE__, __LINE__,
                file, symbolizer_debug_path(z), debug_path);
        check_failures++;
    }
    symbolizer_close(z);
}

static void stripped_file_finds_its_debug_file_by_build_id_in_its_root(void)
{
    /* root/usr/lib/debug/.build-id/xx/yyyy.debug, as the process's root has it */
    check_named_from_debug_file("cd %s && id=$(readelf -n prog | sed -n 's/.*Build ID: //p') && "
                                "mkdir -p root/usr/lib/debug/.build-id/${id%%${id#??}} && "
                                "objcopy --only-keep-debug prog "
                                "root/usr/lib/debug/.build-id/${id%%${id#??}}/${id#??}.debug && "
                                "strip -o stripped prog",
                                "stripped", "root", "/opt/app/prog", "/usr/lib/debug/.build-id/");
}

static void stripped_file_finds_its_debug_file_by_debuglink(void)
{
    /* The link holds the base name only, found in DIR/.debug/. */
    check_named_from_debug_file("cd %s && mkdir -p linked/.debug && objcopy --only-keep-debug prog "
                                "linked/.debug/prog.dbg && strip -o linked/prog prog && "
                                "cd linked && objcopy --add-gnu-debuglink=.debug/prog.dbg prog",
                                "linked/prog", "", NULL, "linked/.debug/prog.dbg");
}

/* Runs `setup` (a shell command with DIR as its one %s) to build DIR/`file`,
 * finds its call sites (into pcs, *n of them) and opens it; NULL on failure. */
static struct symbolizer *build_and_open(const char *setup, const char *file, uint64_t *pcs,
                                         size_t *n)
{
    char bin[PATH_MAX];
    CHECK_INT_EQ(sh(setup, dir), 0);
    snprintf(bin, sizeof(bin), "%s/%s", dir, file);
    *n = call_sites(bin, pcs, MAX_SITES);
    return open_in(file, "", NULL);
}

static void dynsym_alone_names_functions_without_files(void)
{
    uint64_t pcs[MAX_SITES];
    size_t n;
    struct symbolizer *z = build_and_open("cd %s && g++ -O1 -g -rdynamic -fno-omit-frame-pointer "
                                          "-Wl,--build-id=0x1111222233334444 -o exported prog.cc "
                                          "&& strip -o exported.stripped exported",
                                          "exported.stripped", pcs, &n);
    if (!z)
        return;
    int with_file = 1;
    CHECK(has_function(z, pcs, n, "demo::twice", &with_file));
    CHECK(!with_file);
    CHECK_STR_EQ(symbolizer_debug_path(z), "");
    symbolizer_close(z);
}

static void minidebuginfo_names_local_functions(void)
{
    uint64_t pcs[MAX_SITES];
    size_t n;
    /* Like distributions make it: the function symbols .dynsym lacks, in an
     * xz-compressed ELF file in the .gnu_debugdata section. */
    struct symbolizer *z = build_and_open(
        "cd %s && g++ -O1 -g -fno-omit-frame-pointer -Wl,--build-id=0x5555666677778888 "
        "-o mini prog.cc && nm mini --format=posix --defined-only | "
        "awk '$2 ~ /[TtWw]/ {print $1}' > keep && objcopy -S --keep-symbols=keep "
        "--remove-section .comment mini mini.syms && xz -f mini.syms && "
        "strip -o mini.stripped mini && "
        "objcopy --add-section .gnu_debugdata=mini.syms.xz mini.stripped",
        "mini.stripped", pcs, &n);
    if (!z)
        return;
    int with_file = 1;
    CHECK(has_function(z, pcs, n, "hidden", &with_file));
    CHECK(!with_file);
    CHECK(has_function(z, pcs, n, "demo::Box::add", &with_file));
    symbolizer_close(z);
}

static void inlined_lambdas_are_named_by_their_scopes(void)
{
    uint64_t pcs[MAX_SITES];
    char bin[PATH_MAX];
    snprintf(bin, sizeof(bin), "%s/lambda", dir);
    size_t n = call_sites(bin, pcs, MAX_SITES);
    struct symbolizer *z = open_in("lambda", "", NULL);
    if (!z)
        return;
    int with_file = 0;
    CHECK(has_function(z, pcs, n, "main::{lambda}::operator()", &with_file));
    CHECK(with_file);
    symbolizer_close(z);
}

/* The distinct files mapped by this process, as cache keys go. */
static size_t own_file_mappings(struct proc_maps *maps, const struct proc_mapping **out, size_t cap)
{
    size_t n = 0;
    CHECK_INT_EQ(proc_maps_read(getpid(), maps), 0);
    for (size_t i = 0; i < maps->n && n < cap; i++)
        if (proc_mapping_is_file(&maps->v[i]) && maps->v[i].executable)
            out[n++] = &maps->v[i];
    return n;
}

static void the_cache_shares_files_and_keeps_its_bounds(void)
{
    struct symbol_cache c;
    struct proc_maps maps = {0};
    const struct proc_mapping *files[64];
    size_t n = own_file_mappings(&maps, files, 64);
    CHECK(n >= 4); /* this program, libc, libdw, libelf at least */
    symbol_cache_init(&c);
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < n; i++) {
            struct cached_elf *e;
            if (symbol_cache_get(&c, getpid(), files[i], &e) != 0)
                continue;
            struct sym_frame fr;
            CHECK_INT_EQ(symbol_cache_symbolize(&c, e, files[i]->offset, &fr), 0);
            sym_frame_free(&fr);
            symbol_cache_put(&c, e);
        }
    }
    struct symbol_cache_stats st;
    symbol_cache_stats(&c, &st);
    CHECK_INT_EQ(st.misses, st.entries);
    CHECK(st.hits >= st.entries);
    CHECK(st.bytes > 0);

    /* Lower bounds: idle entries go, least recently used first. */
    symbol_cache_set_limits(&c, 2, SYMBOL_CACHE_MAX_BYTES, INT64_MAX);
    struct cached_elf *e;
    CHECK_INT_EQ(symbol_cache_get(&c, getpid(), files[0], &e), 0);
    symbol_cache_put(&c, e);
    symbol_cache_stats(&c, &st);
    CHECK(st.entries <= 2);
    symbol_cache_set_limits(&c, SYMBOL_CACHE_ENTRIES, 1, INT64_MAX);
    CHECK_INT_EQ(symbol_cache_get(&c, getpid(), files[1], &e), 0);
    symbol_cache_stats(&c, &st);
    CHECK_INT_EQ(st.entries, 1); /* over the bytes bound, but in use */
    symbol_cache_put(&c, e);
    symbol_cache_stats(&c, &st);
    CHECK_INT_EQ(st.entries, 0);
    CHECK_INT_EQ(st.bytes, 0);
    symbol_cache_set_limits(&c, SYMBOL_CACHE_ENTRIES, SYMBOL_CACHE_MAX_BYTES, 0);
    CHECK_INT_EQ(symbol_cache_get(&c, getpid(), files[2], &e), 0);
    symbol_cache_put(&c, e);
    CHECK_INT_EQ(symbol_cache_get(&c, getpid(), files[3], &e), 0);
    symbol_cache_put(&c, e);
    symbol_cache_stats(&c, &st);
    CHECK(st.entries <= 1); /* the idle one expired at the next get */
    symbol_cache_destroy(&c);
    proc_maps_free(&maps);
}

/* The uid the reachability check drops to: nobody. */
#define NOBODY 65534

/*
 * A mapping whose file cannot be reached gets the reason, not "not there":
 * a path too long to put /proc/PID/root in front of, and (in a child that
 * is nobody) a file in a directory only root may search, which this test
 * made with mkdtemp. The mapping's range is not mapped, so its map_files
 * link is not there either: that ENOENT says less, and is not the answer.
 */
static void the_cache_says_why_it_cannot_reach_a_file(void)
{
    static char path[PATH_MAX + 64];
    struct proc_mapping m = {.start = 0x1000, .end = 0x2000, .inode = 1, .path = path};
    struct symbol_cache c;
    struct cached_elf *e;
    symbol_cache_init(&c);
    memset(path, 'a', sizeof(path) - 1);
    path[0] = '/';
    CHECK_INT_EQ(symbol_cache_get(&c, getpid(), &m, &e), -ENAMETOOLONG);

    CHECK(geteuid() == 0); /* scripts/test.sh runs the tests as root */
    snprintf(path, sizeof(path), "%s/prog", dir);
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) {
        int err = -EPERM;
        if (setgid(NOBODY) == 0 && setuid(NOBODY) == 0)
            err = symbol_cache_get(&c, getpid(), &m, &e);
        _exit(-err & 0xff); /* the errno, 0 if it was found */
    }
    int status = 0;
    CHECK_INT_EQ(waitpid(child, &status, 0), child);
    CHECK(WIFEXITED(status));
    CHECK_INT_EQ(WEXITSTATUS(status), EACCES);
    symbol_cache_destroy(&c);
}

static void the_memo_remembers_copies_within_its_bound(void)
{
    struct symbol_memo *m = symbol_memo_new();
    CHECK(m != NULL);
    if (!m)
        return;
    char name[300];
    memset(name, 'a', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    struct sym_frame f = {.n = 1, .from_dwarf = true};
    f.lines[0] = (struct sym_line){.name = name, .system_name = name, .file = "x.c", .line = 7};
    /* 50000 frames of ~700 bytes: several times the bound */
    uint64_t most = 0;
    for (uint64_t a = 0; a < 50000; a++) {
        if (symbol_memo_put(m, a, &f) != 0)
            break;
        if (symbol_memo_bytes(m) > most)
            most = symbol_memo_bytes(m);
    }
    CHECK(most <= SYMBOL_MEMO_MAX_BYTES);
    CHECK(most > SYMBOL_MEMO_MAX_BYTES / 2);
    struct sym_frame got;
    CHECK_INT_EQ(symbol_memo_get(m, 49999, &got), 0);
    CHECK_INT_EQ(got.n, 1);
    if (got.n == 1) {
        CHECK_STR_EQ(got.lines[0].name, name);
        CHECK_STR_EQ(got.lines[0].file, "x.c");
        CHECK_INT_EQ(got.lines[0].line, 7);
        CHECK(got.from_dwarf);
    }
    sym_frame_free(&got);
    CHECK_INT_EQ(symbol_memo_get(m, 0, &got), -ENOENT); /* forgotten when it started over */
    symbol_memo_free(m);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    int built = write_file("prog.cc", PROG) == 0 && write_file("lambda.cc", LAMBDA) == 0 &&
                sh("cd %s && g++ -O1 -g -fno-omit-frame-pointer -o prog prog.cc && "
                   "g++ -O1 -g -fno-omit-frame-pointer -o lambda lambda.cc",
                   dir) == 0;
    CHECK(built);
    if (built) {
        RUN_TEST(lines_and_inlined_calls_match_addr2line);
        RUN_TEST(stripped_file_finds_its_debug_file_by_build_id_in_its_root);
        RUN_TEST(stripped_file_finds_its_debug_file_by_debuglink);
        RUN_TEST(dynsym_alone_names_functions_without_files);
        RUN_TEST(minidebuginfo_names_local_functions);
        RUN_TEST(inlined_lambdas_are_named_by_their_scopes);
    }
    RUN_TEST(the_cache_shares_files_and_keeps_its_bounds);
    if (built)
        RUN_TEST(the_cache_says_why_it_cannot_reach_a_file);
    RUN_TEST(the_memo_remembers_copies_within_its_bound);
    sh("rm -rf %s", dir);
    return check_exit_code();
}

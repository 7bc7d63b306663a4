/*
 * demangle.c - demangling through libiberty's callback interface (which
 * allocates nothing itself, so running out of memory is an error we return
 * rather than libiberty's exit), and the short display form of a name (see
 * demangle.h).
 */
#include "demangle.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <libiberty/demangle.h>

/* Options for libiberty: parameter lists and cv-qualifiers in the full
 * name, as `addr2line -C` and `c++filt` print it. */
#define DEMANGLE_OPTIONS (DMGL_PARAMS | DMGL_ANSI)

/* The text libiberty hands back in pieces, collected here. */
struct out_buf {
    char *data;
    size_t len, cap;
    bool failed; /* out of memory or over DEMANGLE_MAX_DEMANGLED */
};

/* Appends one piece of demangled text (libiberty's callback). */
static void collect(const char *s, size_t n, void *opaque)
{
    struct out_buf *b = opaque;
    if (b->failed)
        return;
    if (b->len + n + 1 > DEMANGLE_MAX_DEMANGLED) {
        b->failed = true;
        return;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 128;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->data, cap);
        if (!p) {
            b->failed = true;
            return;
        }
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

int demangle_name(const char *raw, char **out)
{
    struct out_buf b = {0};
    bool mangled = raw[0] == '_' && (raw[1] == 'Z' || raw[1] == 'R');
    if (mangled && strlen(raw) <= DEMANGLE_MAX_MANGLED) {
        /* Legacy Rust names are also valid C++ names: Rust first, as
         * c++filt does, so their hashes and $-escapes are read as Rust's. */
        int ok = rust_demangle_callback(raw, DEMANGLE_OPTIONS, collect, &b);
        if (!ok || b.failed || b.len == 0) {
            free(b.data);
            b = (struct out_buf){0};
            ok = raw[1] == 'Z' && cplus_demangle_v3_callback(raw, DEMANGLE_OPTIONS, collect, &b);
        }
        if (ok && !b.failed && b.len > 0) {
            *out = b.data;
            return 0;
        }
        free(b.data);
    }
    *out = strdup(raw);
    return *out ? 0 : -ENOMEM;
}

/* What an open bracket of the name is, and so whether its text is kept. */
enum bracket {
    GENERIC,         /* <T, A>: template or generic arguments, dropped */
    PARAMS,          /* (int, char): a parameter list, dropped */
    QUALIFIED,       /* <X as Trait> up to " as ", and <impl X for Y>: kept */
    QUALIFIED_TRAIT, /* the " as Trait" part of <X as Trait>: dropped */
    KEPT_PAREN,      /* parentheses inside kept text, as in <impl Fn() -> u8> */
    DECLTYPE,        /* decltype(...) of a return type, dropped */
};

/* Whether the text inside a bracket is dropped. */
static bool dropped(enum bracket b)
{
    return b == GENERIC || b == PARAMS || b == QUALIFIED_TRAIT || b == DECLTYPE;
}

/* Deepest nesting tracked; deeper brackets are dropped whatever they are. */
#define SIMPLIFY_MAX_DEPTH 64

/* Prefixes of special functions kept whole, so a thunk is not shown as the
 * function it forwards to. */
static const char *const kept_prefixes[] = {
    "non-virtual thunk to ",
    "virtual thunk to ",
    "covariant return thunk to ",
};

/* Operator tokens after "operator", longest first so "<<=" wins over "<<". */
static const char *const operator_tokens[] = {
    "()", "[]", "->*", "<=>", "<<=", ">>=", "->", "<<", ">>", "<=", ">=", "==", "!=",
    "&&", "||", "++",  "--",  "+=",  "-=",  "*=", "/=", "%=", "&=", "|=", "^=", "<",
    ">",  "+",  "-",   "*",   "/",   "%",   "&",  "|",  "^",  "!",  "~",  "=",  ",",
};

/* The state of one simplification. */
struct simplifier {
    const char *s; /* the full name */
    size_t i;      /* next character of s */
    char *out;
    size_t o; /* characters written to out */
    enum bracket stack[SIMPLIFY_MAX_DEPTH];
    size_t depth;      /* open brackets, including those past the stack */
    size_t skipping;   /* open brackets whose text is dropped */
    bool after_params; /* past a top-level parameter list: drop up to "::" */
};

/* Whether c can be part of an identifier. */
static bool ident_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '$';
}

static bool starts(const struct simplifier *z, const char *prefix)
{
    return strncmp(z->s + z->i, prefix, strlen(prefix)) == 0;
}

/* Copies n characters of the name to the output. */
static void copy(struct simplifier *z, size_t n)
{
    memcpy(z->out + z->o, z->s + z->i, n);
    z->o += n;
    z->i += n;
}

static void push(struct simplifier *z, enum bracket b)
{
    if (z->depth < SIMPLIFY_MAX_DEPTH)
        z->stack[z->depth] = b;
    z->skipping += z->depth >= SIMPLIFY_MAX_DEPTH || dropped(b);
    z->depth++;
}

/* Closes the innermost bracket; returns what it was. */
static enum bracket pop(struct simplifier *z)
{
    z->depth--;
    enum bracket b = z->depth < SIMPLIFY_MAX_DEPTH ? z->stack[z->depth] : GENERIC;
    if (z->depth >= SIMPLIFY_MAX_DEPTH || dropped(b))
        z->skipping--;
    return b;
}

static enum bracket top(const struct simplifier *z)
{
    return z->depth - 1 < SIMPLIFY_MAX_DEPTH ? z->stack[z->depth - 1] : GENERIC;
}

/* Copies a balanced {...} (a lambda's or closure's name) as it is. */
static void copy_braces(struct simplifier *z)
{
    size_t n = 0, open = 0;
    do {
        char c = z->s[z->i + n];
        if (c == '\0')
            break;
        open += c == '{';
        open -= c == '}';
        n++;
    } while (open > 0);
    copy(z, n);
}

/* Copies "operator" and its token ("operator()", "operator new[]",
 * "operator int"); template arguments right after it are dropped. */
static void copy_operator(struct simplifier *z)
{
    copy(z, strlen("operator"));
    if (z->s[z->i] == ' ' && z->s[z->i + 1] != '<') {
        /* new, delete, a conversion ("operator unsigned long"): up to the parameters */
        while (z->s[z->i] && z->s[z->i] != '(' && z->s[z->i] != '<')
            copy(z, 1);
        if (starts(z, "[]"))
            copy(z, 2);
    } else {
        for (size_t k = 0; k < sizeof(operator_tokens) / sizeof(operator_tokens[0]); k++) {
            if (starts(z, operator_tokens[k])) {
                copy(z, strlen(operator_tokens[k]));
                break;
            }
        }
    }
    /* c++filt writes "operator<< <T>": the space is not a return type's */
    if (starts(z, " <"))
        z->i++;
    if (z->s[z->i] == '<') {
        push(z, GENERIC);
        z->i++;
    }
}

/* Handles '<': generic arguments after a name, else a qualified path. */
static void open_angle(struct simplifier *z)
{
    char prev = z->o ? z->out[z->o - 1] : ' ';
    if (z->skipping) {
        push(z, GENERIC);
    } else if (!starts(z, "<impl ") && (ident_char(prev) || prev == ':' || prev == '}')) {
        /* Rust's turbofish f::<T> loses its "::" with its arguments */
        if (z->o >= 2 && z->out[z->o - 1] == ':' && z->out[z->o - 2] == ':')
            z->o -= 2;
        push(z, GENERIC);
    } else {
        push(z, QUALIFIED);
    }
    z->i++;
}

/* Handles '(': "(anonymous namespace)", kept parentheses, or parameters. */
static void open_paren(struct simplifier *z)
{
    if (!z->skipping && starts(z, "(anonymous namespace)")) {
        copy(z, strlen("(anonymous namespace)"));
    } else if (!z->skipping && z->depth > 0) {
        push(z, KEPT_PAREN);
        copy(z, 1);
    } else {
        push(z, PARAMS);
        z->i++;
    }
}

/* Handles a closing bracket. */
static void close_bracket(struct simplifier *z)
{
    enum bracket b = pop(z);
    if (b == KEPT_PAREN)
        copy(z, 1);
    else
        z->i++;
    if (b == PARAMS && z->depth == 0)
        z->after_params = true;
}

/* One step over the name at top level or inside brackets. */
static void step(struct simplifier *z)
{
    char c = z->s[z->i];
    char prev = z->i ? z->s[z->i - 1] : ' ';
    bool name_start = z->o == 0 || z->out[z->o - 1] == ':' || z->out[z->o - 1] == ' ';

    if (z->after_params && z->depth == 0) {
        /* " const", " &&", " [clone .cold]": dropped; "::" goes on with a local name */
        if (starts(z, "::")) {
            z->after_params = false;
            copy(z, 2);
        } else {
            z->i++;
        }
    } else if (!z->skipping && name_start && starts(z, "operator") && !ident_char(z->s[z->i + 8])) {
        copy_operator(z);
    } else if (!z->skipping && starts(z, "decltype (")) {
        z->i += strlen("decltype ");
        push(z, DECLTYPE); /* dropped, and the space after it ends the return type */
        z->i++;
    } else if (c == '{' && !z->skipping) {
        copy_braces(z);
    } else if (c == '<') {
        open_angle(z);
    } else if (c == '(') {
        open_paren(z);
    } else if ((c == '>' && prev != '-') || c == ')') {
        if (z->depth > 0)
            close_bracket(z);
        else
            copy(z, 1);
    } else if (c == ' ' && !z->skipping && z->depth > 0 && top(z) == QUALIFIED &&
               starts(z, " as ")) {
        pop(z);
        push(z, QUALIFIED_TRAIT);
        z->i += strlen(" as ");
    } else if (z->skipping) {
        z->i++;
    } else if (c == ' ' && z->depth == 0) {
        /* A top-level space ends a return type ("void ns::f<T>(...)"): start over */
        z->o = 0;
        z->i++;
    } else {
        copy(z, 1);
    }
}

void demangle_simplify(const char *full, char *out)
{
    struct simplifier z = {.s = full, .out = out};
    for (size_t k = 0; k < sizeof(kept_prefixes) / sizeof(kept_prefixes[0]); k++) {
        if (starts(&z, kept_prefixes[k])) {
            copy(&z, strlen(kept_prefixes[k]));
            break;
        }
    }
    size_t kept = z.o;
    while (z.s[z.i]) {
        step(&z);
        if (z.o < kept) /* a return type was dropped: keep the thunk prefix */
            z.o = kept;
    }
    out[z.o] = '\0';
}

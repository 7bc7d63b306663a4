/*
 * symbolizer_names.c - names of functions from DWARF and symbol tables
 * (see symbolizer_names.h).
 */
#include "symbolizer_names.h"

#include <dwarf.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "demangle.h"

/* The longest qualified name built from the DIE tree; longer ones are cut
 * (they are display names, never keys of anything but their function). */
#define QUALIFIED_NAME_MAX 1024

/* Enclosing functions followed when qualifying a local entity (a lambda in
 * a lambda in a method): enough for real code, and a bound on bad DWARF. */
#define QUALIFY_MAX_DEPTH 4

/* Abstract origins and specifications followed to reach a declaration. */
#define DECLARATION_MAX_HOPS 8

/* A name being built in a fixed buffer; it stops growing when full. */
struct name_buf {
    char s[QUALIFIED_NAME_MAX];
    size_t len;
};

static void append(struct name_buf *b, const char *s)
{
    size_t n = strlen(s);
    if (n > sizeof(b->s) - 1 - b->len)
        n = sizeof(b->s) - 1 - b->len;
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

/* Sets both names of `l` from a full name. */
static int set_names(struct sym_line *l, char *system_name)
{
    l->system_name = system_name;
    l->name = malloc(strlen(system_name) + 1);
    if (!l->name) {
        free(l->system_name);
        l->system_name = NULL;
        return -ENOMEM;
    }
    demangle_simplify(system_name, l->name);
    return 0;
}

/* The string attribute `name` of `die`, following abstract origins and
 * specifications; NULL if it has none. */
static const char *string_attr(Dwarf_Die *die, unsigned name)
{
    Dwarf_Attribute a;
    return dwarf_formstring(dwarf_attr_integrate(die, name, &a));
}

/* The declaration of `die`: where its name sits in the tree of scopes. */
static Dwarf_Die declaration_of(Dwarf_Die *die)
{
    Dwarf_Die cur = *die;
    for (int hop = 0; hop < DECLARATION_MAX_HOPS; hop++) {
        Dwarf_Attribute a;
        Dwarf_Die next;
        if (!dwarf_attr(&cur, DW_AT_abstract_origin, &a) &&
            !dwarf_attr(&cur, DW_AT_specification, &a))
            break;
        if (!dwarf_formref_die(&a, &next))
            break;
        cur = next;
    }
    return cur;
}

static bool is_type_scope(int tag)
{
    return tag == DW_TAG_class_type || tag == DW_TAG_structure_type || tag == DW_TAG_union_type ||
           tag == DW_TAG_interface_type;
}

/* Appends the name of one enclosing scope and "::"; nothing for blocks. */
static void append_scope(struct name_buf *b, Dwarf_Die *s, int lang)
{
    int tag = dwarf_tag(s);
    const char *name = dwarf_diename(s);
    if (tag == DW_TAG_namespace)
        name = name ? name : "(anonymous namespace)";
    else if (is_type_scope(tag))
        name = name ? name : lang == DW_LANG_Rust ? NULL : "{lambda}";
    else
        name = NULL;
    if (name) {
        append(b, name);
        append(b, "::");
    }
}

/* Appends the qualified name of `die`: its enclosing namespaces, types and
 * functions, then its own name. */
static void append_qualified(struct name_buf *b, Dwarf_Die *die, int lang, int depth)
{
    Dwarf_Die decl = declaration_of(die);
    const char *name = string_attr(&decl, DW_AT_name);
    Dwarf_Die *scopes = NULL;
    int n = depth < QUALIFY_MAX_DEPTH ? dwarf_getscopes_die(&decl, &scopes) : 0;
    /* scopes[0] is decl, the last the compile unit. An enclosing function
     * qualifies itself, and everything outside it with it. */
    int outer = n - 1;
    for (int i = 1; i < n - 1; i++) {
        int tag = dwarf_tag(&scopes[i]);
        if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) {
            append_qualified(b, &scopes[i], lang, depth + 1);
            append(b, "::");
            outer = i;
            break;
        }
    }
    for (int i = outer - 1; i >= 1; i--)
        append_scope(b, &scopes[i], lang);
    free(scopes);
    append(b, name ? name : "??");
}

bool sym_lang_has_scopes(int lang)
{
    return lang == DW_LANG_C_plus_plus || lang == DW_LANG_C_plus_plus_03 ||
           lang == DW_LANG_C_plus_plus_11 || lang == DW_LANG_C_plus_plus_14 ||
           lang == DW_LANG_ObjC_plus_plus || lang == DW_LANG_Rust || lang == DW_LANG_D;
}

/* The linkage (mangled) name of `die`, or NULL. */
static const char *linkage_name(Dwarf_Die *die)
{
    const char *linkage = string_attr(die, DW_AT_linkage_name);
    return linkage ? linkage : string_attr(die, DW_AT_MIPS_linkage_name);
}

bool sym_has_linkage_name(Dwarf_Die *die)
{
    return linkage_name(die) != NULL;
}

int sym_names_of_die(Dwarf_Die *die, int lang, struct sym_line *l)
{
    const char *linkage = linkage_name(die);
    char *full = NULL;
    if (linkage) {
        if (demangle_name(linkage, &full) != 0)
            return -ENOMEM;
        return set_names(l, full);
    }
    struct name_buf b = {.len = 0};
    b.s[0] = '\0';
    if (sym_lang_has_scopes(lang)) {
        append_qualified(&b, die, lang, 0);
    } else {
        const char *name = string_attr(die, DW_AT_name);
        append(&b, name ? name : "??");
    }
    full = strdup(b.s);
    return full ? set_names(l, full) : -ENOMEM;
}

int sym_names_of_symbol(const char *symbol, struct sym_line *l)
{
    /* "memcpy@GLIBC_2.2.5", "malloc@@GLIBC_2.2.5": the version is not the name */
    const char *at = strchr(symbol, '@');
    char *base = at && at != symbol ? strndup(symbol, (size_t)(at - symbol)) : strdup(symbol);
    if (!base)
        return -ENOMEM;
    char *full = NULL;
    int err = demangle_name(base, &full);
    free(base);
    return err ? err : set_names(l, full);
}

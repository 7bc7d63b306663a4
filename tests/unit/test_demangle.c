/*
 * test_demangle.c - demangling (C++, Rust legacy and v0) and the short
 * display names, on tables of real symbols and names.
 */
#include "check.h"
#include "demangle.h"

#include <stdlib.h>
#include <string.h>

/* A symbol and the full name `c++filt` prints for it. */
struct demangle_case {
    const char *raw;
    const char *full;
};

static void demangles_cxx_and_rust_symbols(void)
{
    static const struct demangle_case cases[] = {
        {"_ZNSt6vectorIl5AllocIlEE17_M_realloc_insertIJlEEEvN9__gnu_cxx17__normal_iteratorIPlS2_"
         "EEDpOT_",
         "void std::vector<long, Alloc<long> >::_M_realloc_insert<long>(__gnu_cxx::__normal_"
         "iterator<long*, std::vector<long, Alloc<long> > >, long&&)"},
        {"_ZZ4mainENKUliE_clEi", "main::{lambda(int)#1}::operator()(int) const"},
        {"_Znwm", "operator new(unsigned long)"},
        {"_ZnamSt11align_val_tRKSt9nothrow_t",
         "operator new[](unsigned long, std::align_val_t, std::nothrow_t const&)"},
        {"_Z3foov.cold", "foo() [clone .cold]"},
        /* Legacy Rust: its hash is dropped, as c++filt does */
        {"_ZN4core6result13unwrap_failed17h0123456789abcdefE", "core::result::unwrap_failed"},
        /* Rust v0 */
        {"_RNvXsm_NtCs3roNzt6HBWW_12regex_syntax3hirNtB5_3HirNtNtNtCsj6eKBz9Db1c_4core3ops4drop4"
         "Drop4drop",
         "<regex_syntax::hir::Hir as core::ops::drop::Drop>::drop"},
        {"_RINvNtCs6JMX4GRUq9U_4core3ptr9drop_glueNtNtNtCsh036I4OHgIr_6uucore4mods5error8UIoErrorE"
         "Cs8hEv8bFEvN4_7uu_fold",
         "core::ptr::drop_glue::<uucore::mods::error::UIoError>"},
        /* Not mangled, or not valid: kept as they are */
        {"main", "main"},
        {"__libc_start_call_main", "__libc_start_call_main"},
        {"_Znot_a_name", "_Znot_a_name"},
        {"_R", "_R"},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *full = NULL;
        CHECK_INT_EQ(demangle_name(cases[i].raw, &full), 0);
        CHECK_STR_EQ(full, cases[i].full);
        free(full);
    }
}

static void overlong_symbols_stay_mangled(void)
{
    /* _Z + "N" + many "3abc" + "Ev": a valid name longer than the limit */
    size_t n = DEMANGLE_MAX_MANGLED + 100;
    char *raw = malloc(n + 1);
    CHECK(raw != NULL);
    if (!raw)
        return;
    strcpy(raw, "_ZN");
    size_t len = 3;
    while (len + 4 < n - 3) {
        memcpy(raw + len, "3abc", 4);
        len += 4;
    }
    strcpy(raw + len, "Ev");
    char *full = NULL;
    CHECK_INT_EQ(demangle_name(raw, &full), 0);
    CHECK_STR_EQ(full, raw);
    free(full);
    free(raw);
}

/* A full name and its display form. */
struct simplify_case {
    const char *full;
    const char *name;
};

static void simplifies_rust_names(void)
{
    static const struct simplify_case cases[] = {
        {"alloc::raw_vec::finish_grow", "alloc::raw_vec::finish_grow"},
        {"<alloc::raw_vec::RawVec<T,A>>::finish_grow", "alloc::raw_vec::RawVec::finish_grow"},
        {"<core::result::Result<T, E> as core::ops::function::FnOnce<A>>::call_once",
         "core::result::Result::call_once"},
        {"<&T as core::fmt::Display>::fmt", "&T::fmt"},
        {"std::thread::Builder::spawn::{{closure}}", "std::thread::Builder::spawn::{{closure}}"},
        {"foo::<impl Fn() -> u8>::bar", "foo::impl Fn() -> u8::bar"},
        {"RawVecInner::reserve::do_reserve_and_handle::<alloc::alloc::Global>",
         "RawVecInner::reserve::do_reserve_and_handle"},
        {"core::ptr::drop_in_place::<alloc::vec::Vec<u8>>", "core::ptr::drop_in_place"},
        /* An inlined closure's name, as debug information has it */
        {"{closure#0}<i32, alloc::boxed::Box<[u8; 64], alloc::alloc::Global>, ()>", "{closure#0}"},
        {"<regex_syntax::hir::Hir as core::ops::drop::Drop>::drop", "regex_syntax::hir::Hir::drop"},
        {"<core::result::Result<_, _>>::call_once", "core::result::Result::call_once"},
        {"__rustc::__rust_alloc", "__rustc::__rust_alloc"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[256];
        demangle_simplify(cases[i].full, out);
        CHECK_STR_EQ(out, cases[i].name);
    }
}

static void simplifies_cxx_names(void)
{
    static const struct simplify_case cases[] = {
        {"std::vector<int, std::allocator<int> >::_M_realloc_insert<int const&>(__gnu_cxx::__"
         "normal_iterator<int*, std::vector<int, std::allocator<int> > >, int const&)",
         "std::vector::_M_realloc_insert"},
        /* return types of template functions go */
        {"void std::vector<long, Alloc<long> >::_M_realloc_insert<long>(long&&)",
         "std::vector::_M_realloc_insert"},
        {"long& std::vector<long, Alloc<long> >::emplace_back<long>(long&&)",
         "std::vector::emplace_back"},
        {"unsigned long foo<int>(int)", "foo"},
        {"decltype ({parm#1}.begin()) std::begin<std::vector<int> >(std::vector<int>&)",
         "std::begin"},
        /* lambdas keep their names, the call operator its parentheses */
        {"main::{lambda(int)#1}::operator()(int) const", "main::{lambda(int)#1}::operator()"},
        {"run(int)::{lambda()#2}::operator()() const", "run::{lambda()#2}::operator()"},
        {"std::_Function_handler<void (int), main::{lambda(int)#1}>::_M_invoke(std::_Any_data "
         "const&, int&&)",
         "std::_Function_handler::_M_invoke"},
        /* operators */
        {"operator new(unsigned long)", "operator new"},
        {"operator new[](unsigned long, std::nothrow_t const&)", "operator new[]"},
        {"operator delete(void*, std::align_val_t)", "operator delete"},
        {"operator<<(std::ostream&, Bar const&)", "operator<<"},
        {"std::basic_ostream<char, std::char_traits<char> >& std::operator<< "
         "<std::char_traits<char> >(std::basic_ostream<char, std::char_traits<char> >&, char "
         "const*)",
         "std::operator<<"},
        {"std::vector<int, std::allocator<int> >::operator[](unsigned long)",
         "std::vector::operator[]"},
        {"Foo::operator->() const", "Foo::operator->"},
        {"Foo::operator int()", "Foo::operator int"},
        {"std::less<void>::operator()<int&, int&>(int&, int&) const", "std::less::operator()"},
        {"bool operator< <int>(Foo<int> const&, Foo<int> const&)", "operator<"},
        /* constructors, destructors, namespaces, clones, thunks */
        {"Foo::Foo()", "Foo::Foo"},
        {"std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> "
         ">::~basic_string()",
         "std::__cxx11::basic_string::~basic_string"},
        {"(anonymous namespace)::make(int)", "(anonymous namespace)::make"},
        {"foo() [clone .cold]", "foo"},
        {"non-virtual thunk to Foo::bar()", "non-virtual thunk to Foo::bar"},
        {"shapes::Grid<long>::grow(int)", "shapes::Grid::grow"},
        /* C names are left alone */
        {"main", "main"},
        {"__libc_start_call_main", "__libc_start_call_main"},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[512];
        demangle_simplify(cases[i].full, out);
        CHECK_STR_EQ(out, cases[i].name);
    }
}

static void unbalanced_names_stay_in_bounds(void)
{
    /* Hostile or truncated names: the output never outgrows the input. */
    static const char *const names[] = {
        "<<<<<<",
        ">>>>",
        "((((",
        "))))",
        "{{{{",
        "}}}",
        "operator",
        "foo::operator",
        "a<b(c{d",
        "<x as",
        " as ",
        "decltype (",
        "(anonymous namespace",
        "operator new",
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char out[64];
        memset(out, 'X', sizeof(out));
        demangle_simplify(names[i], out);
        CHECK(strlen(out) <= strlen(names[i]));
    }
    /* Nesting deeper than the tracked depth */
    char deep[600], out[600];
    memset(deep, '<', 300);
    memset(deep + 300, '>', 299);
    deep[599] = '\0';
    demangle_simplify(deep, out);
    CHECK(strlen(out) <= strlen(deep));
}

int main(void)
{
    RUN_TEST(demangles_cxx_and_rust_symbols);
    RUN_TEST(overlong_symbols_stay_mangled);
    RUN_TEST(simplifies_rust_names);
    RUN_TEST(simplifies_cxx_names);
    RUN_TEST(unbalanced_names_stay_in_bounds);
    return check_exit_code();
}

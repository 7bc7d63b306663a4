/* A program for test_unwind_table.c, built with -O2 -fomit-frame-pointer:
 * PLT calls (puts, printf), _start from Debian's crt1, and vla_frame, whose
 * alloca makes gcc switch the CFA to %rbp + 16. */
#include <alloca.h>
#include <stdio.h>
#include <string.h>

__attribute__((noinline)) int vla_frame(int n)
{
    char *p = alloca(n);
    memset(p, 'a', n);
    p[n - 1] = 0;
    puts(p);
    return p[n / 2];
}

int main(int argc, char **argv)
{
    printf("%d %s\n", vla_frame(argc * 16), argv[0]);
    return 0;
}

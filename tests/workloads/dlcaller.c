/*
 * dlcaller.c - the library that dlopens the plugin by its bare name, which
 * only its own RUNPATH ($ORIGIN/plugins) finds: the dlopen must see this
 * library as its caller, as it does unprofiled.
 */
#include <dlfcn.h>
#include <stddef.h>

int dlcaller_load_and_run(int n)
{
    void *h = dlopen("libdlalloc.so", RTLD_NOW);
    if (!h)
        return -1;
    void (*run)(int) = (void (*)(int))dlsym(h, "dlalloc_run");
    if (!run)
        return -2;
    run(n);
    return 0;
}

/*
 * debuginfod_target.c - the program test_debuginfod.py builds at test time
 * with a build ID of its own, splits into a stripped executable and its
 * debug file (objcopy --only-keep-debug, strip), and serves the debug file
 * from a local debuginfod: every frame of its own is named only if the
 * daemon fetched that file.
 *
 * After "go": fetched_middle() calls fetched_leaf(), which keeps
 * TARGET_BLOCKS x malloc(TARGET_SIZE); then "done", and a line (or EOF)
 * lets it exit.
 */
#include <stdlib.h>

#include "handshake.h"

#define TARGET_BLOCKS 64
#define TARGET_SIZE 4096

/* A global, so no allocation is dead code. */
void *target_blocks[TARGET_BLOCKS];

/* TARGET_BLOCKS x malloc(TARGET_SIZE), kept. */
__attribute__((noinline)) static void fetched_leaf(void)
{
    for (int i = 0; i < TARGET_BLOCKS; i++) {
        target_blocks[i] = malloc(TARGET_SIZE);
        handshake_touch(target_blocks[i], TARGET_SIZE);
    }
}

/* A static caller: named by the debug file's symbols and DWARF alone. */
__attribute__((noinline)) static void fetched_middle(void)
{
    fetched_leaf();
    __asm__ volatile("" ::: "memory"); /* not a tail call */
}

int main(void)
{
    handshake_ready();
    if (!handshake_wait_line())
        return 0;
    fetched_middle();
    handshake_done();
    handshake_wait_line();
    return 0;
}

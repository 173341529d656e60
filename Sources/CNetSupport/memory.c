// The C library allocator's knobs that Swift cannot reach (malloc.h is not part of the Glibc module).

#include "CNetSupport.h"

#include <malloc.h>

int sp_limit_allocator_arenas(int arenas) {
    return mallopt(M_ARENA_MAX, arenas) == 1 ? 0 : -1;
}

int sp_return_free_memory(void) {
    return malloc_trim(0);
}

void sp_allocator_figures(size_t *in_use, size_t *held) {
    struct mallinfo2 info = mallinfo2();
    // uordblks: allocated in the arenas; hblkhd: chunks mapped on their own (allocated by definition); arena:
    // what the arenas took with brk or mmap.
    *in_use = info.uordblks + info.hblkhd;
    *held = info.arena + info.hblkhd;
}

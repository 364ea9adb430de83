/* A library whose constructor allocates 3131 bytes and keeps them: a leak made while dlopen
 * loads it (dlopen_later.c). */
#include <stdlib.h>
void* volatile ctor_kept;
__attribute__((noinline)) void ctor_leak(void) { ctor_kept = malloc(3131); }
__attribute__((constructor)) static void ctor_init(void) { ctor_leak(); }

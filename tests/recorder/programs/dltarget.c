/* A library that lifecycle dlopens: its allocation must be attributed to it. */
#include <stdlib.h>
void* volatile dl_sink;
void dl_leak(void) { dl_sink = malloc(2468); }

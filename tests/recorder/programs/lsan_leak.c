/* A leak for a LeakSanitizer build (-fsanitize=leak): 123 bytes lost, 7 held by a global. */
#include <stdio.h>
#include <stdlib.h>

void* held;

int main(void) {
  void* volatile lost = malloc(123);
  lost = NULL;
  held = malloc(7);
  puts("lsan_leak");
  return 0;
}

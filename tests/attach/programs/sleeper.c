// Sleeps for argv[1] seconds: a process to attach to, built statically and as a 32-bit program.
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char** argv) {
  unsigned left = argc > 1 ? (unsigned)atoi(argv[1]) : 30;
  while (left) left = sleep(left);
  return 0;
}

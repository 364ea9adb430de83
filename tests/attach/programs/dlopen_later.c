/* dlopen_later READY TRIGGER LIB: creates READY, waits (60 s at most) for TRIGGER to exist,
 * then dlopens LIB (whose constructor allocates), waits 5 s and exits 0; 1 when dlopen fails. */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  const int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    if (write(fd, "ready\n", 6) != 6) return 2;
    close(fd);
  }
  for (int i = 0; i < 6000 && access(argv[2], F_OK) != 0; ++i) usleep(10000);
  void* lib = dlopen(argv[3], RTLD_NOW);
  if (!lib) {
    fprintf(stderr, "dlopen_later: %s\n", dlerror());
    return 1;
  }
  sleep(5);
  return 0;
}

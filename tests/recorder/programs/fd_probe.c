// Descriptor numbers as a program sees them, printed so that a traced run's output can be
// compared with an untraced one's:
//   fd_probe SOFT HARD [fill]   sets RLIMIT_NOFILE to SOFT:HARD and execs itself as `fd_probe
//                               probe [fill]` (the recorder starts under those limits)
//   fd_probe probe [fill]       fcntl F_DUPFD and F_DUPFD_CLOEXEC from 512 and from the limit
//                               - 1, dup2 and dup3 onto high numbers (and, with `fill`, takes
//                               every free number with F_DUPFD and with dup, printing how many);
//                               then leaks 10 blocks of 4242 bytes and prints "done"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static void show(const char* what, int r) {
  if (r >= 0) {
    const int flags = fcntl(r, F_GETFD);
    printf("%s -> %d%s\n", what, r, flags >= 0 && (flags & FD_CLOEXEC) ? " cloexec" : "");
  } else {
    printf("%s -> error %s\n", what, strerror(errno));
  }
}

static int fill(int use_dup) {
  static int fds[1 << 16];
  int n = 0;
  for (; n < (int)(sizeof fds / sizeof fds[0]); ++n) {
    fds[n] = use_dup ? dup(0) : fcntl(0, F_DUPFD, 3);
    if (fds[n] < 0) break;
  }
  const int last = n > 0 ? fds[n - 1] : -1;
  printf("%s: %d taken, the last %d, then %s\n", use_dup ? "dup" : "F_DUPFD 3", n, last, strerror(errno));
  for (int i = 0; i < n; ++i) close(fds[i]);
  return n;
}

int main(int argc, char** argv) {
  if (argc >= 3 && strcmp(argv[1], "probe") != 0) {
    struct rlimit rl = {strtoul(argv[1], NULL, 10), strtoul(argv[2], NULL, 10)};
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) return perror("setrlimit"), 2;
    char* args[] = {argv[0], "probe", argc > 3 ? argv[3] : NULL, NULL};
    execv(argv[0], args);
    return perror("execv"), 2;
  }
  if (argc < 2 || strcmp(argv[1], "probe") != 0) return 2;
  struct rlimit rl;
  getrlimit(RLIMIT_NOFILE, &rl);
  const int soft = (int)rl.rlim_cur;
  char what[64];
  int r = fcntl(0, F_DUPFD, 512);
  show("F_DUPFD 512", r);
  int c = fcntl(0, F_DUPFD_CLOEXEC, 512);
  show("F_DUPFD_CLOEXEC 512", c);
  close(r);
  close(c);
  r = fcntl(0, F_DUPFD, soft - 1);
  show("F_DUPFD soft-1", r);
  close(r);
  const int targets[] = {512, 1023, 1024, soft - 2, soft - 1, soft, 65535};
  for (size_t i = 0; i < sizeof targets / sizeof targets[0]; ++i) {
    snprintf(what, sizeof what, "dup2 %s%d", targets[i] >= soft - 2 ? "soft" : "", targets[i] - (targets[i] >= soft - 2 ? soft : 0));
    r = dup2(1, targets[i]);
    show(what, r);
    if (r >= 0) close(r);
    snprintf(what, sizeof what, "dup3 %s%d", targets[i] >= soft - 2 ? "soft" : "", targets[i] - (targets[i] >= soft - 2 ? soft : 0));
    r = dup3(1, targets[i], O_CLOEXEC);
    show(what, r);
    if (r >= 0) close(r);
  }
  if (argc > 2 && !strcmp(argv[2], "fill")) {
    fill(0);
    fill(1);
  }
  for (int i = 0; i < 10; ++i) {
    void* p = malloc(4242);
    memset(p, i, 4242);
  }
  puts("done");
  return 0;
}

// Requests to memtide run's segment helper (segment_helper.h). One connection a request, on a
// SOCK_SEQPACKET socket in the abstract namespace: the request is one message, the op ('C' or
// 'U') and the path; the reply one byte (0, or the errno of the helper's failure) and, for a
// creation, the new file's descriptor (SCM_RIGHTS). Raw system calls: the program's close and
// the recorder's hooks stay out of it.
#include "recorder/segment_helper.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace memtide::rec {

namespace {

char g_name[sizeof(sockaddr_un::sun_path) - 1];  // "" when the run has no helper

int request(char op, const char* path) {
  if (!g_name[0]) {
    errno = ENOENT;
    return -1;
  }
  const int s = static_cast<int>(syscall(SYS_socket, AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (s < 0) return -1;
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const size_t n = std::strlen(g_name);
  std::memcpy(a.sun_path + 1, g_name, n);  // (abstract: a leading NUL)
  const timeval wait{5, 0};
  syscall(SYS_setsockopt, s, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  int fd = -1, err = EIO;
  char msg[1 + 4096];
  const size_t len = std::strlen(path);
  if (len < sizeof msg - 1 &&
      syscall(SYS_connect, s, reinterpret_cast<sockaddr*>(&a), offsetof(sockaddr_un, sun_path) + 1 + n) == 0) {
    msg[0] = op;
    std::memcpy(msg + 1, path, len);
    if (syscall(SYS_sendto, s, msg, 1 + len, MSG_NOSIGNAL, nullptr, 0) == static_cast<long>(1 + len)) {
      unsigned char status = 0;
      iovec io{&status, 1};
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
      msghdr m{};
      m.msg_iov = &io;
      m.msg_iovlen = 1;
      m.msg_control = control;
      m.msg_controllen = sizeof control;
      if (syscall(SYS_recvmsg, s, &m, MSG_CMSG_CLOEXEC) == 1) {
        err = status;
        for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
          if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
      } else {
        err = errno;
      }
    } else {
      err = errno;
    }
  } else {
    err = len < sizeof msg - 1 ? errno : ENAMETOOLONG;
  }
  syscall(SYS_close, s);
  if (err) {
    if (fd >= 0) syscall(SYS_close, fd);
    errno = err;
    return -1;
  }
  if (op == 'C' && fd < 0) {
    errno = EIO;
    return -1;
  }
  return op == 'C' ? fd : 0;
}

}  // namespace

void segment_helper_configure() {
  const char* v = std::getenv("MEMTIDE_SEGMENT_HELPER");
  g_name[0] = 0;
  if (v && std::strlen(v) < sizeof g_name) std::strcpy(g_name, v);
}

int segment_helper_create(const char* path) { return request('C', path); }

int segment_helper_remove(const char* path) { return request('U', path); }

}  // namespace memtide::rec

// Every way out of a process, from the main thread or from another one:
//   exit_ways WAY WHERE STATUS
// WAY: return (from main; WHERE must be main), exit, _exit, _Exit, quick_exit, signal (raises
// signal STATUS), exec (execs itself as `exit_ways return main STATUS`). WHERE: main, or thread
// (a second thread does it while main waits for it).
// Before leaving, it leaks one block of 3000 + STATUS bytes; an atexit handler leaks one of 2020
// bytes and an at_quick_exit handler one of 2121 (registered after the recorder's: they run
// before its own handlers and must be recorded).
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

static void* volatile sink;
static const char* g_self;
static std::string g_way;
static int g_status;

static void leave() {
  sink = malloc(3000 + static_cast<size_t>(g_status));
  if (g_way == "exit") exit(g_status);
  if (g_way == "_exit") _exit(g_status);
  if (g_way == "_Exit") _Exit(g_status);
  if (g_way == "quick_exit") quick_exit(g_status);
  if (g_way == "signal") raise(g_status);
  if (g_way == "exec") {
    const std::string status = std::to_string(g_status);
    execl(g_self, g_self, "return", "main", status.c_str(), static_cast<char*>(nullptr));
  }
  std::fprintf(stderr, "exit_ways: %s did not end the process\n", g_way.c_str());
  _exit(99);
}

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  g_self = argv[0];
  g_way = argv[1];
  g_status = std::atoi(argv[3]);
  atexit([] { sink = malloc(2020); });
  at_quick_exit([] { sink = malloc(2121); });
  if (g_way == "return") {
    sink = malloc(3000 + static_cast<size_t>(g_status));
    return g_status;
  }
  if (!std::strcmp(argv[2], "thread")) {
    std::thread t(leave);
    t.join();
    return 98;
  }
  leave();
}

// reach: a test program whose blocks, live at exit, are each reachable or not in a known way,
// for the leak scan (memtide run --leak-scan) and `memtide check`'s use of it.
//
//   reach          reachable at exit: held_by_global 200 B, held_in_list 3 x 64 B (a list whose
//                  head is in a global), held_by_tls 300 B (a thread_local of the main thread),
//                  held_by_thread 400 B (a local of a thread still blocked at exit);
//                  definite leaks: lost 500 B, lost_pair 16 B;
//                  indirect leaks: pair_child 2 x 24 B (pointed to only by the lost pair)
//   reach reachable   only the reachable blocks: nothing leaks
#include <pthread.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

// Globals with external linkage, so that the stores to them are kept.
struct Node {
  Node* next;
  char pad[56];
};
void* g_held;
Node* g_list;
thread_local void* t_held;

namespace {

void* volatile sink;

__attribute__((noinline)) void held_by_global() { g_held = std::malloc(200); }

__attribute__((noinline)) Node* list_node(Node* next) {
  auto* n = static_cast<Node*>(std::malloc(sizeof(Node)));
  n->next = next;
  return n;
}

__attribute__((noinline)) void held_in_list() {
  Node* head = nullptr;
  for (int i = 0; i < 3; ++i) head = list_node(head);
  g_list = head;
}

__attribute__((noinline)) void held_by_tls() { t_held = std::malloc(300); }

pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
bool g_ready = false;

__attribute__((noinline)) void* held_by_thread_alloc() { return std::malloc(400); }

void* thread_main(void*) {
  void* volatile mine = held_by_thread_alloc();
  pthread_mutex_lock(&g_mutex);
  g_ready = true;
  pthread_cond_broadcast(&g_cond);
  for (;;) pthread_cond_wait(&g_cond, &g_mutex);  // blocked until the process exits
  return mine;
}

__attribute__((noinline)) void lost() {
  void* p = std::malloc(500);
  std::memset(p, 0, 500);
  sink = p;
}

__attribute__((noinline)) void* pair_child() { return std::calloc(1, 24); }

__attribute__((noinline)) void lost_pair() {
  void** pair = static_cast<void**>(std::malloc(2 * sizeof(void*)));
  pair[0] = pair_child();
  pair[1] = pair_child();
  sink = pair;
}

// Overwrites the stack below the caller's frame, where the lost blocks' addresses were.
__attribute__((noinline)) void scrub_stack() {
  volatile char buf[64 * 1024];
  for (std::size_t i = 0; i < sizeof buf; ++i) buf[i] = 0;
}

}  // namespace

int main(int argc, char** argv) {
  const bool leaks = !(argc > 1 && std::strcmp(argv[1], "reachable") == 0);
  held_by_global();
  held_in_list();
  held_by_tls();
  pthread_t t;
  pthread_create(&t, nullptr, thread_main, nullptr);
  pthread_mutex_lock(&g_mutex);
  while (!g_ready) pthread_cond_wait(&g_cond, &g_mutex);
  pthread_mutex_unlock(&g_mutex);
  if (leaks) {
    lost();
    lost_pair();
  }
  sink = nullptr;
  scrub_stack();
  std::printf("reach: %s\n", leaks ? "leaking" : "reachable only");
  return 0;
}

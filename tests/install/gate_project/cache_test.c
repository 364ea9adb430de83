#include <stdlib.h>

struct entry {
  int key;
  struct entry* next;
};

static struct entry* head;

/* Forgets the list it replaces: the entries inserted before are lost. */
__attribute__((noinline)) static void cache_insert(int key) {
  struct entry* e = malloc(sizeof *e);
  e->key = key;
  e->next = NULL;
  head = e;
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 3;
  for (int i = 0; i < n; ++i) cache_insert(i);
  free(head);
  head = NULL;
  return 0;
}

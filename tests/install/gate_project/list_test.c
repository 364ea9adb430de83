#include <memtide.h>
#include <stdlib.h>

struct node {
  struct node* next;
};

int main(void) {
  memtide_mark("list built");
  struct node* head = NULL;
  for (int i = 0; i < 100; ++i) {
    struct node* n = malloc(sizeof *n);
    n->next = head;
    head = n;
  }
  while (head) {
    struct node* next = head->next;
    free(head);
    head = next;
  }
  return 0;
}

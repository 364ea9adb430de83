#include <stdlib.h>
#include <string.h>

static char* copy_word(const char* s) {
  char* w = malloc(strlen(s) + 1);
  strcpy(w, s);
  return w;
}

int main(void) {
  const char* words[] = {"alpha", "beta", "gamma"};
  for (int i = 0; i < 3; ++i) {
    char* w = copy_word(words[i]);
    if (strcmp(w, words[i]) != 0) return 1;
    free(w);
  }
  return 0;
}

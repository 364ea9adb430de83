// libmemtide.so's entry for `memtide attach` (recorder/attach.h): the injector calls it once it
// has loaded the library into the running process.
#include "recorder/attach.h"

extern "C" __attribute__((visibility("default"))) int memtide_attach_start(const char* config) {
  return memtide::rec::attach_start(config);
}

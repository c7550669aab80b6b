/* Feeds every file of the directories given as arguments to the linked
 * fuzz target, once each: the corpora run as ordinary tests in every build
 * (STYLE §3.10). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", path);
    return 1;
  }
  size_t cap = 4096, len = 0;
  uint8_t *buf = malloc(cap);
  size_t n;
  while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
    len += n;
    if (len == cap) {
      uint8_t *nb = realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
      cap *= 2;
    }
  }
  fclose(f);
  if (!buf) {
    fprintf(stderr, "out of memory reading %s\n", path);
    return 1;
  }
  /* An exact-size copy, so ASan catches reads past the input. */
  uint8_t *exact = malloc(len ? len : 1);
  if (!exact) {
    free(buf);
    return 1;
  }
  memcpy(exact, buf, len);
  free(buf);
  LLVMFuzzerTestOneInput(exact, len);
  free(exact);
  return 0;
}

int main(int argc, char **argv) {
  int failures = 0, files = 0;
  for (int a = 1; a < argc; a++) {
    DIR *dir = opendir(argv[a]);
    if (!dir) {
      fprintf(stderr, "cannot open directory %s\n", argv[a]);
      return 1;
    }
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
      if (e->d_name[0] == '.')
        continue;
      char path[4096];
      snprintf(path, sizeof(path), "%s/%s", argv[a], e->d_name);
      failures += run_file(path);
      files++;
    }
    closedir(dir);
  }
  fprintf(stderr, "%d corpus files run\n", files);
  return failures || files == 0 ? 1 : 0;
}

/*
 * fuzz_replay.c - runs a fuzz target's LLVMFuzzerTestOneInput over files, without libFuzzer.
 *
 *   fuzz_<target>_replay DIR|FILE...
 *
 * Ordinary (and ASan/TSan) test builds link each fuzz target with this driver, and CTest runs
 * it over the target's seed corpus and its regression inputs (tests/fuzz/regressions/<target>:
 * every input that once crashed a target is kept there), so a finding stays fixed without a
 * fuzzing toolchain. Exit 0 when every input ran; a path that does not exist, a crash or a
 * sanitizer report fails the test.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    for (size_t r; buf && (r = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += r;
        if (n == cap) {
            uint8_t *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                buf = NULL;
            }
            buf = nb;
        }
    }
    fclose(f);
    if (!buf)
        return -1;
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int runs = 0;
    LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) { /* a path CTest names must exist: a missing one is */
            perror(argv[i]);           /* a moved or mistyped directory, not "no inputs"  */
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (run_file(argv[i]) != 0)
                return 1;
            runs++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        for (struct dirent *e; d && (e = readdir(d));) {
            if (e->d_name[0] == '.')
                continue;
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
            if (run_file(path) != 0) {
                closedir(d);
                return 1;
            }
            runs++;
        }
        if (d)
            closedir(d);
    }
    printf("fuzz_replay: %d inputs ran\n", runs);
    return runs > 0 ? 0 : 1;
}

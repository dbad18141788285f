/*
 * hello.c - the smallest libmooncake_client program: open a client that contributes 16 MiB of
 * DRAM, put one object, read it back, close.
 *
 * Build against an installed library:
 *     cc hello.c -o hello $(pkg-config --cflags --libs mooncake_client)
 * Run with a master listening (mooncake_master):
 *     ./hello 127.0.0.1:50051
 */
#include <stdio.h>
#include <string.h>

#include <mooncake/client.h>

int main(int argc, char **argv)
{
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    if (argc > 1)
        cfg.master_address = argv[1];
    cfg.segment_size = 16u << 20;
    cfg.checksums = true;

    struct mc_client *client = NULL;
    int rc = mc_client_open(&cfg, &client);
    if (rc != MC_OK) {
        fprintf(stderr, "mc_client_open: %s\n", mc_strerror(rc));
        return 1;
    }
    const char *value = "world";
    rc = mc_put(client, "hello", value, strlen(value), NULL);
    if (rc != MC_OK) {
        fprintf(stderr, "mc_put: %s\n", mc_strerror(rc));
        mc_client_close(client);
        return 1;
    }
    char buf[64];
    int64_t n = mc_get(client, "hello", buf, sizeof(buf) - 1);
    if (n < 0) {
        fprintf(stderr, "mc_get: %s\n", mc_strerror((int)n));
        mc_client_close(client);
        return 1;
    }
    buf[n] = '\0';
    printf("hello -> %s (served by %s)\n", buf, mc_client_endpoint(client));
    mc_client_close(client);
    return strcmp(buf, value) == 0 ? 0 : 1;
}

/*
 * backup_cmd.c — `runnel backup NAME [--url URL]`: asks a running server
 * to take a backup (POST /__runnel/backup?name=NAME, ops/backup.h) and
 * waits for its answer, which it prints. The server writes the backup to
 * its own --backup-to destination.
 */
#include "ops/backup_cmd.h"
#include "ops/backup_format.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t to_stdout(char *data, size_t size, size_t n, void *arg) {
    (void)arg;
    return fwrite(data, size, n, stdout);
}

static int usage(FILE *out) {
    fprintf(out, "usage: runnel backup NAME [--url URL]\n"
                 "  asks the server at URL (or RUNNEL_URL; default http://127.0.0.1:4437) to\n"
                 "  write a point-in-time backup named NAME to its --backup-to destination,\n"
                 "  and prints the server's answer. Exit 0: complete; 1: refused or failed\n"
                 "  (nothing of it counts); 2: usage; 4: no answer.\n");
    return 2;
}

int rn_backup_cmd(int argc, char **argv) {
    const char *url = getenv("RUNNEL_URL"), *name = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--url") == 0 && i + 1 < argc) {
            url = argv[++i];
        } else if (strncmp(argv[i], "--url=", 6) == 0) {
            url = argv[i] + 6;
        } else if (argv[i][0] != '-' && !name) {
            name = argv[i];
        } else {
            fprintf(stderr, "runnel backup: unexpected argument %s\n", argv[i]);
            return usage(stderr);
        }
    }
    if (!name || !rn_backup_name_valid(name, strlen(name))) {
        fprintf(stderr, "runnel backup: NAME must be 1 to 64 of A-Z a-z 0-9 . _ -, not starting "
                        "with .\n");
        return usage(stderr);
    }
    if (!url)
        url = "http://127.0.0.1:4437";
    size_t n = strlen(url);
    while (n && url[n - 1] == '/')
        n--;
    char target[4096];
    snprintf(target, sizeof target, "%.*s/__runnel/backup?name=%s", (int)n, url, name);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURL *c = curl_easy_init();
    if (!c)
        return 4;
    curl_easy_setopt(c, CURLOPT_URL, target);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, to_stdout);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    curl_global_cleanup();
    if (rc != CURLE_OK) {
        fprintf(stderr, "runnel backup: no answer from %s: %s\n", target, curl_easy_strerror(rc));
        return 4;
    }
    if (status != 200) {
        fprintf(stderr, "\nrunnel backup: %s answered %ld: the backup is not complete\n", target,
                status);
        return 1;
    }
    return 0;
}

#include "vectors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)size + 1);
    if (text && fread(text, 1, (size_t)size, f) != (size_t)size) {
        free(text);
        text = NULL;
    }
    if (text) {
        text[size] = '\0';
    }
    fclose(f);
    return text;
}

/* Finds `"key":` inside [obj, end) and returns a pointer just past the colon. */
static const char *member(const char *obj, const char *end, const char *key)
{
    char pattern[80];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    size_t n = strlen(pattern);
    for (const char *p = obj; p + n <= end; p++) {
        if (memcmp(p, pattern, n) == 0) {
            p += n;
            while (*p == ' ') {
                p++;
            }
            return p;
        }
    }
    return NULL;
}

static int hex_bytes(const char *p, uint8_t *out)
{
    int n = 0;
    if (*p++ != '"') {
        return -1;
    }
    while (*p != '"') {
        unsigned v;
        if (sscanf(p, "%2x", &v) != 1 || n >= VEC_MAX_BYTES) {
            return -1;
        }
        out[n++] = (uint8_t)v;
        p += 2;
    }
    return n;
}

/* End of the JSON value that starts at p (object or list), skipping strings. */
static const char *value_end(const char *p)
{
    int depth = 0;
    int in_string = 0;
    for (; *p; p++) {
        if (in_string) {
            if (*p == '\\') {
                p++;
            } else if (*p == '"') {
                in_string = 0;
            }
        } else if (*p == '"') {
            in_string = 1;
        } else if (*p == '{' || *p == '[') {
            depth++;
        } else if (*p == '}' || *p == ']') {
            if (--depth == 0) {
                return p + 1;
            }
        }
    }
    return NULL;
}

int vectors_load(const char *path, vector_t **out)
{
    char *text = read_all(path);
    if (!text) {
        fprintf(stderr, "%s: cannot read\n", path);
        return -1;
    }
    int cap = 64, n = 0;
    vector_t *v = calloc((size_t)cap, sizeof *v);
    const char *p = strchr(text, '[');
    while (p && (p = strchr(p + 1, '{')) != NULL) {
        const char *end = value_end(p);
        if (!end) {
            break;
        }
        if (n == cap) {
            cap *= 2;
            v = realloc(v, (size_t)cap * sizeof *v);
        }
        vector_t *cur = &v[n];
        memset(cur, 0, sizeof *cur);
        const char *name = member(p, end, "name");
        const char *type = member(p, end, "type");
        const char *seq = member(p, end, "seq");
        const char *payload = member(p, end, "payload_hex");
        const char *frame = member(p, end, "frame_hex");
        const char *fields = member(p, end, "fields");
        if (!name || !type || !seq || !payload || !frame || !fields) {
            fprintf(stderr, "%s: vector %d lacks a member\n", path, n);
            free(text);
            free(v);
            return -1;
        }
        sscanf(name, "\"%63[^\"]\"", cur->name);
        cur->type = atoi(type);
        cur->seq = atoi(seq);
        cur->payload_len = hex_bytes(payload, cur->payload);
        cur->frame_len = hex_bytes(frame, cur->frame);
        const char *fields_end = value_end(fields);
        size_t flen = (size_t)(fields_end - fields);
        if (flen >= sizeof cur->fields) {
            flen = sizeof cur->fields - 1;
        }
        memcpy(cur->fields, fields, flen);
        n++;
        p = end;
    }
    free(text);
    *out = v;
    return n;
}

const vector_t *vectors_find(const vector_t *v, int n, const char *name)
{
    for (int i = 0; i < n; i++) {
        if (strcmp(v[i].name, name) == 0) {
            return &v[i];
        }
    }
    fprintf(stderr, "vector %s is missing\n", name);
    exit(2);
}

long long vec_field(const vector_t *v, const char *key)
{
    const char *p = member(v->fields, v->fields + strlen(v->fields), key);
    if (!p) {
        fprintf(stderr, "vector %s has no field %s\n", v->name, key);
        exit(2);
    }
    return atoll(p);
}

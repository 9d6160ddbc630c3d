/* Loads firmware/vectors/frames.json: just enough JSON for the generator's own output. */
#ifndef VECTORS_H
#define VECTORS_H

#include <stdint.h>

#define VEC_MAX_BYTES 1200

typedef struct {
    char name[64];
    int type;
    int seq;
    uint8_t payload[VEC_MAX_BYTES];
    int payload_len;
    uint8_t frame[VEC_MAX_BYTES];
    int frame_len;
    char fields[4096]; /* the raw "fields" object, for vec_field() */
} vector_t;

/* Returns the number of vectors read (allocated into *out), or -1 with a message. */
int vectors_load(const char *path, vector_t **out);
const vector_t *vectors_find(const vector_t *v, int n, const char *name);
/* An integer member of the vector's "fields"; aborts the run if it is missing. */
long long vec_field(const vector_t *v, const char *key);

#endif

/* A minimal test harness: CHECK records a failure with its location and continues. */
#ifndef CHECK_H
#define CHECK_H

#include <stdio.h>

extern int check_failures;
extern int check_count;

#define CHECK(cond)                                                                   \
    do {                                                                              \
        check_count++;                                                                \
        if (!(cond)) {                                                                \
            check_failures++;                                                         \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                             \
    } while (0)

#define CHECK_EQ(a, b)                                                                        \
    do {                                                                                      \
        long long check_a_ = (long long)(a), check_b_ = (long long)(b);                       \
        check_count++;                                                                        \
        if (check_a_ != check_b_) {                                                           \
            check_failures++;                                                                 \
            fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %s (%lld != %lld)\n", __FILE__,   \
                    __LINE__, #a, #b, check_a_, check_b_);                                    \
        }                                                                                     \
    } while (0)

/* Each test file exposes one entry point. */
void test_crc_ring(void);
void test_frame(const char *vectors_path);
void test_parser_fuzz(void);
void test_meter(const char *vectors_path);

#endif

/* Host unit tests of the firmware core: `make -C firmware test`. */
#include <stdio.h>

#include "check.h"

int check_failures;
int check_count;

int main(int argc, char **argv)
{
    const char *vectors = argc > 1 ? argv[1] : "vectors/frames.json";
    test_crc_ring();
    test_frame(vectors);
    test_parser_fuzz();
    test_meter(vectors);
    printf("%d checks, %d failed\n", check_count, check_failures);
    return check_failures ? 1 : 0;
}

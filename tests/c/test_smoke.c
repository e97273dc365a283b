#include "test.h"
#include <stdlib.h>

TEST(smoke_append_attend) {
    kvc_layer *layer;
    CHECK_OK(kvc_layer_create(2, 16, KVC_MODE_Q8, &layer));
    test_rng rng = test_rng_new(1);
    float k[32], v[32], q[16], out[16], probs[100];
    for (int i = 0; i < 100; i++) {
        test_fill_keys(&rng, k, 1, i, 2, 16);
        test_fill_normal(&rng, v, 32);
        CHECK_OK(kvc_layer_append(layer, k, v, NULL));
    }
    test_fill_normal(&rng, q, 16);
    CHECK_OK(kvc_layer_attend(layer, q, 1, out, probs));
    char buf[256];
    kvc_layer_describe(layer, buf, sizeof buf);
    printf("%s isa=%s\n", buf, kvc_kernel_isa());
    kvc_layer_free(layer);
}

RUN_TESTS(CASE(smoke_append_attend))

#include <math.h>

#include "kernels.h"

int kvc_all_finite__scalar(size_t n, const float *x) {
    for (size_t j = 0; j < n; j++) {
        if (!isfinite(x[j])) return 0;
    }
    return 1;
}
